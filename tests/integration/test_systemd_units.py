"""The systemd units started for real (docs/operations.md, "Under systemd"),
under the host's systemd when it is PID 1, else under a systemd this test
boots with systemd-nspawn (sp_systemd.py).  The units are the generated ones
with only their paths moved to this test's (copies of the built proxy and the
cached rootfs, and a test config, in a directory of /run that the units'
sandboxing leaves visible wherever the checkout is); every directive is as
shipped.  Stage takes the token from an encrypted credential (systemd-creds)
to the fake GitHub over HTTPS on loopback; the proxy is ready when `systemctl
start` returns, answers probes, runs with the unit's sandboxing in effect,
restages, comes back after kill -9 and stops cleanly.  The directives the docs
leave out for the runtimes' sake are shown to break the start; a bad
credential stops staging before any request; the plain-file credential and the
host-mount-namespace drop-in work as the docs say.  Run on runc and on gvisor;
not applicable on docker and sbx, whose daemons work in the host's mount
namespace (the drop-in they need is started here on runc and gvisor)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, bail_out, cached_rootfs, ci, env_path, require_root_and, skip_all  # noqa: E402

PROXY = env_path("SP_PROXY")
CLIENT = env_path("SP_CLIENT")
UNITS_DIR = env_path("SP_UNITS_DIR")
SBINDIR = env_path("SP_UNIT_SBINDIR")
SYSCONFDIR = env_path("SP_UNIT_SYSCONFDIR")
DROPIN = env_path("SP_HOST_MOUNTS_DROPIN")
B = backend()
if B.mount_daemon is not None:
    # In the matrix like every file, and not applicable, saying why: their
    # daemons resolve mount sources in the host's mount namespace, and the
    # units' own namespaces hide serve's from them.  Their drop-in
    # (host-mount-namespace.conf) is checked below, on runc and gvisor.
    skip_all(f"not applicable on {B.name}: its daemon resolves workspace mounts in the host's mount namespace, "
             "outside the one this test boots systemd in; the host-mount-namespace.conf drop-in it needs is "
             "started for real on runc and gvisor")
require_root_and("git", "openssl", "nsenter", "systemd-creds")
import sp_systemd  # noqa: E402

why = sp_systemd.why_not()
if why:
    # install-deps --test installs systemd-container, so CI can boot one.
    if ci():
        bail_out(f"{why}; under CI=true the units must be started for real")
    skip_all(why)
if os.environ.get("SP_B_SANITIZE", "none") != "none":
    # LeakSanitizer stops the world with ptrace, which the stage unit's
    # SystemCallFilter= refuses: the units are started with the plain build.
    skip_all(f"a -Db_sanitize={os.environ['SP_B_SANITIZE']} build: LeakSanitizer needs ptrace, which the stage "
             "unit's SystemCallFilter= refuses; the plain build starts the units")
BUILD_ROOT = os.path.dirname(os.path.dirname(PROXY))
STAGE, SERVE = "sealed-probe-stage", "sealed-probe-proxy"
STATE = "/var/lib/sealed-probe/state"
CANARY = "ghp_UNITCANARY0123456789abcdefABCDEF01"
PLAIN_CANARY = "ghp_PLAINUNITCANARY0123456789abcdef"
COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
if sp_systemd.pid1_comm() == "systemd":
    # On a real host: never near an operator's deployment.
    taken = [p for p in (STATE, "/run/systemd/system/" + SERVE + ".service", "/etc/credstore.encrypted/github-token",
                         "/etc/credstore/github-token") if os.path.exists(p)]
    if taken or subprocess.run(["systemctl", "cat", SERVE], capture_output=True).returncode == 0:
        skip_all(f"sealed-probe is deployed on this host ({', '.join(taken) or 'its units are installed'}); "
                 "this test installs its own units and state, and never touches those")

from sp_github_fake import FakeGitHub, tarball  # noqa: E402

ROOTFS = cached_rootfs()
tap = Tap()
# Everything the units execute and read (a copy of the proxy, its config, a
# copy of the rootfs, the clone, the fake GitHub's CA) is in a directory that
# their sandboxing leaves visible wherever the checkout is: PrivateTmp= hides
# /tmp and /var/tmp (also from stage, in the left-out check below),
# ProtectHome= /home, /root and /run/user.  /run is none of those; this test
# makes the directory and removes it.
work = tempfile.mkdtemp(prefix="sp-systemd-", dir="/run")
os.chmod(work, 0o711)
UNIT_PROXY = os.path.join(work, "sbin", "sealed-probe-proxy")
UNIT_ROOTFS = os.path.join(work, "rootfs")
ETC = os.path.join(work, "etc")
fake = sd = None


def git(repo, *args):
    env = {"PATH": "/usr/bin:/bin", "HOME": work, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, env=env)


def unit_text(name):
    """The generated unit, its paths moved to this test's; nothing else."""
    with open(os.path.join(UNITS_DIR, name)) as f:
        text = f.read()
    return (text.replace(os.path.join(SBINDIR, "sealed-probe-proxy"), UNIT_PROXY)
            .replace(os.path.join(SYSCONFDIR, "sealed-probe"), ETC)
            .replace("/var/lib/sealed-probe/rootfs", UNIT_ROOTFS))


def write(path, text, mode=0o644):
    r = sd.run(["sh", "-c", f"mkdir -p \"$(dirname '{path}')\" && cat > '{path}' && chmod {mode:o} '{path}'"],
               input=text)
    assert r.returncode == 0, r.stderr


def dropin(unit, name, text):
    write(f"/run/systemd/system/{unit}.service.d/{name}.conf", text)
    sd.run(["systemctl", "daemon-reload"])


def undrop(unit, name):
    sd.run(["rm", "-f", f"/run/systemd/system/{unit}.service.d/{name}.conf"])
    sd.run(["systemctl", "daemon-reload"])


def show(unit, *props):
    r = sd.run(["systemctl", "show", "-p", ",".join(props), unit + ".service"])
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def journal(*units):
    args = []
    for u in units:
        args += ["-u", u + ".service"]
    return sd.run(["journalctl", "--no-pager", "-o", "cat"] + args).stdout


def start(unit):
    sd.run(["systemctl", "reset-failed", unit + ".service"])
    return sd.run(["systemctl", "start", unit + ".service"], timeout=900)


def stop(unit):
    return sd.run(["systemctl", "stop", unit + ".service"], timeout=300)


def ask(repo, marker):
    """A probe through the unit's socket: YES when marker is in README.md."""
    script = ("import json\n"
              f"hit = {marker!r} in open('/probe/repo/README.md').read()\n"
              "json.dump({'result': 'YES' if hit else 'NO'}, open('/probe/out', 'w'))\n")
    r = sd.run([CLIENT, "--repo", repo, "--outcome", "YES", "--outcome", "NO", "--outcome", "UNKNOWN"],
               input=script, timeout=120)
    return r.stdout.strip() or r.stderr.strip()


def main_pid():
    return int(show(SERVE, "MainPID")["MainPID"])


def proc_status(pid):
    return dict(line.split(":\t", 1) for line in sd.run(["cat", f"/proc/{pid}/status"]).stdout.splitlines()
                if ":\t" in line)


def read_only(path):
    r = sd.run(["python3", "-c", f"import os; print(bool(os.statvfs({path!r}).f_flag & os.ST_RDONLY))"])
    return r.stdout.strip() == "True"


def staged_run():
    r = sd.run(["cat", os.path.join(STATE, "staged.json")])
    return json.loads(r.stdout)["run"] if r.returncode == 0 else None


def encrypt_credential(value):
    r = sd.run(["sh", "-c", "mkdir -p /etc/credstore.encrypted && systemd-creds encrypt --name=github-token "
                "--with-key=host - /etc/credstore.encrypted/github-token"], input=value)
    assert r.returncode == 0, r.stderr


try:
    # ---- the fixture: a local clone, a fake GitHub, a config, the units -----
    os.makedirs(os.path.dirname(UNIT_PROXY))
    shutil.copy2(PROXY, UNIT_PROXY)
    subprocess.run(["cp", "-a", "--", ROOTFS, UNIT_ROOTFS], check=True, capture_output=True)
    clone = os.path.join(work, "clone")
    os.makedirs(clone)
    git(clone, "init", "-q", "-b", "main")
    with open(os.path.join(clone, "README.md"), "w") as f:
        f.write("LOCAL-MARKER\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "fixture")
    fake = FakeGitHub(work, {"acme/remote": (COMMIT, tarball("acme-remote-fedcba9", {"README.md": b"REMOTE-MARKER\n"}))},
                      token=CANARY)
    os.makedirs(ETC)
    with open(os.path.join(ETC, "config.json"), "w") as f:
        json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["acme/local", "acme/remote"],
                                    "runtime": B.runtime}}, f)
    with open(os.path.join(ETC, "clones.txt"), "w") as f:
        f.write(f"acme/local={clone}\n")

    sd = sp_systemd.Systemd([BUILD_ROOT, work])
    for name in (STAGE, SERVE):
        write(f"/run/systemd/system/{name}.service", unit_text(name + ".service"))
    stage_exec = re.search(r"^ExecStart=(.*)$", unit_text(STAGE + ".service"), re.M).group(1)
    # Only the GitHub source's addresses are added: the fake's, on loopback.
    dropin(STAGE, "test-github", "[Service]\nExecStart=\nExecStart=" + stage_exec
           + f" --github-api {fake.api_base} --github-codeload {fake.codeload_host} --github-ca {fake.ca}\n")
    encrypt_credential(CANARY + "\n")

    # ---- start: stage, then the proxy, ready when systemctl returns ----------
    r = start(SERVE)
    s = show(STAGE, "ActiveState", "SubState", "Result")
    p = show(SERVE, "ActiveState", "SubState", "MainPID")
    tap.ok(r.returncode == 0 and s == {"ActiveState": "active", "SubState": "exited", "Result": "success"}
           and p["ActiveState"] == "active" and p["SubState"] == "running",
           f"`systemctl start {SERVE}` on {sd.describe()}: the stage unit ran first and stays active (exited); "
           "the proxy is active (running)", (r.stderr, s, p, journal(STAGE, SERVE)[-3000:]))
    if r.returncode != 0:
        raise SystemExit
    log = journal(SERVE)
    tap.ok(re.search(r"serve: ready: run \w+, 2 repositories, runtime " + B.runtime, log) is not None
           and log.index("serve: ready:") < log.index("Started "),
           "Type=notify: the unit is started only after serve's READY=1 (its ready line comes first)", log[-2000:])
    status_ready = show(SERVE, "StatusText")["StatusText"]
    tap.ok(ask("acme/local", "LOCAL-MARKER") == '{"result":"YES"}',
           "as soon as start returns, the socket answers: a probe of the local clone's seed")
    tap.ok(ask("acme/remote", "REMOTE-MARKER") == '{"result":"YES"}', "a probe of the GitHub seed answers too")

    # ---- the journal: STATUS= as serve's state changes, priorities -------------
    status_after = status_ready
    for _ in range(50):
        status_after = show(SERVE, "StatusText")["StatusText"]
        if "2 answered" in status_after:
            break
        time.sleep(0.2)
    tap.ok(status_ready.startswith("2 repositories; 0 answered, 0 refused, 0 failed; budget ")
           and status_after.startswith("2 repositories; 2 answered, 0 refused, 0 failed; budget ")
           and re.search(r"; budget (\d+) of", status_after).group(1)
           == str(int(re.search(r"; budget (\d+) of", status_ready).group(1)) - 2),
           "STATUS=: `systemctl status` shows serve's state as it changes (repositories, answered, refused, failed, "
           "budget left)", (status_ready, status_after))
    entries = [json.loads(x) for x in sd.run(["journalctl", "--no-pager", "-o", "json", "-u", SERVE + ".service"]
                                             ).stdout.splitlines() if x.startswith("{")]
    serve_lines = [(e.get("PRIORITY"), e.get("MESSAGE")) for e in entries
                   if isinstance(e.get("MESSAGE"), str) and e["MESSAGE"].startswith("sealed-probe-proxy: ")]
    ready = [p for p, m in serve_lines if m.startswith("sealed-probe-proxy: serve: ready: ")]
    requests = [p for p, m in serve_lines if m.startswith("sealed-probe-proxy: serve: request ")]
    tap.ok(ready == ["5"] and requests == ["7", "7"] and not any(m.startswith("<") for _, m in serve_lines),
           "journal: serve's lines carry their priorities (JOURNAL_STREAM): ready at notice (5), each request at "
           "debug (7), no `<N>` left in a message", serve_lines[-10:])

    # ---- the credential: stage's only, through systemd ----------------------
    api_auth = [h.get("Authorization") for host, _, h in fake.requests if host == "api"]
    tap.ok(api_auth and all(a == f"Bearer {CANARY}" for a in api_auth)
           and all("Authorization" not in h for host, _, h in fake.requests if host == "codeload"),
           "the encrypted credential (LoadCredentialEncrypted=github-token) reached the API's Authorization header, "
           "and only the API's", fake.requests)
    pid = main_pid()
    environ = sd.run(["cat", f"/proc/{pid}/environ"]).stdout
    tap.ok(CANARY not in environ and "CREDENTIALS_DIRECTORY" not in environ
           and sd.run(["test", "-e", f"/run/credentials/{SERVE}.service"]).returncode != 0,
           "serve holds no credential: none in its environment, no credentials directory for its unit")
    seeds = sd.run(["findmnt", "-n", "-o", "OPTIONS", "--target", os.path.join(STATE, "seeds", staged_run())])
    tap.ok("ro" in seeds.stdout.strip().split(","),
           "stage's read-only seed mount is in PID 1's mount namespace, where serve found it", seeds)

    # ---- serve runs with the unit's sandboxing in effect --------------------
    st = proc_status(pid)
    bnd = int(st.get("CapBnd", "0"), 16)
    tap.ok(st.get("NoNewPrivs") == "1" and st.get("Seccomp") == "2" and not bnd & (1 << 16) and not bnd & (1 << 25)
           and bnd & (1 << 21),
           "serve: NoNewPrivileges, a seccomp filter, CAP_SYS_MODULE and CAP_SYS_TIME out of its bounding set, "
           "CAP_SYS_ADMIN kept", st)
    # The probes above answered, so nothing serve makes depends on a wider umask.
    tap.ok(st.get("Umask") == "0077", "serve: runs with UMask=0077 and answers", st.get("Umask"))
    sd.run(["touch", "/tmp/sp-systemd-marker"])
    tap.ok(read_only(f"/proc/{pid}/root/etc") and read_only(f"/proc/{pid}/root/usr")
           and sd.run(["test", "-e", f"/proc/{pid}/root/tmp/sp-systemd-marker"]).returncode != 0
           and sd.run(["ls", "-A", f"/proc/{pid}/root/root"]).stdout.strip() == "",
           "serve: /etc and /usr read-only (ProtectSystem=strict), a /tmp of its own (PrivateTmp=), no /root "
           "(ProtectHome=)")

    # ---- restage, kill -9, stop ----------------------------------------------
    first_run = staged_run()
    r = sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    start(SERVE)
    runs = sd.run(["ls", os.path.join(STATE, "seeds")]).stdout.split()
    tap.ok(r.returncode == 0 and staged_run() != first_run and runs == [staged_run()] and main_pid() != pid
           and show(SERVE, "ActiveState")["ActiveState"] == "active"
           and ask("acme/local", "LOCAL-MARKER") == '{"result":"YES"}',
           "restage: `systemctl restart sealed-probe-stage` unstages, stages a new run and restarts the proxy, "
           "which answers", (r.stderr, runs, first_run))
    pid = main_pid()
    sd.run(["kill", "-9", str(pid)])
    for _ in range(60):
        p = show(SERVE, "ActiveState", "MainPID", "NRestarts")
        if p["ActiveState"] == "active" and p["MainPID"] not in ("0", str(pid)):
            break
        time.sleep(0.5)
    tap.ok(p["ActiveState"] == "active" and p["NRestarts"] == "1"
           and ask("acme/local", "LOCAL-MARKER") == '{"result":"YES"}',
           "kill -9: Restart=on-abnormal brings the proxy back, and it answers", p)
    pid = main_pid()
    r = stop(SERVE)
    p = show(SERVE, "ActiveState", "Result", "ExecMainStatus")
    left = sd.run(["sh", "-c", f"ls -A {STATE}/runc {STATE}/runsc 2>/dev/null; ls /sys/fs/cgroup/*/sealed-probe "
                   "2>/dev/null | grep -c -- '-' || true"]).stdout.split()
    stopped = [e for e in (json.loads(x) for x in sd.run(["journalctl", "--no-pager", "-o", "json", "-u",
                                                           SERVE + ".service"]).stdout.splitlines()
                           if x.startswith("{"))
               if e.get("MESSAGE") == "sealed-probe-proxy: serve: stopped"]
    tap.ok(stopped and stopped[-1].get("PRIORITY") == "5",
           "journal: serve's `stopped` at notice (5)", stopped[-1:])
    tap.ok(r.returncode == 0 and p == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
           and "serve: stopped" in journal(SERVE)
           and sd.run(["test", "-e", "/run/sealed-probe/probe.sock"]).returncode != 0,
           "stop: SIGTERM to serve (KillMode=mixed), which stops cleanly: exit 0, its socket gone", (p, left))

    # ---- the directives left out break the start (docs/operations.md) --------
    left_out = ["ProtectControlGroups=yes", "ProtectHostname=yes", "RestrictNamespaces=yes"]
    if B.runs_on_sentry:
        # runsc, the Sentry's runtime, maps memory writable and executable
        # and reads /proc beyond the pid entries.
        left_out += ["MemoryDenyWriteExecute=yes", "ProcSubset=pid"]
    for directive in left_out:
        dropin(SERVE, "zz-left-out", f"[Service]\n{directive}\n")
        r = start(SERVE)
        tap.ok(r.returncode != 0 and show(SERVE, "ActiveState")["ActiveState"] == "failed",
               f"left out, with reason: with {directive} the proxy fails to start on {B.runtime}",
               journal(SERVE)[-600:])
        stop(SERVE)
        undrop(SERVE, "zz-left-out")
    # A mount namespace for stage (PrivateTmp= makes one): it can neither
    # remove the host's seed mounts nor leave new ones where serve looks.
    dropin(STAGE, "zz-left-out", "[Service]\nPrivateTmp=yes\n")
    r = sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    tap.ok(r.returncode != 0 and "Device or resource busy" in journal(STAGE)[-800:],
           "left out, with reason: with PrivateTmp= (a mount namespace) stage's unstage cannot remove the "
           "previous run's mount, which lives in the host's namespace", journal(STAGE)[-800:])
    sd.run([PROXY, "unstage", "--state", STATE])
    r = sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    r2 = start(SERVE)
    tap.ok(r.returncode == 0 and r2.returncode != 0
           and "the seed is not on a read-only mount" in journal(SERVE)[-800:],
           "left out, with reason: with PrivateTmp= stage's seed mounts vanish with its namespace, and serve "
           "refuses the seeds", journal(STAGE)[-800:] + journal(SERVE)[-800:])
    stop(STAGE)
    sd.run([PROXY, "unstage", "--state", STATE])
    undrop(STAGE, "zz-left-out")

    # ---- the docker and sbx drop-in: serve stays in the host's namespace -----
    with open(DROPIN) as f:
        dropin(SERVE, "host-mount-namespace", f.read())
    sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    r = start(SERVE)
    pid = main_pid()
    tap.ok(r.returncode == 0 and not read_only(f"/proc/{pid}/root/etc")
           and sd.run(["test", "-e", f"/proc/{pid}/root/tmp/sp-systemd-marker"]).returncode == 0
           and ask("acme/local", "LOCAL-MARKER") == '{"result":"YES"}',
           "host-mount-namespace.conf: the proxy starts and answers with /etc writable and the host's /tmp: "
           "no mount namespace from systemd", r.stderr)
    stop(SERVE)
    undrop(SERVE, "host-mount-namespace")

    # ---- a bad credential stops staging before any request -------------------
    encrypt_credential(CANARY + "\x1b[2J\n")
    before = len(fake.requests)
    r = sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    log = journal(STAGE)
    r2 = start(SERVE)
    tap.ok(r.returncode != 0 and "credential `github-token` holds a control byte" in log
           and len(fake.requests) == before and r2.returncode != 0,
           "a credential with a control byte: stage fails naming it, before any request, and the proxy does not "
           "start", (log[-800:], len(fake.requests) - before))

    # ---- the plain-file credential, as the docs' drop-in gives it ------------
    sd.run(["rm", "-f", "/etc/credstore.encrypted/github-token"])
    write("/etc/credstore/github-token", PLAIN_CANARY + "\n", 0o600)
    dropin(STAGE, "plain-credential", "[Service]\nLoadCredentialEncrypted=\nLoadCredential=github-token\n")
    fake.token = PLAIN_CANARY
    r = sd.run(["systemctl", "restart", STAGE + ".service"], timeout=900)
    api_auth = [h.get("Authorization") for host, _, h in fake.requests[before:] if host == "api"]
    tap.ok(r.returncode == 0 and api_auth and all(a == f"Bearer {PLAIN_CANARY}" for a in api_auth),
           "a root-only /etc/credstore/github-token with the LoadCredential= drop-in reaches the API", journal(STAGE)[-600:])

    everything = sd.run(["journalctl", "--no-pager", "-o", "cat"]).stdout
    tap.ok("UNITCANARY" not in everything, "canary: neither token is anywhere in the journal")
finally:
    if sd is not None:
        stop(SERVE)
        stop(STAGE)
        sd.run([PROXY, "unstage", "--state", STATE])
        if sd.kind == "host":
            sd.sh(f"rm -rf /run/systemd/system/{STAGE}.service* /run/systemd/system/{SERVE}.service* "
                  "/etc/credstore.encrypted/github-token /etc/credstore/github-token /run/sealed-probe "
                  "/tmp/sp-systemd-marker "
                  "/var/lib/sealed-probe/state; systemctl daemon-reload; "
                  f"systemctl reset-failed {STAGE}.service {SERVE}.service")
        sd.close()
    if fake is not None:
        fake.close()
    subprocess.run(["rm", "-rf", work])
tap.finish()
