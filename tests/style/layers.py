"""The layering rule (docs/architecture.md), checked over src/ as TAP.

The folders' order is src/meson.build's `subdir(...)` order, so the build
and this check read one list.  A file under src/F/ may include:
  - its own folder's headers and those of folders before F, as "G/name.h"
    (client/ is the exception that proves the rule: base/ only);
  - "build_config.h" and "build_commit.h", the build's generated settings
    and the commit it was built from;
  - system headers, except that base/ takes no library beyond libc and
    nothing of libc's that touches the host (files, processes, mounts).
Every "G/name.h" must exist, no include climbs with "..", and every header
sits beside a source of its own name, unless it is listed below as
header-only, with what it holds."""

import os
import re
import sys

ROOT = sys.argv[1]
SRC = os.path.join(ROOT, "src")

# Headers with no .c of their own name: types, constants and inline helpers,
# or one folder's shared declarations.
HEADER_ONLY = {
    "base/bounds.h": "every bound, as named constants",
    "base/bytes.h": "a byte string's struct",
    "base/cleanup.h": "the cleanup attributes' inline helpers",
    "proxy/help.h": "the verbs' --help, generated from the man page (man/help_text.py)",
    "proxy/verbs.h": "the verb table, one entry per verb_*.c",
    "rootfs/help.h": "the commands' --help, generated from the man page (man/help_text.py)",
    "runtimes/backends.h": "each backend's open function, one per backend file",
    "seccomp/profile_internal.h": "profile.c's parser, for tests/seccomp",
    "seed/git_parse.h": "the git config and refs parsers' shared types",
    "seed/pack_item.h": "one pack entry's struct",
    "serve/serve.h": "the daemon's shared state, across serve/*.c",
}
# Libraries base/ must not reach, and libc headers that touch the host.
BASE_FORBIDDEN = re.compile(
    r"^(yajl/|yaml\.h|archive|curl/|git2|seccomp\.h|nettle/|zlib\.h|pthread\.h|fcntl\.h|"
    r"sys/(stat|mount|socket|wait|prctl|ioctl|mman|file|statvfs|signalfd|syscall)\.h|poll\.h|spawn\.h)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def check(results, cond, name, detail=""):
    """One TAP line, kept to be printed in order; the plan comes last."""
    n = len(results) + 1
    results.append(cond)
    print(f"{'ok' if cond else 'not ok'} {n} - {name}", flush=True)
    if detail and not cond:
        for line in str(detail).splitlines():
            print(f"# {line}", flush=True)


def folder_order():
    with open(os.path.join(SRC, "meson.build")) as f:
        return re.findall(r"^subdir\('([a-z_]+)'\)", f.read(), re.M)


def main():
    results = []
    order = folder_order()
    rank = {name: i for i, name in enumerate(order)}
    on_disk = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
    check(results, sorted(order) == on_disk, "every folder of src/ is a layer of src/meson.build, and every layer a folder",
           f"layers {order}\nfolders {on_disk}")

    allowed = {}
    for name in order:
        allowed[name] = {"base"} if name == "client" else set(order[: rank[name] + 1]) - {"client", "proxy"} | {name}

    sources = []
    for folder in order:
        top = os.path.join(SRC, folder)
        for dirpath, _, files in os.walk(top):
            for fn in sorted(files):
                if fn.endswith((".c", ".h")):
                    sources.append((folder, os.path.relpath(os.path.join(dirpath, fn), SRC)))

    for folder, rel in sources:
        with open(os.path.join(SRC, rel)) as f:
            text = f.read()
        bad = []
        for kind, name in INCLUDE.findall(text):
            if kind == '"':
                if name in ("build_config.h", "build_commit.h"):
                    continue
                if ".." in name.split("/"):
                    bad.append(f'"{name}" climbs out of its folder')
                    continue
                parts = name.split("/")
                if len(parts) != 2:
                    bad.append(f'"{name}" is not "folder/name.h"')
                elif parts[0] not in allowed[folder]:
                    bad.append(f'"{name}": {folder}/ may include only {sorted(allowed[folder])}')
                elif not os.path.isfile(os.path.join(SRC, name)):
                    bad.append(f'"{name}" does not exist')
            elif folder == "base" and BASE_FORBIDDEN.match(name):
                bad.append(f"<{name}>: base/ is libc only and touches nothing outside the process")
        check(results, not bad, f"src/{rel} includes only what its layer may", "\n".join(bad))

    for folder, rel in sources:
        if not rel.endswith(".h"):
            continue
        has_source = os.path.isfile(os.path.join(SRC, rel[:-2] + ".c"))
        check(results, has_source or rel in HEADER_ONLY, f"src/{rel} sits beside the source it is named after",
               "no .c of its name beside it, and it is not listed as header-only in tests/style/layers.py")
    for rel in sorted(HEADER_ONLY):
        check(results, os.path.isfile(os.path.join(SRC, rel)), f"header-only src/{rel} still exists")

    stray = [p for p in os.listdir(ROOT) if p in ("include", "runtimes")]
    check(results, not stray, "no code lives outside src/ (no include/, no top-level runtimes/)", stray)

    print(f"1..{len(results)}", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
