"""The systemd units as built (systemd/*.service.in, configured by meson):
`systemd-analyze verify` passes on them and fails on broken copies; the
credential goes only to the staging unit and only through systemd's
credential directives; their paths agree with the programs' defaults; and
every directive is explained, in the unit and in docs/operations.md.  That
the units really start is test_systemd_units.py's job (suite integration)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap, env_path, skip_all  # noqa: E402

UNITS_DIR = env_path("SP_UNITS_DIR")
SBINDIR = os.environ["SP_UNIT_SBINDIR"]
PROXY = env_path("SP_PROXY")
SOURCE = env_path("SP_SOURCE_ROOT")
CONFIG_H = env_path("SP_CONFIG_H")
STAGE, SERVE = "sealed-probe-stage.service", "sealed-probe-proxy.service"
DROPIN = os.path.join(SOURCE, "systemd", "host-mount-namespace.conf")

ANALYZE = shutil.which("systemd-analyze")
if ANALYZE is None:
    skip_all("systemd-analyze is not installed (Debian: systemd)")

# Options that give a unit a mount namespace of its own (systemd.exec(5)).
MOUNT_NAMESPACE = ["ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
                   "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
                   "ProtectProc", "ProcSubset", "ReadOnlyPaths", "ReadWritePaths", "InaccessiblePaths",
                   "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths", "RootDirectory", "RootImage",
                   "MountAPIVFS", "NetworkNamespacePath"]
CREDENTIAL_KEYS = ["LoadCredential", "LoadCredentialEncrypted", "SetCredential", "SetCredentialEncrypted",
                   "ImportCredential"]
ENVIRONMENT_KEYS = ["Environment", "EnvironmentFile", "PassEnvironment"]
# Self-explanatory lines that need no comment of their own.
PLAIN = {"Description", "Documentation", "WantedBy"}

tap = Tap()


def read(path):
    with open(path) as f:
        return f.read()


def directives(text):
    """[(line number, key, value)] of every directive line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.append((n, key.strip(), value.strip()))
    return out


def values(text, key):
    return [v for _, k, v in directives(text) if k == key]


def config_h(name):
    m = re.search(rf'#define {name} "([^"]*)"', read(CONFIG_H))
    return m.group(1) if m else None


def option(exec_line, name):
    words = exec_line.split()
    return words[words.index(name) + 1] if name in words else None


def verify(units, dropin=None):
    """Copies units into a scratch directory, with the installed binary's path
    replaced by the built one (verify needs ExecStart's program to exist),
    and runs systemd-analyze verify there.  Passing means exit 0 and not one
    line of diagnostics: verify warns and exits 0 on an unknown key."""
    scratch = tempfile.mkdtemp(prefix="sp-units-verify-")
    try:
        for name, text in units.items():
            with open(os.path.join(scratch, name), "w") as f:
                f.write(text.replace(os.path.join(SBINDIR, "sealed-probe-proxy"), PROXY))
        if dropin is not None:
            os.mkdir(os.path.join(scratch, SERVE + ".d"))
            with open(os.path.join(scratch, SERVE + ".d", "dropin.conf"), "w") as f:
                f.write(dropin)
        r = subprocess.run([ANALYZE, "verify", "--man=no"] + [os.path.join(scratch, n) for n in units],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=scratch, timeout=120)
        return r.returncode == 0 and (r.stdout + r.stderr).strip() == "", (r.returncode, r.stdout + r.stderr)
    finally:
        shutil.rmtree(scratch)


stage = read(os.path.join(UNITS_DIR, STAGE))
serve = read(os.path.join(UNITS_DIR, SERVE))
dropin = read(DROPIN)
units = {STAGE: stage, SERVE: serve}

# ---- systemd-analyze verify: passes on the units, fails on broken ones ----
ok, detail = verify(units)
tap.ok(ok, "systemd-analyze verify passes on both generated units, with no diagnostic", detail)
ok, detail = verify(units, dropin)
tap.ok(ok, "systemd-analyze verify passes on the proxy unit with the host-mount-namespace.conf drop-in", detail)
broken = [
    ("a misspelt directive", SERVE, "NoNewPrivileges=yes", "NoNewPrivilege=yes"),
    ("a bad Type=", SERVE, "Type=notify", "Type=notified"),
    ("a bad boolean", STAGE, "RemainAfterExit=yes", "RemainAfterExit=perhaps"),
    ("an ExecStart= program that does not exist", STAGE, "sealed-probe-proxy stage", "sealed-probe-proxyy stage"),
    ("a Requires= on a unit that does not exist", SERVE, "Requires=sealed-probe-stage.service",
     "Requires=sealed-probe-stagee.service"),
]
for description, name, old, new in broken:
    copy = dict(units)
    tap.ok(old in copy[name], f"(the broken copy's original text `{old}` is in {name})")
    copy[name] = copy[name].replace(old, new, 1)
    ok, detail = verify(copy)
    tap.ok(not ok, f"systemd-analyze verify fails on a copy of {name} with {description}", detail)
ok, detail = verify(units, dropin.replace("ProtectHome=no", "ProtectHomeX=no"))
tap.ok(not ok, "systemd-analyze verify fails on a misspelt key in the drop-in", detail)

# ---- credentials: only the stage unit, only systemd's mechanism -----------
for name, text in list(units.items()) + [("host-mount-namespace.conf", dropin)]:
    keys = {k for _, k, _ in directives(text)}
    tap.ok(not keys & set(ENVIRONMENT_KEYS), f"{name}: no Environment=, EnvironmentFile= or PassEnvironment=",
           keys & set(ENVIRONMENT_KEYS))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    tap.ok(not any(re.search(r"gh[pousr]_|GH_TOKEN|GITHUB_TOKEN|CREDENTIALS_DIRECTORY", line) for line in lines),
           f"{name}: no token, and no token variable, outside comments")
serve_keys = {k for _, k, _ in directives(serve) + directives(dropin)}
tap.ok(not serve_keys & set(CREDENTIAL_KEYS), "the proxy unit and its drop-in carry no credential directive at all",
       serve_keys & set(CREDENTIAL_KEYS))
stage_creds = [(k, v) for _, k, v in directives(stage) if k in CREDENTIAL_KEYS]
m = re.search(r'#define TOKEN_CREDENTIAL "([^"]+)"', read(os.path.join(SOURCE, "src", "proxy", "verb_stage.c")))
tap.ok(m and stage_creds == [("LoadCredentialEncrypted", m.group(1))],
       "the stage unit loads exactly one credential, by LoadCredentialEncrypted=, under the name stage reads "
       "(TOKEN_CREDENTIAL in src/proxy/verb_stage.c), from systemd's credential store (no path)",
       (stage_creds, m and m.group(1)))

# ---- types, order, and the stage unit's mounts -----------------------------
tap.ok(values(stage, "Type") == ["oneshot"] and values(stage, "RemainAfterExit") == ["yes"],
       "stage: Type=oneshot, RemainAfterExit=yes")
tap.ok(values(serve, "Type") == ["notify"] and values(serve, "NotifyAccess") == ["main"]
       and values(serve, "Requires") == [STAGE] and values(serve, "After") == [STAGE],
       "proxy: Type=notify, NotifyAccess=main, Requires= and After= the stage unit")
stage_ns = [k for _, k, _ in directives(stage) if k in MOUNT_NAMESPACE]
tap.ok(not stage_ns, "stage: no option that makes a mount namespace (its seeds' mounts must reach the host's)",
       stage_ns)
left = [k for k in MOUNT_NAMESPACE if k in {k2 for _, k2, _ in directives(serve)}
        and values(dropin, k) != ["no"]]
tap.ok(not left, "host-mount-namespace.conf turns off every mount-namespace option the proxy unit sets", left)

# ---- paths agree with systemd's directories and the programs' defaults ----
for name, text in units.items():
    exec_start = values(text, "ExecStart")[0]
    state = option(exec_start, "--state")
    tap.ok(values(text, "StateDirectory") == ["sealed-probe/state"] and values(text, "StateDirectoryMode") == ["0700"]
           and state == "/var/lib/" + values(text, "StateDirectory")[0] == config_h("SP_DEFAULT_STATE"),
           f"{name}: --state is its StateDirectory= (0700), which is the built-in default", (state, exec_start))
    tap.ok(exec_start.startswith(os.path.join(SBINDIR, "sealed-probe-proxy") + " "),
           f"{name}: runs the proxy from sbindir", exec_start)
exec_start = values(serve, "ExecStart")[0]
socket = option(exec_start, "--socket")
tap.ok(socket == config_h("SP_DEFAULT_SOCKET") and os.path.dirname(socket) == "/run/" + values(serve, "RuntimeDirectory")[0]
       and values(serve, "RuntimeDirectoryMode") == ["0755"],
       "proxy: --socket is the built-in default, in its RuntimeDirectory= (0755, as serve requires)", socket)
tap.ok(option(exec_start, "--rootfs") == config_h("SP_DEFAULT_ROOTFS"), "proxy: --rootfs is the built-in default")
tap.ok(option(exec_start, "--config") == option(values(stage, "ExecStart")[0], "--config"),
       "both units read the same config")

# ---- every directive explained --------------------------------------------
docs = read(os.path.join(SOURCE, "docs", "operations.md"))
for name, text in list(units.items()) + [("host-mount-namespace.conf", dropin)]:
    lines = text.splitlines()
    bare = []
    for n, key, _ in directives(text):
        i = n - 2
        while i >= 0 and lines[i] and not lines[i].startswith(("#", "[")):
            i -= 1
        if key not in PLAIN and not (i >= 0 and lines[i].startswith("#")) and name != "host-mount-namespace.conf":
            bare.append(key)
    tap.ok(not bare, f"{name}: every directive sits under a comment that says why", bare)
    undocumented = sorted({k for _, k, _ in directives(text) if k not in PLAIN and f"`{k}=" not in docs})
    tap.ok(not undocumented, f"{name}: every directive is in docs/operations.md", undocumented)
tap.finish()
