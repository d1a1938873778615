"""`sealed-probe-proxy doctor` (docs/operations.md, "Why an agent cannot
reach its proxy") against each way an agent's client fails to reach its
proxy, and the words of each diagnosis: a relative, empty or missing path,
a missing directory, a file that is no socket, a directory the agent's user
may not search, a socket group the user is not in (and then is: doctor
--user becomes the user for real, initgroups included; run by the user in
a session older than its group, and in a new one), a socket left in
group root, a bad SEALED_PROBE_TIMEOUT, a stale socket, a listener that is
no serve or an older one; then the good case against a live serve on the
backend the test runs on, which debits nothing (budget.json byte for
byte), audits nothing, queues and launches nothing (the run's containers
the same), while a probe after it is still answered and audited.  The
handshake on the wire: its reply's exact bytes, and a hello with a body or
trailing bytes refused as any bad frame is (ERROR, audited `frame`, not
debited).  Usage errors exit 2.  The canary: the staged repository holds
ghp_CANARY tokens, and no doctor output holds one, nor the repository's
name."""

import atexit
import grp
import os
import pwd
import socket
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test("useradd", "groupadd", "usermod", "userdel", "groupdel")

tap = Tap()
work = S.Work("sp-doctor-")
nonce = uuid.uuid4().hex[:8]
CANARY = f"ghp_CANARYdoctor{nonce}"
REPO = "acme/alpha"
USER = f"spdoc{nonce}"
GROUP = f"spdocg{nonce}"
HELLO = b"SPRB\x01\x03\x00\x00\x00\x00"
HELLO_REPLY = b"SPRB\x01\x04\x00\x00\x00\x01\x02"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

outputs = []  # every doctor output, for the canary check at the end


def remove_account():
    subprocess.run(["userdel", USER], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)


def doctor(*args, env_extra=None):
    env = dict(ENV)
    env.update(env_extra or {})
    r = subprocess.run([S.PROXY, "doctor", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=60, env=env)
    outputs.append(r.stdout + r.stderr)
    return r


def says(r, rc, *words):
    """rc and every word in doctor's output (stdout and stderr together)."""
    text = r.stdout + r.stderr
    return r.returncode == rc and all(w in text for w in words)


def detail(r):
    return f"rc {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


def bound_socket(path, listen):
    """A Unix socket at path, listening or not (closing one that never
    listened leaves a stale socket)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    if listen:
        s.listen(8)
    return s


class FakeListener:
    """Accepts on path and answers each connection with `answer` bytes
    (b"": closes at once), in a thread."""

    def __init__(self, path, answer):
        self.sock = bound_socket(path, True)
        self.answer = answer
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                c.settimeout(5)
                c.recv(64)
                c.sendall(self.answer)
            except OSError:
                pass
            c.close()

    def close(self):
        self.sock.close()


try:
    remove_account()
    atexit.register(remove_account)
    made = (subprocess.run(["groupadd", GROUP], capture_output=True).returncode == 0
            and subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                               capture_output=True).returncode == 0)
    tap.ok(made, f"a temporary user {USER} and group {GROUP} are made")
    uid = pwd.getpwnam(USER).pw_uid
    gid = grp.getgrnam(GROUP).gr_gid
    top = os.path.join(work.dir, "d")
    os.makedirs(top)
    os.chmod(top, 0o755)

    # ---- usage ---------------------------------------------------------------
    r = doctor("--bogus")
    tap.ok(says(r, 2, "unknown option `--bogus`", "usage: sealed-probe-proxy doctor"),
           "an unknown option is bad usage, exit 2", detail(r))
    r = doctor("--user", f"nosuch{nonce}")
    tap.ok(says(r, 2, f"--user: no user `nosuch{nonce}`"), "an unknown --user is bad usage, exit 2", detail(r))
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={pwd.getpwnam(USER).pw_gid}", "--clear-groups",
                        S.PROXY, "doctor", "--user", "root", "--socket", "/nonexistent/x"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    outputs.append(r.stdout + r.stderr)
    tap.ok(says(r, 2, "--user root needs root"), "--user for another account without root is bad usage, exit 2",
           detail(r))

    # ---- the path, by the client's rules ------------------------------------
    r = doctor("--socket", "run/probe.sock")
    tap.ok(says(r, 1, "FAIL path", "`run/probe.sock` (from --socket) is not an absolute path",
                "answers ERROR to every probe", "Set SEALED_PROBE_SOCKET to the absolute path"),
           "a relative --socket: not absolute, the client answers ERROR, what to set", detail(r))
    r = doctor(env_extra={"SEALED_PROBE_SOCKET": "probe.sock"})
    tap.ok(says(r, 1, "`probe.sock` (from SEALED_PROBE_SOCKET) is not an absolute path"),
           "a relative SEALED_PROBE_SOCKET is read as the client reads it, and named", detail(r))
    r = doctor(env_extra={"SEALED_PROBE_SOCKET": ""})
    tap.ok(says(r, 1, "SEALED_PROBE_SOCKET is set but empty", "Unset it for the default"),
           "an empty SEALED_PROBE_SOCKET: set but empty, unset it", detail(r))
    r = doctor("--socket", "/" + "a" * 107)
    tap.ok(says(r, 1, "108 bytes, above the 107 a Unix socket address holds"),
           "a path longer than sun_path: its length and the bound", detail(r))

    # ---- a missing directory, a missing socket, a file that is no socket ----
    r = doctor("--socket", os.path.join(top, "gone", "probe.sock"))
    tap.ok(says(r, 1, "FAIL directory", f"`{top}/gone` does not exist", "Start serve",
                "set SEALED_PROBE_SOCKET to the --socket serve"),
           "a missing directory: named, start serve or fix SEALED_PROBE_SOCKET", detail(r))
    r = doctor("--socket", os.path.join(top, "probe.sock"))
    tap.ok(says(r, 1, "ok   directory", "FAIL socket", f"`{top}/probe.sock` does not exist: no serve listens there",
                "systemctl start sealed-probe-proxy"),
           "a missing socket: no serve listens there, start it", detail(r))
    plain = os.path.join(top, "plain")
    with open(plain, "w") as f:
        f.write("x")
    r = doctor("--socket", plain)
    tap.ok(says(r, 1, "is a regular file, not a socket", "Remove it"), "a regular file: not a socket, remove it",
           detail(r))

    # ---- a directory the user may not search --------------------------------
    locked = os.path.join(top, "locked")
    os.makedirs(locked)
    os.chmod(locked, 0o700)
    held = bound_socket(os.path.join(locked, "probe.sock"), True)
    os.chmod(os.path.join(locked, "probe.sock"), 0o666)
    r = doctor("--socket", os.path.join(locked, "probe.sock"), "--user", USER)
    tap.ok(says(r, 1, f"user            {USER} (uid {uid}", "FAIL directory",
                f"{USER} may not search `{locked}` (owner root, group root, mode 0700)", f"chmod o+x {locked}"),
           "a directory the user may not search: named with owner and mode, and the chmod", detail(r))
    os.chmod(locked, 0o711)
    r = doctor("--socket", os.path.join(locked, "probe.sock"), "--user", USER, "--client-timeout", "1")
    tap.ok(r.returncode == 1 and "ok   directory" in r.stdout and "ok   access" in r.stdout
           and "FAIL handshake" in r.stdout,
           "once searchable, the directory and access pass (a listener that is no serve fails later)", detail(r))
    held.close()

    # ---- the socket's group ---------------------------------------------------
    gsock = os.path.join(top, "group.sock")
    held = bound_socket(gsock, True)
    os.chown(gsock, 0, gid)
    os.chmod(gsock, 0o660)
    r = doctor("--socket", gsock, "--user", USER)
    tap.ok(says(r, 1, "ok   socket", "FAIL access", f"{USER} is not in group `{GROUP}`, the socket's group",
                f"usermod -aG {GROUP} {USER}", "--socket-group"),
           "a socket group the user is not in: which group, the usermod line, or --socket-group", detail(r))
    subprocess.run(["usermod", "-aG", GROUP, USER], check=True, capture_output=True)
    r = doctor("--socket", gsock, "--user", USER, "--client-timeout", "1")
    tap.ok(r.returncode == 1 and f"ok   access     {USER} may connect: it is in group `{GROUP}`" in r.stdout
           and f" {GROUP}" in r.stdout.splitlines()[0],
           "added to the group, the user (switched to with initgroups) may connect: the group is exercised",
           detail(r))
    # Run by the user itself (no --user): its session's groups decide.
    as_user = ["setpriv", f"--reuid={uid}", f"--regid={pwd.getpwnam(USER).pw_gid}"]
    r = subprocess.run(as_user + ["--clear-groups", S.PROXY, "doctor", "--socket", gsock],
                       capture_output=True, text=True, env=ENV, timeout=60)
    outputs.append(r.stdout + r.stderr)
    tap.ok(says(r, 1, f"user            {USER} ", "FAIL access",
                f"{USER} is in group `{GROUP}` in the group database, but this session is not", "log in again"),
           "run by the user in a session older than its group: says to start a new session", detail(r))
    r = subprocess.run(as_user + ["--init-groups", S.PROXY, "doctor", "--socket", gsock, "--client-timeout", "1"],
                       capture_output=True, text=True, env=ENV, timeout=60)
    outputs.append(r.stdout + r.stderr)
    tap.ok(r.returncode == 1 and f"ok   access     {USER} may connect: it is in group `{GROUP}`" in r.stdout,
           "run by the user in a session with the group: access passes", detail(r))
    os.chown(gsock, 0, 0)
    r = doctor("--socket", gsock, "--user", USER)
    tap.ok(says(r, 1, "FAIL access", "the socket's group is root", "serve was started without --socket-group",
                "--socket-group GROUP"),
           "a socket left in group root: serve needs --socket-group", detail(r))
    held.close()
    os.unlink(gsock)

    # ---- a stale socket, and a bad SEALED_PROBE_TIMEOUT ---------------------
    stale = os.path.join(top, "stale.sock")
    bound_socket(stale, False).close()
    os.chmod(stale, 0o666)
    r = doctor("--socket", stale, "--user", USER)
    tap.ok(says(r, 1, "ok   timeout", "FAIL listener", f"nothing listens on `{stale}`: it is a stale socket",
                "systemctl restart sealed-probe-proxy"),
           "a stale socket (connection refused): no serve runs, restart it", detail(r))
    r = doctor("--socket", stale, env_extra={"SEALED_PROBE_TIMEOUT": "10s"})
    tap.ok(says(r, 1, "FAIL timeout", "SEALED_PROBE_TIMEOUT `10s` (from SEALED_PROBE_TIMEOUT) is not valid",
                "whole seconds from 1 to 3600", "unset it for the default, 600"),
           "a bad SEALED_PROBE_TIMEOUT: the value, the valid range, the default", detail(r))
    tap.ok("FAIL listener" not in r.stdout, "the timeout is checked before anything connects", r.stdout)
    r = doctor("--socket", stale, "--client-timeout", "3601")
    tap.ok(says(r, 1, "`3601` (from --client-timeout) is not valid: above 3600 seconds"),
           "--client-timeout is checked by the same rule", detail(r))
    r = doctor("--socket", stale, env_extra={"SEALED_PROBE_TIMEOUT": "0"})
    tap.ok(says(r, 1, "`0` (from SEALED_PROBE_TIMEOUT) is not valid: below 1 second"), "a zero timeout",
           detail(r))

    # ---- listeners that are no serve of this release ------------------------
    fake = FakeListener(os.path.join(top, "fake.sock"), b"")
    r = doctor("--socket", os.path.join(top, "fake.sock"))
    tap.ok(says(r, 1, "ok   listener", "FAIL handshake", "answered 0 bytes that are no handshake reply"),
           "a listener that closes at once: not sealed-probe-proxy serve", detail(r))
    fake.close()
    old = FakeListener(os.path.join(top, "old.sock"), S.ERROR_FRAME)
    r = doctor("--socket", os.path.join(top, "old.sock"))
    tap.ok(says(r, 1, "answered ERROR to the handshake", "older than the handshake", "Upgrade"),
           "a listener that answers ERROR: a serve older than the handshake, upgrade it", detail(r))
    old.close()

    # ---- the good case against a live serve ----------------------------------
    alpha = work.make_clone("alpha", {"README.md": f"alpha {CANARY}\n".encode(),
                                      "secret.txt": f"{CANARY}\n".encode()})
    config = work.write_config([REPO], maxInvocations=50)
    state = work.staged_state(config, [(REPO, alpha)])
    with S.serving(work, config, state, socket_group=GROUP) as srv:
        S.wait_pool_full(srv)
        root = B.run_root(state, srv.run)
        containers = B.containers(root)
        with open(os.path.join(state, "budget.json"), "rb") as f:
            ledger = f.read()
        audit = S.audit_raw(state)

        r = doctor("--socket", srv.socket, "--user", USER)
        tap.ok(says(r, 0, "ok   handshake  serve speaks wire protocol 2, as this client does",
                    f"doctor          {USER} can reach serve on `{srv.socket}`: every check passed"),
               "against a live serve, as the agent's user in its group: every check passes, exit 0", detail(r))
        tap.ok([ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("ok ")]
               == ["path", "directory", "socket", "access", "timeout", "listener", "handshake"],
               "the checks run in order: path, directories, socket, access, timeout, listener, handshake",
               r.stdout)
        r = doctor(env_extra={"SEALED_PROBE_SOCKET": srv.socket, "SEALED_PROBE_TIMEOUT": "5"})
        tap.ok(says(r, 0, "(from SEALED_PROBE_SOCKET)", "SEALED_PROBE_TIMEOUT 5 s", "run as root"),
               "as root from the client's environment: passes, and says root proves no agent's permission",
               detail(r))
        got = srv.raw(HELLO)
        tap.ok(got == HELLO_REPLY, "a hello on the wire gets exactly the documented reply", got)

        with open(os.path.join(state, "budget.json"), "rb") as f:
            tap.ok(f.read() == ledger, "the handshakes debited nothing: budget.json is byte for byte the same")
        tap.ok(S.audit_raw(state) == audit, "the handshakes wrote no audit line (no admission, no refusal)",
               S.audit_raw(state)[len(audit):])
        tap.ok(B.containers(root) == containers, "the handshakes launched and took no sandbox",
               (containers, B.containers(root)))

        # Malformed hellos are refused as any bad frame is.
        got_body = srv.raw(S.frame(b"\x00", kind=3))
        got_trailing = srv.raw(HELLO + b"\x00")
        S.wait_for(lambda: len(S.audit_lines(state, srv.run)) >= 2, timeout=10)
        recs = S.audit_lines(state, srv.run)
        tap.ok(got_body == S.ERROR_FRAME and got_trailing == S.ERROR_FRAME,
               "a hello with a body, and one with a trailing byte, get ERROR", (got_body, got_trailing))
        tap.ok(len(recs) == 2 and all(x["status"] == "refused" and x["cause"] == "frame" and not x["debited"]
                                      and not x["launched"] for x in recs)
               and "hello body length 1" in recs[0]["reason"] and "bytes follow" in recs[1]["reason"],
               "each is audited refused, cause frame, not debited, not launched", recs)

        out = srv.probe(S.answer_script("YES"), REPO)
        recs = S.audit_lines(state, srv.run, admissions=True)
        tap.ok(out == S.answer("YES") and [x["status"] for x in recs].count("admitted") == 1,
               "a probe after the handshakes is answered and is the run's one admission", (out, recs[-1:]))
        srv.stop()
    r = doctor("--socket", srv.socket)
    tap.ok(r.returncode == 1 and ("FAIL socket" in r.stdout or "FAIL directory" in r.stdout),
           "after serve stops (its socket removed), doctor says no serve listens", detail(r))

    leaked = [o for o in outputs if CANARY in o or "CANARY" in o or REPO in o]
    tap.ok(len(outputs) > 20 and not leaked,
           f"no doctor output ({len(outputs)} runs) holds the repository's canary or its name", leaked[:2])
finally:
    work.close()
tap.finish()
