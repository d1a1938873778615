"""The GitHub token through systemd's credential mechanism, end to end
(docs/staging.md, "Credentials"): `stage` run as sealed-probe-stage.service
runs it, with $CREDENTIALS_DIRECTORY holding `github-token`, against the
fake GitHub over real HTTPS on loopback.  The credential's value reaches the
API's Authorization header and no output, file or process listing; a bad
credential file, a bad directory, or a token given both by credential and
by environment is refused with a clear message before any request."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, env_path, require_root_and  # noqa: E402

PROXY = env_path("SP_PROXY")
# It starts no sandbox: it runs once, on the first backend (tests/meson.build).
B = backend()
require_root_and("openssl")
from sp_github_fake import FakeGitHub, tarball  # noqa: E402
from sp_stage import StageWork  # noqa: E402

CANARY = "ghp_CREDFILECANARY0123456789abcdefABCD"
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
PATH = {"PATH": os.environ["PATH"]}

tap = Tap()
w = StageWork(PROXY, None, "sp-stage-cred-")
fake = None


def cred_dir(entries, mode=0o500):
    """A credentials directory like systemd's: root's, 0500, each entry a
    file (name: (bytes, mode)) or, given a callable, made by it."""
    path = os.path.join(w.work, f"creds-{w.next()}")
    os.mkdir(path, 0o700)
    for name, spec in entries.items():
        full = os.path.join(path, name)
        if callable(spec):
            spec(full)
            continue
        data, file_mode = spec
        with open(full, "wb") as f:
            f.write(data)
        os.chmod(full, file_mode)
    os.chmod(path, mode)
    return path


def stage(env, state=None):
    state = state or w.new_state()
    argv = [PROXY, "stage", "--config", config, "--state", state, "--github-api", fake.api_base,
            "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
    return state, subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                                 env=env)


def refused(env, needles, description):
    """Exit 1, every needle in stderr, no byte of the canary anywhere, no
    request made, nothing staged."""
    before = len(fake.requests)
    state, r = stage(env)
    out = r.stdout + r.stderr
    tap.ok(r.returncode == 1 and all(n in r.stderr for n in needles) and r.stdout == ""
           and "CREDFILECANARY" not in out and len(fake.requests) == before
           and not os.path.exists(os.path.join(state, "staged.json")),
           f"{description}: refused naming {needles}, before any request, showing no byte of the token",
           f"exit {r.returncode}: {r.stderr!r}, {len(fake.requests) - before} request(s)")


try:
    fake = FakeGitHub(w.work, {"acme/remote": (COMMIT, tarball("acme-remote-89abcde", {"README.md": b"R\n"}))},
                      token=CANARY, delay=1.0)
    config = w.write_config(["acme/remote"])
    good = cred_dir({"github-token": (CANARY.encode() + b"\n", 0o400)})

    # ---- the credential reaches the API, and nothing else --------------------
    state = w.new_state()
    argv = [PROXY, "stage", "--config", config, "--state", state, "--github-api", fake.api_base,
            "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**PATH, "CREDENTIALS_DIRECTORY": good})
    for _ in range(200):
        if fake.requests or proc.poll() is not None:
            break
        time.sleep(0.05)
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    if CANARY.encode() in f.read():
                        seen.append((pid, part))
            except OSError:
                pass
    out, err = proc.communicate(timeout=120)
    api_auth = [h.get("Authorization") for host, _, h in fake.requests if host == "api"]
    codeload = [(p, h) for host, p, h in fake.requests if host == "codeload"]
    tap.ok(proc.returncode == 0 and "acme/remote from github" in out and len(api_auth) == 2
           and all(a == f"Bearer {CANARY}" for a in api_auth),
           "a token given only as the credential `github-token` in $CREDENTIALS_DIRECTORY (newline stripped) "
           "reaches the API's Authorization header", f"exit {proc.returncode}: {err!r}, {api_auth}")
    tap.ok(codeload and all("Authorization" not in h and CANARY not in p for p, h in codeload),
           "the credential never reaches codeload", codeload)
    leaks = [os.path.join(d, n) for d, _, fs in os.walk(state) for n in fs
             if CANARY.encode() in open(os.path.join(d, n), "rb").read()]
    tap.ok(not seen and not leaks and "CREDFILECANARY" not in out + err,
           "canary: the credential's value is in no output, no file under the state directory, and no "
           "process's argv or environment while staging runs", (seen, leaks))
    with open(os.path.join(good, "github-token"), "rb") as f:
        tap.ok(f.read() == CANARY.encode() + b"\n", "the credential file is left as it was (it is systemd's)")

    # ---- one source only -----------------------------------------------------
    for var in ("GH_TOKEN", "GITHUB_TOKEN"):
        refused({**PATH, "CREDENTIALS_DIRECTORY": good, var: "ghp_ENVTOKEN0000"},
                ["given twice", "credential `github-token`", var], f"the credential and {var} both set")
    empty_dir = cred_dir({})
    _, r = stage({**PATH, "CREDENTIALS_DIRECTORY": empty_dir, "GH_TOKEN": CANARY})
    tap.ok(r.returncode == 0 and "CREDFILECANARY" not in r.stdout + r.stderr,
           "a credentials directory without `github-token` gives no token: GH_TOKEN is used", r.stderr)

    # ---- bad credential files and directories: refused before any request ----
    long_token = b"ghp_CREDFILECANARY" + b"x" * 1100
    bad_files = [
        ("a credential readable by others (0644)", {"github-token": (CANARY.encode(), 0o644)}, ["mode 0644"]),
        ("a credential readable by its group (0440)", {"github-token": (CANARY.encode(), 0o440)}, ["mode 0440"]),
        ("a credential that is a symlink", {"real": (CANARY.encode(), 0o400),
                                            "github-token": lambda p: os.symlink("real", p)}, ["is a symlink"]),
        ("a credential that is a FIFO", {"github-token": lambda p: os.mkfifo(p, 0o600)}, ["not a regular file"]),
        ("an empty credential", {"github-token": (b"\n", 0o400)}, ["is empty"]),
        ("a credential with a control byte", {"github-token": (CANARY.encode() + b"\x1b[2J\n", 0o400)},
         ["control byte"]),
        ("a credential with two lines", {"github-token": (CANARY.encode() + b"\nsecond\n", 0o400)},
         ["control byte"]),
        ("a credential with a NUL byte", {"github-token": (CANARY.encode() + b"\0x", 0o400)}, ["NUL byte"]),
        ("a credential over 1024 bytes", {"github-token": (long_token, 0o400)}, ["longer than 1024 bytes"]),
        ("a credential owned by another user", {"github-token": lambda p: (
            open(p, "wb").write(CANARY.encode()), os.chmod(p, 0o400), os.chown(p, 65534, 65534))},
         ["owned by uid 65534"]),
    ]
    for description, entries, needles in bad_files:
        refused({**PATH, "CREDENTIALS_DIRECTORY": cred_dir(entries)}, ["credential `github-token`"] + needles,
                description)
    refused({**PATH, "CREDENTIALS_DIRECTORY": cred_dir({"github-token": (CANARY.encode(), 0o400)}, mode=0o770)},
            ["$CREDENTIALS_DIRECTORY", "writable by nobody else"], "a credentials directory others may write to")
    refused({**PATH, "CREDENTIALS_DIRECTORY": "relative/creds"}, ["$CREDENTIALS_DIRECTORY", "not an absolute path"],
            "a relative $CREDENTIALS_DIRECTORY")
    refused({**PATH, "CREDENTIALS_DIRECTORY": os.path.join(w.work, "no-such-dir")},
            ["$CREDENTIALS_DIRECTORY", "No such file or directory"], "a missing $CREDENTIALS_DIRECTORY")

    # ---- no token at all: the preflight names every way to give one ---------
    refused(PATH, ["credential `github-token`", "GH_TOKEN", "GITHUB_TOKEN", "none is given"],
            "no credential and no token variable")
finally:
    if fake:
        fake.close()
    w.close()
tap.finish()
