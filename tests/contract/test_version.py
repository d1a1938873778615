"""What each program says of itself (docs/operations.md, "Versions"):

- `sealed-probe-proxy version`, `--version` and `-V` print the same lines:
  the name and the project's version, the commit the build came from, the
  wire protocol's version, each backend with what its preflight accepts,
  and the loaded libraries, each at the version pkg-config reports for it
  on this machine (the build's own libraries, loaded at run time);
- `sealed-probe-rootfs --version` and `-V`: name, version, the same commit,
  the default lock and its libarchive;
- `sealed-probe --version`, alone: its name, version, commit and protocol
  on stderr, and the one ERROR line on stdout as always; it reads no script
  and connects to nothing (a socket the test listens on stays untouched);
  with anything beside it, it is an ordinary bad call: ERROR, and nothing
  on stderr;
- none of it carries the environment's secrets (a canary token).

TAP on stdout."""

import os
import re
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap, env_path  # noqa: E402

PROXY = env_path("SP_PROXY")
CLIENT = env_path("SP_CLIENT")
ROOTFS_TOOL = env_path("SP_ROOTFS_TOOL")
PROJECT_VERSION = os.environ["SP_PROJECT_VERSION"]
ERROR_LINE = '{"result":"ERROR"}\n'
CANARY = "ghp_VERSIONCANARY0123456789abcdefABCDEF"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GH_TOKEN": CANARY, "GITHUB_TOKEN": CANARY}
# The libraries the proxy names, with their pkg-config modules.
LIBRARIES = {"libseccomp": "libseccomp", "yajl": "yajl", "libyaml": "yaml-0.1", "libarchive": "libarchive",
             "libcurl": "libcurl", "libgit2": "libgit2", "nettle": "nettle", "zlib": "zlib"}
BACKENDS = ("runc", "gvisor", "docker", "sbx")

tap = Tap()


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL, timeout=60,
                          **kw)


def same_version(printed, modversion):
    """printed is modversion, or its leading dotted parts (nettle says 3.8 of 3.8.1)."""
    return printed == modversion or (modversion.startswith(printed + ".") and printed.count(".") >= 1)


# ---- the proxy ------------------------------------------------------------------
outs = {flag: run([PROXY, flag]) for flag in ("version", "--version", "-V")}
tap.ok(all(r.returncode == 0 and r.stderr == "" for r in outs.values())
       and len({r.stdout for r in outs.values()}) == 1,
       "proxy: `version`, `--version` and `-V` exit 0 and print the same lines, on stdout only",
       {k: (r.returncode, r.stderr[:200]) for k, r in outs.items()})
text = outs["version"].stdout
lines = text.splitlines()
tap.ok(lines[:1] == [f"sealed-probe-proxy {PROJECT_VERSION}"], "proxy: the first line is its name and version",
       lines[:1])
commit = next((ln[len("commit: "):] for ln in lines if ln.startswith("commit: ")), None)
tap.ok(commit is not None and re.fullmatch(r"[0-9a-zA-Z.~_-]+", commit) is not None,
       "proxy: a `commit:` line names the commit (git describe, or `unknown`)", commit)
tap.ok("protocol: 2" in lines, "proxy: the wire protocol's highest version is 2", text)
backend_lines = {}
if "backends:" in lines:
    for ln in lines[lines.index("backends:") + 1:]:
        m = re.fullmatch(r"  ([a-z]+): (.+)", ln)
        if not m:
            break
        backend_lines[m.group(1)] = m.group(2)
tap.ok(set(backend_lines) == set(BACKENDS) and "1.1.0" in backend_lines["runc"]
       and "2022-12-19" in backend_lines["gvisor"] and "1.41" in backend_lines["docker"]
       and "0.37.1" in backend_lines["sbx"],
       "proxy: every backend, with the runtime versions its preflight accepts", backend_lines)
libs_line = next((ln for ln in lines if ln.startswith("libraries: ")), "")
printed = dict(re.findall(r"(lib[a-z0-9]+|yajl|nettle|zlib) ([0-9][0-9A-Za-z.+~-]*)", libs_line))
wrong = {}
for name, module in LIBRARIES.items():
    r = subprocess.run(["pkg-config", "--modversion", module], capture_output=True, text=True)
    want = r.stdout.strip()
    if r.returncode != 0 or not same_version(printed.get(name, ""), want):
        wrong[name] = (printed.get(name), want)
tap.ok(not wrong and len(printed) == len(LIBRARIES),
       "proxy: each library it loads, at the version pkg-config reports on this machine",
       (wrong, libs_line))
tap.ok(CANARY not in text, "proxy: nothing of its environment (a token) is in what it prints")
r = run([PROXY, "version", "--verbose"])
tap.ok(r.returncode == 2 and "unknown option `--verbose`" in r.stderr and r.stdout == "",
       "proxy: `version` takes no option: another is bad usage", r.stderr)

# ---- the rootfs builder --------------------------------------------------------
outs = {flag: run([ROOTFS_TOOL, flag]) for flag in ("--version", "-V")}
rtext = outs["--version"].stdout
rlines = rtext.splitlines()
tap.ok(all(r.returncode == 0 and r.stderr == "" for r in outs.values())
       and outs["-V"].stdout == rtext and rlines[:1] == [f"sealed-probe-rootfs {PROJECT_VERSION}"]
       and f"commit: {commit}" in rlines and any(ln.startswith("lock: /") for ln in rlines)
       and any(re.fullmatch(r"libraries: libarchive [0-9.]+", ln) for ln in rlines),
       "rootfs: `--version` and `-V` print its name and version, the proxy's commit, the default lock and "
       "its libarchive", (rtext, {k: r.stderr for k, r in outs.items()}))

# ---- the client -----------------------------------------------------------------
with tempfile.TemporaryDirectory(prefix="sp-version-") as tmp:
    path = os.path.join(tmp, "probe.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.setblocking(False)
    script_r, script_w = os.pipe()
    os.write(script_w, b"print(1)\n")
    env = dict(ENV, SEALED_PROBE_SOCKET=path, SEALED_PROBE_TIMEOUT="30")
    r = subprocess.run([CLIENT, "--version"], capture_output=True, text=True, env=env, stdin=script_r, timeout=60)
    try:
        listener.accept()
        contacted = True
    except BlockingIOError:
        contacted = False
    os.set_blocking(script_r, False)
    try:
        unread = os.read(script_r, 64)
    except BlockingIOError:
        unread = b""
    os.close(script_w)
    os.close(script_r)
    listener.close()
    clines = r.stderr.splitlines()
    tap.ok(r.returncode == 0 and r.stdout == ERROR_LINE,
           "client: `--version` is no probe: stdout gets the one ERROR line, and it exits 0", (r.returncode, r.stdout))
    tap.ok(clines == [f"sealed-probe {PROJECT_VERSION}", f"commit: {commit}", "protocol: 2"],
           "client: its name and version, the proxy's commit and the protocol go to stderr", r.stderr)
    tap.ok(not contacted and unread == b"print(1)\n",
           "client: `--version` connects to nothing and reads no script", (contacted, unread))
    tap.ok(CANARY not in r.stderr + r.stdout, "client: nothing of its environment (a token) is in what it prints")
    r = subprocess.run([CLIENT, "--version", "--repo", "acme/alpha"], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=60)
    tap.ok(r.returncode == 0 and r.stdout == ERROR_LINE and r.stderr == "",
           "client: `--version` with anything beside it is an ordinary bad call: ERROR, nothing on stderr",
           (r.stdout, r.stderr))

tap.finish()
