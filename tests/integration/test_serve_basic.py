"""`sealed-probe-proxy serve` end to end, the basics: a probe's writes stay in
its own copy and the seed re-verifies, in both snapshot modes; one audit line
per request with the documented keys; exact ERROR bytes for a disallowed
repository and for malformed frames; the ready file, READY=1, the socket's
mode and owner; SIGTERM leaves nothing; and each preflight refusal."""

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import BACKENDS, STOP, Tap, option_example, other_backends, run_tests, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-basic-")
nonce = uuid.uuid4().hex[:12]
ALPHA = f"ALPHA-MARK-{nonce}"

MUTATE = f"""import json, os
ok = open("README.md").read().startswith({ALPHA!r})
with open("README.md", "a") as f:
    f.write("MUTATED-{nonce}")
open("NEWFILE-{nonce}", "w").write("new")
os.unlink("src/app.py")
os.chmod("README.md", 0o600)
ok = ok and open("README.md").read().endswith("MUTATED-{nonce}") and not os.path.exists("src/app.py")
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if ok else "NO"}}, f)
"""
FRESH = f"""import json, os
fresh = (open("README.md").read() == {ALPHA + chr(10)!r} and not os.path.exists("NEWFILE-{nonce}")
         and os.path.exists("src/app.py") and os.stat("README.md").st_mode & 0o777 != 0o600)
with open("/probe/out", "w") as f:
    json.dump({{"result": "FRESH" if fresh else "STALE"}}, f)
"""
SLOW = """import json, time
time.sleep(1.5)
with open("/probe/out", "w") as f:
    json.dump({"result": "YES"}, f)
"""
TMP_WRITABLE = """import json
try:
    with open("/tmp/scratch", "w") as f:
        f.write("x")
    ok = open("/tmp/scratch").read() == "x"
except OSError:
    ok = False
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if ok else "NO"}, f)
"""
SCRIPT_CANARY = f"SCRIPT-CANARY-{nonce}"


def mount_lines(prefix, mountinfo="/proc/self/mountinfo"):
    """[(mount point, fstype, {mount and super options})] at or below prefix."""
    out = []
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            mp = S.unescape_mountinfo(fields[4])
            if mp == prefix or mp.startswith(prefix.rstrip("/") + "/"):
                sep = fields.index("-")
                out.append((mp, fields[sep + 1], set(fields[5].split(",")) | set(fields[sep + 3].split(","))))
    return out


def preflight_refusal(name, needle, config, state, **kw):
    srv = S.Serve(work, config, state, **kw)
    try:
        ready = srv.start(ready_timeout=60)
        err = srv.stderr()
        if ready:
            srv.stop()
        lines = [line for line in err.splitlines() if line.strip()]
        tap.ok(not ready and srv.returncode == 1 and len(lines) == 1
               and lines[0].startswith("sealed-probe-proxy: serve: ") and needle in lines[0]
               and not os.path.lexists(srv.ready_file) and not os.path.lexists(srv.socket),
               f"preflight: {name}: exit 1, one line naming {needle!r}, no ready file, no socket",
               f"ready {ready} exit {srv.returncode} stderr {err!r} ready-file {os.path.lexists(srv.ready_file)} "
               f"socket {os.path.lexists(srv.socket)}")
    finally:
        srv.cleanup()


class Fixture:
    """Two staged clones, which both snapshot modes and every preflight
    refusal use."""

    def __init__(self):
        self.alpha = work.make_clone("alpha", {"README.md": (ALPHA + "\n").encode(), "src/app.py": b"print('app')\n"})
        self.beta = work.make_clone("beta", {"README.md": b"beta\n"})
        self.config = work.write_config(["acme/alpha", "acme/beta"], timeout=5, maxInvocations=1000)
        self.state = work.staged_state(self.config, [("acme/alpha", self.alpha), ("acme/beta", self.beta)])
        self.seed = S.seed_dir(self.state, "acme/alpha")
        self.seed_before = S.tree_fingerprint(self.seed)
        self.alpha_rec = S.seed_record(self.state, "acme/alpha")


class Session:
    """One serve in one snapshot mode, with a NOTIFY_SOCKET the test listens
    on (a datagram socket), shared by that mode's test functions in order.
    Each function adds the requests it sent to `requests` (and those that
    may go unaudited to `may_go_unaudited`) for the audit log's count."""

    def __init__(self, fx, mode):
        self.fx, self.mode = fx, mode
        self.state, self.config = fx.state, fx.config
        notify_path = os.path.join(work.dir, f"notify-{mode}")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(notify_path)
        self.notify.settimeout(0.2)
        self.got_notify = []
        self.srv = S.Serve(work, fx.config, fx.state, snapshot=mode,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NOTIFY_SOCKET": notify_path})
        self.listener = threading.Thread(target=self._listen, daemon=True)
        self.listener.start()
        self.audit_before = 0
        self.requests = 0
        self.may_go_unaudited = 0

    def _listen(self):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not self.got_notify:
            try:
                data = self.notify.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            self.got_notify.append((data, os.path.exists(self.srv.ready_file)))

    def close(self):
        self.srv.cleanup()
        self.notify.close()


# ---- each snapshot mode: one serve, these in order ----------------------------

def serve_becomes_ready_and_says_so(s):
    mode, srv = s.mode, s.srv
    ready = srv.start()
    if not tap.ok(ready, f"{mode}: serve becomes ready", f"exit {srv.returncode}: {srv.stderr()}"):
        return STOP
    tap.ok(srv.ready_content() == f"{srv.pid}\n", f"{mode}: the ready file holds serve's pid and a newline",
           repr(srv.ready_content()))
    s.listener.join(timeout=10)
    got_notify = s.got_notify
    tap.ok(got_notify and b"READY=1" in got_notify[0][0].split(b"\n") and got_notify[0][1],
           f"{mode}: READY=1 reaches $NOTIFY_SOCKET, after the ready file is written", got_notify)
    st = os.lstat(srv.socket)
    tap.ok(stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o777 == 0o660 and st.st_uid == 0
           and st.st_gid == 0, f"{mode}: the socket is a socket, mode 0660, owner root, group root",
           f"mode {oct(st.st_mode)} uid {st.st_uid} gid {st.st_gid}")
    dst = os.stat(srv.sockdir)
    tap.ok(dst.st_mode & 0o777 == 0o755 and dst.st_uid == 0,
           f"{mode}: the socket's missing directory is created 0755", oct(dst.st_mode))
    tap.ok(srv.run is not None and S.RUN_ID.match(srv.run),
           f"{mode}: the run id (STATE/{B.state_subdir}/<run>) is 12 lowercase hex", srv.run)
    s.audit_before = len(S.audit_lines(s.state, srv.run))


def a_probe_changes_only_its_own_copy(s):
    mode, srv, fx = s.mode, s.srv, s.fx
    r1 = srv.client(MUTATE + f"# {SCRIPT_CANARY}\n", "acme/alpha")
    tap.ok(r1.stdout == b'{"result":"YES"}\n' and r1.stderr == b"",
           f"{mode}: a probe reads its copy and modifies it (append, create, delete, chmod)", r1)
    r2 = srv.probe(FRESH, "acme/alpha", ("FRESH", "STALE", "UNKNOWN"))
    tap.ok(r2 == S.answer("FRESH"), f"{mode}: the next probe's copy holds none of those changes", r2)
    r3 = srv.probe(S.answer_script("UNKNOWN"), "acme/alpha")
    tap.ok(r3 == S.answer("UNKNOWN"), f"{mode}: the third outcome comes back as written", r3)
    s.requests += 3
    tap.ok(S.tree_fingerprint(fx.seed) == fx.seed_before,
           f"{mode}: the seed is byte-identical after the writing probe (file by file)")
    dr = S.dry_run_bundle_ok(work, s.state, s.config, "acme/alpha")
    tap.ok(dr.returncode == 0, f"{mode}: the seed's digest re-verifies (bundle --dry-run --state)",
           dr.stderr)


def a_running_probes_mounts_are_out_of_reach(s):
    """While a probe runs: its workspace is mounted in serve's private mount
    namespace, not in ours; or, where a daemon resolves the mount sources
    in the host's (B.workspaces_on_host), under the root-only state
    directory."""
    mode, srv, state = s.mode, s.srv, s.state
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", srv.probe(SLOW, "acme/alpha")))
    t.start()
    s.requests += 1
    if B.workspaces_on_host:
        # Docker and sbx: their daemons (dockerd, sandboxd) resolve
        # mount sources in the host's mount namespace, so serve
        # unshares none; the workspaces are in ours, under the
        # root-only state directory (docs/runtimes.md, docker's "The
        # snapshot: what the daemon mounts", sbx's "How the snapshot
        # gets in").
        run_dir = os.path.join(S.work_dir(state), srv.run)
        rootfs_mp = os.path.join(run_dir, "rootfs")
        # The running probe's mounts, not a waiting sandbox's (the pool's).
        inv_mounts = S.wait_for(lambda: [m for m in mount_lines(run_dir) if m[0] != rootfs_mp
                                         and os.path.relpath(m[0], run_dir).split("/")[0]
                                         in S.probe_workspaces(state, srv.run, srv.pid)], timeout=20)
        same_ns = os.readlink(f"/proc/{srv.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
        t.join(timeout=60)
        B.not_applicable(tap, f"{mode}: the invocation's mounts are in serve's mount namespace only",
                         f"{B.mount_daemon} resolves mount sources in the host's mount namespace, so serve unshares "
                         "none: the workspaces are mounted in the host's, under the root-only state "
                         "directory (checked next)")
        invs = {os.path.relpath(m[0], run_dir).split("/")[0] for m in inv_mounts or []}
        ws = [m for m in inv_mounts or [] if os.path.dirname(m[0]) == run_dir]
        tap.ok(same_ns and inv_mounts and all(m[0].startswith(run_dir + "/") for m in inv_mounts)
               and len(invs) == 1 and (lambda i: i.isdigit() or S.POOL_NAME.fullmatch(i))(invs.pop())
               and ws and all(m[1] == "tmpfs" and {"nosuid", "nodev", "noexec"} <= m[2] for m in ws),
               f"{mode}: {B.name}: serve shares the host's mount namespace, and the invocation's mounts are "
               f"all under STATE/{B.state_subdir}/<run>/<inv>, its workspace a nosuid nodev noexec tmpfs",
               f"same namespace {same_ns}; {inv_mounts}")
        st_state = os.stat(state)
        st_work = os.stat(S.work_dir(state))
        tap.ok(st_state.st_uid == 0 and stat.S_IMODE(st_state.st_mode) == 0o700 and st_work.st_uid == 0,
               f"{mode}: {B.name}: the state directory is root's and 0700, and STATE/{B.state_subdir} "
               "root's: no other host user reaches the workspaces",
               f"state {st_state.st_uid} {oct(st_state.st_mode)}, work {st_work.st_uid} "
               f"{oct(st_work.st_mode)}")
    else:
        work_mounts = S.wait_for(lambda: S.mounts_under(os.path.join(S.work_dir(state), srv.run),
                                                        f"/proc/{srv.pid}/mountinfo"), timeout=20)
        ours = S.mounts_under(S.work_dir(state), "/proc/self/mountinfo")
        t.join(timeout=60)
        tap.ok(work_mounts and not ours,
               f"{mode}: the invocation's mounts are in serve's mount namespace only",
               f"serve's {work_mounts} ours {ours}")
    tap.ok(result.get("r") == S.answer("YES"), f"{mode}: the slow probe answers", result)


def a_disallowed_repo_gets_exactly_error(s):
    """A raw frame naming a repository outside privateRepos, and the client's
    request for it."""
    mode, srv = s.mode, s.srv
    resp = srv.raw(S.request_frame("acme/gamma", S.OUTCOMES, S.answer_script("YES")))
    tap.ok(resp == S.ERROR_FRAME, f"{mode}: a raw frame naming a disallowed repo gets exactly the ERROR frame",
           resp.hex())
    rc = srv.client(S.answer_script("YES"), "acme/gamma")
    tap.ok(rc.stdout == S.ERROR_LINE.encode() and rc.stderr == b"",
           f"{mode}: the client prints exactly {S.ERROR_LINE.strip()} for it", rc)
    s.requests += 2


def malformed_frames_get_exactly_the_error_frame(s):
    srv = s.srv
    good = S.request_frame("acme/alpha", S.OUTCOMES, S.answer_script("YES"))
    body = good[10:]
    malformed = {
        "bad magic": S.frame(body, magic=b"SPRX"),
        "version 2 with a v1 body": S.frame(body, version=2),
        "version 3": S.frame(body, version=3),
        "kind response": S.frame(body, kind=2),
        "truncated body": good[:-3],
        "trailing byte": good + b"\0",
        "body_length above the maximum": S.frame(b"", length=65894),
        "body_length below the minimum": S.frame(b"", length=29),
        "header only, cut short": good[:6],
        "nothing at all": b"",
        "unknown tag 04": S.frame(body + S.field(4, b"x")),
        "two outcomes": S.frame(S.field(1, b"acme/alpha") + S.field(2, b"A") + S.field(2, b"B")
                                + S.field(3, b"print(1)")),
        "four outcomes": S.frame(S.field(1, b"acme/alpha") + b"".join(S.field(2, o) for o in
                                 (b"A", b"B", b"C", b"D")) + S.field(3, b"print(1)")),
        "an outcome spelled ERROR": S.request_frame("acme/alpha", ("YES", "ERROR", "NO"),
                                                    S.answer_script("YES")),
        "duplicate outcomes": S.request_frame("acme/alpha", ("YES", "YES", "NO"),
                                              S.answer_script("YES")),
        "a zero-length script": S.frame(S.field(1, b"acme/alpha") + b"".join(
            S.field(2, o) for o in (b"A", b"B", b"C")) + S.field(3, b"")),
        "a case variant of the repo": S.request_frame("Acme/Alpha", S.OUTCOMES, S.answer_script("YES")),
        "a repo with an embedded NUL": S.request_frame(b"acme/alpha\0x", S.OUTCOMES,
                                                       S.answer_script("YES")),
        "a 64 KiB + 1 script": S.request_frame("acme/alpha", S.OUTCOMES, b"#" * 65537),
    }
    for name, data in malformed.items():
        resp = srv.raw(data)
        # A frame whose header names version 2 is answered in version 2.
        want = S.ERROR_FRAME_V2 if name.startswith("version 2") else S.ERROR_FRAME
        tap.ok(resp == want, f"malformed frame ({name}): exactly the ERROR frame of its version", resp.hex())
    s.requests += len(malformed)
    # An empty connection ("nothing at all") may or may not count as a request.
    s.may_go_unaudited += 1
    resp = srv.raw(S.request_frame("acme/alpha", S.OUTCOMES, S.answer_script("NO")))
    tap.ok(resp == b"SPRB\x01\x02\x00\x00\x00\x01\x02",
           "after the malformed frames, a valid raw frame gets the second outcome's frame", resp.hex())
    s.requests += 1


def the_sandbox_tmp_is_writable(s):
    r_tmp = s.srv.probe(TMP_WRITABLE, "acme/beta")
    tap.ok(r_tmp == S.answer("YES"), "the sandbox's /tmp is writable scratch space (docs/bundle.md)",
           f"{r_tmp} (runc chmods a tmpfs mount point to the mode of the directory under it: "
           "the rootfs's /tmp must be 1777)")
    s.requests += 1


def one_audit_line_per_request(s):
    """One line per request, in order, with the documented keys."""
    mode, srv, state = s.mode, s.srv, s.state
    time.sleep(0.2)
    lines = S.audit_lines(state, srv.run)[s.audit_before:]
    problems = [(i, S.audit_key_problems(rec)) for i, rec in enumerate(lines) if S.audit_key_problems(rec)]
    expected = tuple(range(s.requests - s.may_go_unaudited, s.requests + 1))
    tap.ok(len(lines) in expected and not problems,
           f"{mode}: one well-formed audit line per request, keys in the documented order",
           f"{len(lines)} lines for {expected} requests; {problems[:3]}; first {lines[:1]}")
    if not lines:
        return
    first = lines[0]
    tap.ok(first["status"] == "answered" and first["result"] == "YES" and first["reason"] is None
           and first["repo"] == "acme/alpha" and first["outcomes"] == list(S.OUTCOMES)
           and first["snapshot"] == mode and first["debited"] is True and first["launched"] is True
           and first["exit"] == 0 and first["oom"] is False and first["timed_out"] is False
           and first["signal"] in (0, None) and isinstance(first["wall_ms"], int),
           f"{mode}: the first probe's line: answered YES, {mode} snapshot, debited, launched, exit 0",
           first)
    tap.ok(first["script_sha256"] == S.sha256_tag(MUTATE + f"# {SCRIPT_CANARY}\n")
           and first["seed_commit"] == s.fx.alpha_rec["commit"] and first["seed_digest"] == s.fx.alpha_rec["digest"],
           f"{mode}: it records the script's sha256 and the seed's commit and digest", first)
    invs = [S.audit_id_inv(rec) for rec in lines]
    tap.ok(invs == sorted(invs) and len(set(invs)) == len(invs) and all(i >= 1 for i in invs),
           f"{mode}: invocation ids are increasing decimal counters", invs)
    budgets = [rec["budget_remaining"] for rec in lines if rec["debited"]]
    tap.ok(budgets == sorted(budgets, reverse=True) and len(set(budgets)) == len(budgets),
           f"{mode}: budget_remaining falls by one per debited request", budgets)
    refused = [rec for rec in lines if rec["repo"] == "acme/gamma" or rec["repo"] is None]
    tap.ok(refused and all(rec["status"] == "refused" and rec["debited"] is False
                           and rec["launched"] is False and rec["result"] == "ERROR" for rec in refused),
           f"{mode}: refused requests are audited refused, not debited, not launched", refused[:2])
    # Who asked: the raw frames came from this process, the rest from the
    # client, a child of it; all as root.
    me = (os.getuid(), os.getgid())
    raw_pids = {rec["peer_pid"] for rec in lines if rec["cause"] == "frame"}
    client_pids = {rec["peer_pid"] for rec in lines if rec["repo"] in ("acme/alpha", "acme/beta")
                   and rec["script_sha256"] != S.sha256_tag(S.answer_script("NO"))}
    sent_malformed = mode == "overlay"     # malformed_frames_get_exactly_the_error_frame ran
    tap.ok(all((rec["peer_uid"], rec["peer_gid"]) == me for rec in lines)
           and raw_pids == ({os.getpid()} if sent_malformed else set())
           and client_pids and os.getpid() not in client_pids and srv.pid not in client_pids,
           f"{mode}: each line names who asked: the peer's uid and gid, and its pid (this test's for "
           "its malformed frames, a client's for the client's requests)", (raw_pids, client_pids, me))
    answered = {rec["id"]: rec for rec in lines if rec["status"] == "answered"}
    admitted = [rec for rec in S.audit_lines(state, srv.run, admissions=True) if rec["status"] == "admitted"
                and rec["id"] in answered]
    tap.ok(admitted and all((rec["peer_uid"], rec["peer_gid"], rec["peer_pid"])
                            == tuple(answered[rec["id"]][k] for k in ("peer_uid", "peer_gid", "peer_pid"))
                            for rec in admitted),
           f"{mode}: an admission record names the same peer as its result record", admitted[:1])


def the_audit_log_is_private_and_holds_no_content(s):
    mode, state = s.mode, s.state
    raw = S.audit_raw(state)
    tap.ok(SCRIPT_CANARY.encode() not in raw and ALPHA.encode() not in raw and b"MUTATED" not in raw,
           f"{mode}: the audit log holds neither the script nor the repository's content")
    st_a = os.stat(S.audit_path(state))
    tap.ok(st_a.st_mode & 0o077 == 0 and st_a.st_uid == 0
           and os.stat(os.path.dirname(S.audit_path(state))).st_mode & 0o077 == 0,
           f"{mode}: the audit log and its directory are root's and private",
           oct(st_a.st_mode))


def nothing_is_left_between_requests(s):
    during = S.leaks(s.state, s.srv.run, serve_pid=s.srv.pid)
    tap.ok(not during, f"{s.mode}: between requests nothing of the finished probes is left", during)


def sigterm_leaves_nothing(s):
    mode, srv = s.mode, s.srv
    run = srv.run
    rc = srv.stop(timeout=60)
    tap.ok(rc == 0, f"{mode}: SIGTERM: serve exits 0", f"exit {rc}: {srv.stderr()[-500:]}")
    left = S.leaks(s.state, run, after_exit=True, srv=srv)
    tap.ok(not left, f"{mode}: after SIGTERM nothing is left (containers, cgroups, mounts, work, "
                     f"{B.binary_name or B.state_subdir} root, socket, ready file)", left)


def snapshot_mode_tests(mode):
    """The test functions of one snapshot mode, in order; the malformed frames
    and /tmp are tested once, in overlay mode."""
    once = [malformed_frames_get_exactly_the_error_frame, the_sandbox_tmp_is_writable] if mode == "overlay" else []
    return ([serve_becomes_ready_and_says_so, a_probe_changes_only_its_own_copy,
             a_running_probes_mounts_are_out_of_reach, a_disallowed_repo_gets_exactly_error] + once
            + [one_audit_line_per_request, the_audit_log_is_private_and_holds_no_content,
               nothing_is_left_between_requests, sigterm_leaves_nothing])


# ---- preflight refusals ---------------------------------------------------------

def preflight_refuses_another_runtime(fx):
    other_runtime = "runc" if B.runtime == "sbx" else "sbx"
    preflight_refusal(f"runtime not {B.runtime}", "sealedProbes.runtime",
                      work.write_config(["acme/alpha", "acme/beta"], runtime=other_runtime, timeout=5,
                                        maxInvocations=1000), fx.state)


def preflight_refuses_sealed_probes_disabled(fx):
    preflight_refusal("sealedProbes disabled", "sealedProbes.enabled",
                      work.write_config(["acme/alpha", "acme/beta"], enabled=False, timeout=5, maxInvocations=1000),
                      fx.state)


def preflight_refuses_a_runtime_too_old(fx):
    """A runtime binary whose --version, or a daemon whose /version, answers
    B.old_version."""
    with B.too_old(work.dir) as (what, binary):
        preflight_refusal(f"{B.option} {what}", B.option, fx.config, fx.state, binary=binary)


def preflight_refuses_a_runtime_that_is_no_file(fx):
    preflight_refusal(f"{B.option} naming no file", B.option, fx.config, fx.state, binary=B.missing(work.dir))


def preflight_refuses_another_backends_option(fx):
    """Another backend's binary option, with this backend's config: refused,
    never silently unused (docs/operations.md)."""
    for other in other_backends(B.name):
        option = BACKENDS[other]["option"]
        preflight_refusal(f"{option} (backend {other}) with runtime {B.runtime}", option, fx.config, fx.state,
                          extra=(option, option_example(other)))


def preflight_refuses_a_tampered_rootfs(fx):
    tampered = os.path.join(work.dir, "rootfs-tampered")
    subprocess.run(["cp", "-a", work.rootfs, tampered], check=True)
    try:
        with open(os.path.join(tampered, "root", "etc", "sp-tampered"), "w") as f:
            f.write("x")
        preflight_refusal("a tampered rootfs copy", "--rootfs", fx.config, fx.state, rootfs=tampered)
    finally:
        shutil.rmtree(tampered, ignore_errors=True)


def preflight_refuses_a_repo_with_no_seed(fx):
    unstaged = work.write_config(["acme/alpha", "acme/beta", "acme/unstaged"], timeout=5, maxInvocations=1000)
    preflight_refusal("a configured repo with no staged seed", "acme/unstaged", unstaged, fx.state)


def preflight_refuses_a_state_with_nothing_staged(fx):
    empty = work.new_state()
    os.makedirs(empty, mode=0o700)
    preflight_refusal("a state directory with nothing staged", "staged.json", fx.config, empty)


PREFLIGHT_TESTS = [preflight_refuses_another_runtime, preflight_refuses_sealed_probes_disabled,
                   preflight_refuses_a_runtime_too_old, preflight_refuses_a_runtime_that_is_no_file,
                   preflight_refuses_another_backends_option, preflight_refuses_a_tampered_rootfs,
                   preflight_refuses_a_repo_with_no_seed, preflight_refuses_a_state_with_nothing_staged]


def main():
    try:
        fx = Fixture()
        for mode in ("overlay", "copy"):
            session = Session(fx, mode)
            try:
                run_tests(tap, snapshot_mode_tests(mode), session)
            finally:
                session.close()
        run_tests(tap, PREFLIGHT_TESTS, fx)
    finally:
        work.close()
    tap.finish()


main()
