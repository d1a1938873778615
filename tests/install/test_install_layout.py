"""`meson install` into a DESTDIR gives the documented layout, and the
installed programs work from it without the source or build tree
(docs/operations.md, "Installed layout").

- The install puts exactly the expected files (the programs, the man pages,
  the data files, the bash completions, the sysusers entry, the config and
  clone catalog the units read, and whatever systemd/ holds), with modes 0755
  and 0644, and no test program; a second install keeps an edited config and
  catalog.
- No installed program holds the source or build directory in its loaded
  data (debug info aside: it is stripped from a copy first), and the rootfs
  builder's default lock is the installed one.
- As root, in a private mount namespace where the DESTDIR tree is overlaid
  onto the prefix and an empty tmpfs hides the source and build trees, the
  installed programs run from the prefix: `sealed-probe-proxy --version`;
  `config` on examples/sealed-probes.json, with the build's own output; the
  installed `sealed-probe-rootfs build` with its default lock, then `verify`;
  `bundle --dry-run` on that rootfs, and `bundle --remove`; the installed
  config the units read validates; the installed bash completions, sourced,
  complete the installed programs' verbs and options; and `man` finds the
  installed pages.
  Without root that part SKIPs, saying so; under CI=true (root) it fails."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

IN_NS = "SP_INSTALL_TEST_IN_NAMESPACE"

# The integration suite's TAP writer, shared rather than copied.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap, env_path  # noqa: E402

tap = Tap()
ok, skip, finish = tap.ok, tap.skip, tap.finish


def run(argv, **kw):
    kw.setdefault("env", {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"})
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, **kw)


MESON = env_path("SP_MESON")
BUILD = os.path.realpath(env_path("SP_BUILD_ROOT"))
SOURCE = os.path.realpath(env_path("SP_SOURCE_ROOT"))
PREFIX = env_path("SP_PREFIX")
BINDIR = env_path("SP_BINDIR")
SBINDIR = env_path("SP_SBINDIR")
MANDIR = env_path("SP_MANDIR")
PKGDATADIR = env_path("SP_PKGDATADIR")
VERSION = env_path("SP_VERSION")
BUILD_PROXY = env_path("SP_PROXY")
EXAMPLE = env_path("SP_EXAMPLE_CONFIG")
SYSCONFDIR = env_path("SP_SYSCONFDIR")
COMPLETIONS = env_path("SP_COMPLETIONS_DIR")
SYSUSERS = env_path("SP_SYSUSERS_DIR")
UNIT_CONFIG = os.path.join(SYSCONFDIR, "sealed-probe", "config.json")
UNIT_CATALOG = os.path.join(SYSCONFDIR, "sealed-probe", "clones.txt")
DEBS = os.environ.get("SP_DEB_CACHE", "/var/cache/sealed-probe/debs")

PROGRAMS = {
    os.path.join(BINDIR, "sealed-probe"): 0o755,
    os.path.join(SBINDIR, "sealed-probe-proxy"): 0o755,
    os.path.join(SBINDIR, "sealed-probe-rootfs"): 0o755,
}
DATA = {
    os.path.join(MANDIR, "man1", "sealed-probe.1"): 0o644,
    os.path.join(MANDIR, "man5", "sealed-probe-config.5"): 0o644,
    os.path.join(MANDIR, "man8", "sealed-probe-proxy.8"): 0o644,
    os.path.join(MANDIR, "man8", "sealed-probe-rootfs.8"): 0o644,
    os.path.join(PKGDATADIR, "config.schema.json"): 0o644,
    os.path.join(PKGDATADIR, "rootfs.lock"): 0o644,
    os.path.join(PKGDATADIR, "seccomp.json"): 0o644,
    os.path.join(SYSUSERS, "sealed-probe.conf"): 0o644,
    UNIT_CONFIG + ".example": 0o644,
    UNIT_CONFIG: 0o644,
    UNIT_CATALOG: 0o644,
    **{os.path.join(COMPLETIONS, p): 0o644 for p in ("sealed-probe", "sealed-probe-proxy", "sealed-probe-rootfs")},
}
# The source each data file must equal, byte for byte.
DATA_SOURCES = {
    os.path.join(SYSUSERS, "sealed-probe.conf"): os.path.join(SOURCE, "systemd", "sealed-probe.sysusers"),
    UNIT_CONFIG + ".example": EXAMPLE,
    UNIT_CONFIG: EXAMPLE,
    **{os.path.join(COMPLETIONS, p): os.path.join(SOURCE, "shell", p + ".bash")
       for p in ("sealed-probe", "sealed-probe-proxy", "sealed-probe-rootfs")},
    os.path.join(PKGDATADIR, "config.schema.json"): os.path.join(SOURCE, "docs", "config.schema.json"),
    os.path.join(PKGDATADIR, "rootfs.lock"): os.path.join(SOURCE, "rootfs", "rootfs.lock"),
    os.path.join(PKGDATADIR, "seccomp.json"): os.path.join(SOURCE, "seccomp", "probe.json"),
}


UNIT_SUFFIXES = (".service", ".socket", ".timer", ".path", ".target", ".slice", ".mount")


def systemd_names():
    """(every name systemd/ may install, its units): `X.in` templates count
    as `X`.  Its units must be installed; its other files may be."""
    d = os.path.join(SOURCE, "systemd")
    if not os.path.isdir(d):
        return set(), set()
    names = {name[:-3] if name.endswith(".in") else name for name in os.listdir(d) if name != "meson.build"}
    return names, {name for name in names if name.endswith(UNIT_SUFFIXES)}


def installed_files(destdir):
    """{absolute installed path: mode} for every file below destdir."""
    out = {}
    for root, dirs, files in os.walk(destdir):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            full = os.path.join(root, name)
            out["/" + os.path.relpath(full, destdir)] = os.lstat(full).st_mode
    return out


def loaded_strings(path, tmp):
    """The binary's strings, debug info left out: the compile directory in
    DWARF is not a path the program uses."""
    copy = os.path.join(tmp, "stripped")
    r = run(["objcopy", "--strip-debug", path, copy])
    if r.returncode != 0:
        return None
    r = run(["strings", "-a", copy])
    os.unlink(copy)
    return r.stdout if r.returncode == 0 else None


def check_layout(destdir, tmp):
    # A packager's umask: the modes below are what a distribution gets.
    os.umask(0o022)
    r = run([MESON, "install", "-C", BUILD, "--destdir", destdir, "--no-rebuild", "--quiet"])
    if not ok(r.returncode == 0, "meson install --destdir succeeds", r.stdout + r.stderr):
        finish()

    files = installed_files(destdir)
    for path, mode in {**PROGRAMS, **DATA}.items():
        have = files.get(path)
        ok(have is not None and stat.S_ISREG(have) and stat.S_IMODE(have) == mode,
           f"{path} is installed, a regular file of mode {mode:04o}",
           "missing" if have is None else f"mode {stat.S_IMODE(have):04o}, type {stat.S_IFMT(have):o}")
    for path, source in DATA_SOURCES.items():
        try:
            with open(destdir + path, "rb") as f, open(source, "rb") as g:
                same = f.read() == g.read()
        except OSError as e:
            same = e
        ok(same is True, f"{path} is {os.path.relpath(source, SOURCE)}, byte for byte", same)

    with open(destdir + os.path.join(SYSUSERS, "sealed-probe.conf")) as f:
        entries = [ln.split() for ln in f if ln.strip() and not ln.startswith("#")]
    ok(entries == [["g", "sealed-probe", "-"]], "the sysusers entry makes the socket's group, sealed-probe",
       entries)
    with open(destdir + os.path.join(PKGDATADIR, "systemd", "docker-daemon.conf")) as f:
        dropin = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    ok(dropin == ["[Unit]", "Requires=docker.service", "After=docker.service"],
       "the docker drop-in starts the proxy after the Docker daemon and stops it with it", dropin)
    # A second install over the first keeps what the operator wrote.
    for path in (UNIT_CONFIG, UNIT_CATALOG):
        with open(destdir + path, "w") as f:
            f.write("# edited by the operator\n")
    r = run([MESON, "install", "-C", BUILD, "--destdir", destdir, "--no-rebuild", "--quiet"])
    kept = []
    for path in (UNIT_CONFIG, UNIT_CATALOG):
        with open(destdir + path) as f:
            kept.append(f.read())
    ok(r.returncode == 0 and kept == ["# edited by the operator\n"] * 2,
       "a second install keeps an edited config.json and clones.txt", (r.returncode, kept, r.stderr))
    shutil.copy(EXAMPLE, destdir + UNIT_CONFIG)

    systemd_files, units = systemd_names()
    for name in sorted(units):
        where = [p for p in files if os.path.basename(p) == name]
        ok(len(where) == 1 and stat.S_IMODE(files[where[0]]) == 0o644,
           f"systemd/{name} is installed once, mode 0644", where)
    unexpected = sorted(p for p in files
                        if p not in PROGRAMS and p not in DATA and os.path.basename(p) not in systemd_files)
    ok(not unexpected, "nothing else is installed (no test program, no stray file)", unexpected)
    ok(not any(os.path.basename(p).startswith(("check_", "test_", "fuzz_")) for p in files),
           "no test program is installed", sorted(files))
    bad_dirs = []
    for root, dirs, _ in os.walk(destdir):
        for d in dirs:
            m = stat.S_IMODE(os.lstat(os.path.join(root, d)).st_mode)
            if m != 0o755:
                bad_dirs.append(f"{os.path.join(root, d)}: {m:04o}")
    ok(not bad_dirs, "every installed directory is 0755", bad_dirs)

    for path in PROGRAMS:
        text = loaded_strings(destdir + path, tmp)
        if not ok(text is not None, f"{os.path.basename(path)}: objcopy and strings read it"):
            continue
        leaks = [s for s in text.splitlines() if SOURCE in s or BUILD in s or destdir in s]
        ok(not leaks, f"{os.path.basename(path)}: names neither the source nor the build directory", leaks[:5])
    text = loaded_strings(destdir + os.path.join(SBINDIR, "sealed-probe-rootfs"), tmp) or ""
    lock = os.path.join(PKGDATADIR, "rootfs.lock")
    ok(lock in text.splitlines() and os.path.isfile(destdir + lock),
       f"sealed-probe-rootfs: its default lock is the installed {lock}")
    text = loaded_strings(destdir + os.path.join(SBINDIR, "sealed-probe-proxy"), tmp) or ""
    ok({"/var/lib/sealed-probe/state", "/var/lib/sealed-probe/rootfs"} <= set(text.splitlines()),
       "sealed-probe-proxy: its default state and rootfs are under /var/lib/sealed-probe")


def hide(path):
    """An empty, unreadable tmpfs over path, in this mount namespace."""
    return run(["mount", "-t", "tmpfs", "-o", "mode=000,size=4k", "sp-hidden", path])


def check_installed_system(destdir, tmp, expected_config):
    """In this private mount namespace: the install at its prefix, the trees
    hidden, the installed programs run."""
    if not ok(os.path.isdir(PREFIX), f"the prefix {PREFIX} exists, to overlay the install onto"):
        return
    r = run(["mount", "-t", "overlay", "sp-installed", "-o", f"lowerdir={destdir + PREFIX}:{PREFIX}", PREFIX])
    if not ok(r.returncode == 0, f"the install is overlaid onto {PREFIX}", r.stderr):
        return
    hidden = [SOURCE] + ([BUILD] if not BUILD.startswith(SOURCE + "/") else [])
    results = [hide(p) for p in hidden]
    ok(all(r.returncode == 0 for r in results) and all(not os.access(p, os.R_OK) or not os.listdir(p)
                                                       for p in hidden),
       "the source and build trees are hidden", [r.stderr for r in results])

    proxy = os.path.join(SBINDIR, "sealed-probe-proxy")
    builder = os.path.join(SBINDIR, "sealed-probe-rootfs")
    r = run([proxy, "--version"])
    ok(r.returncode == 0 and r.stdout.startswith(f"sealed-probe-proxy {VERSION}\ncommit: ")
       and "\nlibraries: " in r.stdout, "installed: `sealed-probe-proxy --version`", r.stdout + r.stderr)

    config = os.path.join(tmp, "sealed-probes.json")
    r = run([proxy, "config", "--config", config])
    ok(r.returncode == 0 and r.stdout == expected_config and r.stderr == "",
       "installed: `config` validates examples/sealed-probes.json as the build's proxy does",
       f"exit {r.returncode}\n{r.stdout}{r.stderr}")

    rootfs = os.path.join(tmp, "rootfs")
    r = run([builder, "build", "--debs", DEBS, "--out", rootfs])
    if not ok(r.returncode == 0 and r.stdout.startswith("sha256:"),
              "installed: `sealed-probe-rootfs build` with its default lock, the installed one",
              f"{r.stdout}{r.stderr} (run scripts/rootfs-fetch first?)"):
        return
    digest = r.stdout
    r = run([builder, "verify", rootfs])
    ok(r.returncode == 0 and r.stdout == digest, "installed: `sealed-probe-rootfs verify` gives the build's digest",
       r.stdout + r.stderr)

    script = os.path.join(tmp, "probe.py")
    with open(script, "w") as f:
        f.write("print('hello')\n")
    work = os.path.join(tmp, "work")
    os.mkdir(work, 0o711)
    out = os.path.join(work, "bundle")
    r = run([proxy, "bundle", "--dry-run", "--config", config, "--repo", "sample/hello", "--script", script,
             "--out", out, "--rootfs", rootfs])
    good = r.returncode == 0 and r.stdout == os.path.realpath(out) + "\n"
    if ok(good, "installed: `bundle --dry-run` writes a bundle from that rootfs", f"exit {r.returncode}\n{r.stderr}"):
        with open(os.path.join(out, "config.json")) as f:
            c = json.load(f)
        with open(os.path.join(out, "rootfs", "digest")) as f:
            copied = f.read()
        ok(c["root"]["readonly"] is True and copied == digest and c["linux"]["seccomp"]["syscalls"],
           "installed: the bundle runs the verified rootfs copy, read-only, under the compiled-in seccomp profile",
           json.dumps(c["root"]))
        r = run([proxy, "bundle", "--remove", out])
        ok(r.returncode == 0 and not os.path.lexists(out), "installed: `bundle --remove` takes the bundle away",
           r.stderr)

    r = run([proxy, "config", "--config", UNIT_CONFIG])
    ok(r.returncode == 0 and r.stdout == expected_config,
       f"installed: the units' {UNIT_CONFIG}, the example, validates", r.stdout + r.stderr)
    check_completions()

    if shutil.which("man"):
        env = {"PATH": "/usr/bin:/bin", "MANPATH": MANDIR, "LC_ALL": "C.UTF-8"}
        for section, page in (("1", "sealed-probe"), ("5", "sealed-probe-config"), ("8", "sealed-probe-proxy"),
                              ("8", "sealed-probe-rootfs")):
            r = run(["man", "-w", section, page], env=env)
            ok(r.returncode == 0 and r.stdout.strip() == os.path.join(MANDIR, "man" + section, f"{page}.{section}"),
               f"installed: `man {section} {page}` finds the installed page", r.stdout + r.stderr)
    elif os.environ.get("CI") == "true":
        ok(False, "installed: man finds the installed pages", "man-db is not installed; under CI=true that fails")
    else:
        skip("installed: man finds the installed pages", "man-db is not installed")


def check_completions():
    """The installed completions, sourced into bash with the installed
    programs on PATH: what each completes."""
    script = """
set -u
for f in sealed-probe-proxy sealed-probe-rootfs sealed-probe; do . "$COMPLETIONS/$f"; done
t() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); $F; echo "${COMPREPLY[*]}"; }
F=_sealed_probe_proxy; t sealed-probe-proxy ''; t sealed-probe-proxy bundle --d; t sealed-probe-proxy serve --snapshot ''
F=_sealed_probe_rootfs; t sealed-probe-rootfs ''; t sealed-probe-rootfs build --
F=_sealed_probe; t sealed-probe ''
"""
    env = {"PATH": f"{SBINDIR}:{BINDIR}:/usr/bin:/bin", "COMPLETIONS": COMPLETIONS, "LC_ALL": "C.UTF-8"}
    r = run(["bash", "-c", script], env=env)
    got = r.stdout.splitlines()
    verbs = run([os.path.join(SBINDIR, "sealed-probe-proxy"), "--help"]).stdout
    want_verbs = [ln.split()[0] for ln in verbs.split("verbs:\n", 1)[-1].splitlines() if ln.startswith("  ")]
    ok(r.returncode == 0 and len(got) == 6 and got[0].split()[:len(want_verbs)] == want_verbs
       and got[1] == "--docker-socket --docker-state-dir --dry-run" and got[2] == "overlay copy",
       "installed: the proxy's completion offers its verbs and each verb's options, read from its --help",
       (got, r.stderr))
    ok(len(got) == 6 and got[3].split()[:2] == ["build", "verify"] and got[4] == "--debs --lock --no-pyc --out",
       "installed: the rootfs builder's completion offers its commands and their options", got)
    ok(len(got) == 6 and got[5] == "--repo --outcome --version",
       "installed: the client's completion offers exactly its options", got)


def main():
    tmp = tempfile.mkdtemp(prefix="sp-install-")
    os.chmod(tmp, 0o711)
    if os.path.realpath(tmp).startswith((SOURCE + "/", BUILD + "/")):
        print("Bail out! TMPDIR lies in the source or build tree, which this test hides", flush=True)
        sys.exit(1)
    destdir = os.path.join(tmp, "destdir")
    try:
        check_layout(destdir, tmp)
        shutil.copy(EXAMPLE, os.path.join(tmp, "sealed-probes.json"))
        r = run([BUILD_PROXY, "config", "--config", EXAMPLE])
        expected = r.stdout if r.returncode == 0 else None
        ok(expected is not None, "the build's proxy validates examples/sealed-probes.json", r.stderr)
        os.chdir(tmp)
        if os.geteuid() != 0:
            reason = "running the installed programs needs root (a private mount namespace; CI runs as root)"
            if os.environ.get("CI") == "true":
                ok(False, "installed programs run without the source tree", reason + "; under CI=true that fails")
            else:
                skip("installed programs run without the source tree", reason)
        elif expected is not None:
            check_installed_system(destdir, tmp, expected)
    finally:
        os.chdir("/")
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    if os.geteuid() == 0 and os.environ.get(IN_NS) != "1":
        # The whole test in a private mount namespace: what it mounts there
        # goes with it, however it ends.
        os.environ[IN_NS] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "--", sys.executable,
                              os.path.abspath(__file__)])
    main()
