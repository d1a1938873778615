"""Sandboxes created ahead of their request (`serve --pool N`;
docs/operations.md, "Sandboxes created ahead"), one check per rule:
- a sandbox made ahead serves exactly one invocation of the repository it
  was made for and is removed afterwards: never reused, never another
  repository's;
- nothing derived from any request is in it before its own request;
- validate, debit, then launch: a request refused before the debit takes
  none (the exhausted budget's case is in test_serve_failures.py);
- the pool is bounded (--pool, its range), refilled off the request path,
  emptied on SIGTERM, and what a kill -9 leaves is removed by the next start;
- a backend that cannot create ahead (sbx) starts every sandbox cold.
Each passes its own --pool, whatever SP_TEST_POOL says, and counts the
sandboxes that --pool makes wait (wait_pool_full_n), never SP_TEST_POOL's."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, require_root_and  # noqa: E402

B = backend()
require_root_and("git")
import sp_backend  # noqa: E402
import sp_serve as S  # noqa: E402

tap = Tap()
work = S.Work("sp-pool-")
nonce = uuid.uuid4().hex[:12]
CANARY = f"POOL-REQUEST-CANARY-{nonce}"
OUTCOMES = ("ALPHA", "BETA", "REUSED")
MARKS = ("/tmp/.sp-pool-mark", "/probe/repo/.sp-pool-mark")
# Which repository it was given, and whether any earlier probe was here.
WHOAMI = ("import json, os\n"
          f"# {CANARY}\n"
          "repo = open('/probe/repo/whoami').read().strip()\n"
          f"seen = [p for p in {MARKS!r} if os.path.exists(p)]\n"
          f"for p in {MARKS!r}:\n"
          "    open(p, 'w').write('x')\n"
          "answer = 'REUSED' if seen else repo.upper()\n"
          "open('/probe/out', 'w').write(json.dumps({'result': answer}))\n")
SLEEPY = "import time\ntime.sleep(%d)\nopen('/probe/out', 'w').write('{\"result\":\"ALPHA\"}')\n"
CAN = S.CREATES_AHEAD
NOT_AHEAD = f"{B.name} cannot create a sandbox ahead: every sandbox starts cold (the last check)"

alpha = work.make_clone("alpha", {"whoami": b"alpha\n", "src/a.txt": b"alpha text\n"})
beta = work.make_clone("beta", {"whoami": b"beta\n", "src/b.txt": b"beta text\n"})
config = work.write_config(["acme/alpha", "acme/beta"])
config1 = work.write_config(["acme/alpha"])


def repo_of(srv, name):
    """The repository a waiting sandbox was made for: its snapshot's whoami,
    read in serve's mount namespace."""
    path = f"/proc/{srv.pid}/root" + os.path.join(S.work_dir(srv.state), srv.run, name, "bundle", "repo", "whoami")
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def workspace_files(srv, name):
    """{relative path: bytes} of every regular file in a sandbox's workspace,
    its repository snapshot included, read in serve's mount namespace."""
    top = f"/proc/{srv.pid}/root" + os.path.join(S.work_dir(srv.state), srv.run, name)
    out = {}
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            try:
                if not stat.S_ISREG(os.lstat(p).st_mode):
                    continue
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, top)] = fh.read()
            except OSError as e:
                out[os.path.relpath(p, top)] = f"unreadable: {e}".encode()
    return out


def runtime_state_bytes(state, run, cid):
    """The runtime's own files for container cid (runc's <root>/<cid>/,
    runsc's <root>/<cid>_sandbox:<cid>.state), concatenated; b"" for docker,
    whose state is the daemon's."""
    root = B.run_root(state, run)
    out = b""
    if not B.oci_cli or not os.path.isdir(root):
        return out
    for n in os.listdir(root):
        if not n.startswith(cid):
            continue
        p = os.path.join(root, n)
        for d, _, files in (os.walk(p) if os.path.isdir(p) else [(root, [], [n])]):
            for f in files:
                try:
                    # Regular files only: opening runc's exec.fifo would
                    # start the container, as `runc start` does.
                    if not stat.S_ISREG(os.lstat(os.path.join(d, f)).st_mode):
                        continue
                    with open(os.path.join(d, f), "rb") as fh:
                        out += fh.read()
                except OSError:
                    pass
    return out


try:
    state = work.staged_state(config, [("acme/alpha", alpha), ("acme/beta", beta)])

    # ---- one invocation each, of its own repository; nothing of a request before it
    with S.serving(work, config, state, extra=["--pool", "1"]) as srv:
        first = S.wait_pool_full_n(srv, 2 if CAN else 0)
        if not CAN:
            for what in ("one invocation, never reused", "never another repository's",
                         "nothing from a request before its own"):
                tap.skip(f"pool: {what}", NOT_AHEAD)
        else:
            tap.ok(first is not None and sorted(repo_of(srv, n) for n in first) == ["alpha", "beta"],
                   "pool 1, two repositories: one sandbox waits for each", first)
            seen = set(first or ())
            consumed = []
            answers = []
            fresh_names = True
            lefts = []
            for i, repo in enumerate(["acme/alpha", "acme/beta", "acme/beta", "acme/alpha", "acme/alpha",
                                      "acme/beta"]):
                before = S.wait_pool_full_n(srv, 2 if CAN else 0) or set()
                by_repo = {repo_of(srv, n): n for n in before}
                answers.append(srv.probe(WHOAMI, repo, OUTCOMES))
                after = S.wait_pool_full_n(srv, 2 if CAN else 0) or set()
                taken = before - after
                consumed.append((repo, sorted(taken), by_repo.get(repo.split("/")[1])))
                new = after - before
                fresh_names &= not (new & seen)
                seen |= new
                # The taken one is gone: no workspace, no container.
                left = S.leaks(srv.state, srv.run, serve_pid=srv.pid)
                if left:
                    lefts.append((repo, sorted(taken), left, srv.stderr()[-400:]))
            want = [S.answer(r.split("/")[1].upper()) for r in
                    ["acme/alpha", "acme/beta", "acme/beta", "acme/alpha", "acme/alpha", "acme/beta"]]
            tap.ok(answers == want,
                   "each request ran in a sandbox of its own repository, which no earlier probe had used "
                   "(no marker in /tmp or /probe/repo)", answers)
            tap.ok(all(t == [mine] for _, t, mine in consumed),
                   "each request took exactly the one sandbox made for its repository", consumed)
            tap.ok(fresh_names and not lefts,
                   "the taken sandbox is removed after its invocation, and every new one has a name never used",
                   (fresh_names, lefts))
            waiting = S.wait_pool_full_n(srv, 2 if CAN else 0) or set()
            leaked = {}
            for n in waiting:
                files = workspace_files(srv, n)
                bad = [p for p, data in files.items() if CANARY.encode() in data]
                if bad or files.get(os.path.join("bundle", "probe.py"), b"?") != b"" \
                        or files.get(os.path.join("bundle", "out"), b"?") != b"" \
                        or any(os.path.basename(p) == ".sp-pool-mark" for p in files):
                    leaked[n] = bad or sorted(files)
                if CANARY.encode() in runtime_state_bytes(srv.state, srv.run, f"sp-{srv.run}-{n}"):
                    leaked[n] = "runtime state"
            tap.ok(waiting and not leaked,
                   "the waiting sandboxes hold nothing of the requests before them: probe.py and out empty, "
                   "no marker, the script's canary in no file of the workspace or the runtime's state",
                   leaked or waiting)

        # ---- validate, debit, then launch: refused requests take nothing
        if CAN:
            before = S.wait_pool_full_n(srv, 2 if CAN else 0)
            r1 = srv.probe(WHOAMI, "acme/gamma", OUTCOMES)
            r2 = srv.raw(b"not a frame at all")
            r3 = srv.raw(S.request_frame("acme/alpha", ("A", "A", "B"), "x"))
            time.sleep(0.3)
            tap.ok(r1 == S.ERROR_LINE and before is not None
                   and S.pool_members(srv.state, srv.run, srv.pid) == before,
                   "an unknown repository, a bad frame and duplicate outcomes are refused, and the waiting "
                   "sandboxes are the same ones", (r1, r2, r3, before, S.pool_members(srv.state, srv.run, srv.pid), S.created_containers(srv.state, srv.run), srv.stderr()[-600:]))
        else:
            tap.skip("pool: refused requests take nothing", NOT_AHEAD)

    # ---- bounded: --pool's range, and at most N per repository
    for bad in ("5", "16", "-1", "x"):
        r = subprocess.run([S.PROXY, "serve", "--config", config1, "--state", state, "--pool", bad],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        tap.ok(r.returncode == 2 and "--pool" in r.stderr and "0" in r.stderr and "4" in r.stderr,
               f"--pool {bad!r} is refused, naming --pool and its range", (r.returncode, r.stderr[-300:]))
    state1 = work.staged_state(config1, [("acme/alpha", alpha)])
    with S.serving(work, config1, state1, extra=["--pool", "2"]) as srv:
        if CAN:
            full = S.wait_pool_full_n(srv, 2)
            peak = [0, 0]
            stop = threading.Event()

            def sample():
                root = B.run_root(srv.state, srv.run)
                while not stop.is_set():
                    peak[0] = max(peak[0], len(S.pool_members(srv.state, srv.run, srv.pid)))
                    peak[1] = max(peak[1], len(S.containers(root)))
                    time.sleep(0.01)
            th = threading.Thread(target=sample)
            th.start()
            answers = [srv.probe(WHOAMI, "acme/alpha", OUTCOMES) for _ in range(5)]
            stop.set()
            th.join()
            tap.ok(full is not None and answers == [S.answer("ALPHA")] * 5 and peak[0] <= 2 and peak[1] <= 3,
                   "pool 2: two wait; through five requests never more than two wait, nor more than three "
                   "containers exist (the pool and the one running)", (full, answers, peak))
        else:
            tap.skip("pool: bounded", NOT_AHEAD)
    with S.serving(work, config1, state1, extra=["--pool", "0"]) as srv:
        r = srv.probe(WHOAMI, "acme/alpha", OUTCOMES)
        time.sleep(0.5)
        tap.ok(r == S.answer("ALPHA") and not S.pool_members(srv.state, srv.run, srv.pid)
               and not S.containers(B.run_root(srv.state, srv.run)),
               "pool 0: no sandbox is made ahead, and probes run cold", r)

    # ---- refilled off the request path: a refill that takes 5 s does not delay an answer
    if CAN and B.oci_cli:
        bins = sp_backend.FakeBins()
        try:
            flag = os.path.join(work.dir, f"slow-create-{nonce}")
            real = sp_backend.real_binary(B.binary_name)
            slow = bins.script(B.binary_name,
                               "#!/bin/sh\n"
                               "for a in \"$@\"; do\n"
                               f"  if [ \"$a\" = create ] && [ -e {flag} ]; then sleep 5; fi\n"
                               "done\n"
                               f"exec {real} \"$@\"\n")
            with S.serving(work, config1, state1, binary=slow, extra=["--pool", "1"]) as srv:
                ready = S.wait_pool_full_n(srv, 1)
                open(flag, "w").close()
                t0 = time.monotonic()
                r = srv.probe(WHOAMI, "acme/alpha", OUTCOMES)
                took = time.monotonic() - t0
                # Made but not yet created: its create is the one asleep.
                refilling = not {f"sp-{srv.run}-{n}" for n in S.pool_members(srv.state, srv.run, srv.pid)} \
                    & S.created_containers(srv.state, srv.run)
                os.unlink(flag)
                refilled = S.wait_pool_full_n(srv, 1, timeout=60)
                tap.ok(ready is not None and r == S.answer("ALPHA") and took < 3.0 and refilling,
                       "while the refill's create takes 5 s, the request that took the waiting sandbox is "
                       "answered at once (the refill is off its path)", (r, round(took, 2), refilling))
                tap.ok(refilled is not None, "the pool is refilled afterwards", refilled)
        finally:
            bins.close()
    else:
        reason = NOT_AHEAD if not CAN else "docker's create is an Engine API call: there is no binary to slow down"
        tap.skip("pool: refilled off the request path", reason)

    # ---- emptied on SIGTERM
    srv = S.Serve(work, config1, state1, extra=["--pool", "2"])
    try:
        ok = srv.start()
        run = srv.run
        waiting = S.wait_pool_full_n(srv, 2 if CAN else 0)
        rc = srv.stop(sig=signal.SIGTERM)
        left = S.leaks(state1, run, after_exit=True, srv=srv)
        tap.ok(ok and waiting is not None and (len(waiting) == 2) == CAN and rc == 0 and not left,
               "SIGTERM with sandboxes waiting: serve exits 0 and nothing of them is left", (waiting, rc, left))
    finally:
        srv.cleanup()

    # ---- kill -9 leaves them; the next start removes them
    srv = S.Serve(work, config1, state1, extra=["--pool", "2"])
    old_run = None
    try:
        if srv.start():
            old_run = srv.run
            waiting = S.wait_pool_full_n(srv, 2 if CAN else 0)
            srv.kill9()
            time.sleep(0.5)
            left_behind = S.containers(B.run_root(state1, old_run))
            tap.ok(waiting is not None and (bool(left_behind) == CAN),
                   "kill -9 with sandboxes waiting: their containers are left behind", (waiting, left_behind))
        else:
            tap.ok(False, "kill -9: serve became ready", srv.stderr())
    finally:
        srv.cleanup()
    srv2 = S.Serve(work, config1, state1, probe_id_base=srv.probe_id_base, extra=["--pool", "1"])
    try:
        ok = srv2.start()
        left = S.leaks(state1, old_run, after_exit=True, running_run=srv2.run, running_pid=srv2.pid) \
            if ok and old_run else ["not started"]
        tap.ok(ok and not left and not os.path.exists(os.path.join(S.work_dir(state1), old_run or "-")),
               "the next start removes the killed serve's waiting sandboxes (containers, cgroups, workspaces)",
               left)
        srv2.stop()
    finally:
        srv2.cleanup()

    # ---- the cap in all: 16 repositories at --pool 1 get 15 waiting, and serve says so
    if CAN:
        many = [f"acme/r{k}" for k in range(16)]
        config16 = work.write_config(many)
        state16 = work.staged_state(config16, [(r, alpha) for r in many])
        with S.serving(work, config16, state16, extra=["--pool", "1"]) as srv:
            capped = S.wait_pool_full_n(srv, 15, timeout=120)
            time.sleep(1.0)
            n = len(S.pool_members(srv.state, srv.run, srv.pid))
            tap.ok(capped is not None and n == 15 and "at most 15 sandboxes wait in all" in srv.stderr(),
                   "16 repositories at --pool 1: 15 sandboxes wait, no more, and serve says the cap at start",
                   (n, srv.stderr()[-400:]))
    else:
        tap.skip("pool: the cap in all", NOT_AHEAD)

    # ---- a backend that cannot create ahead starts cold
    with S.serving(work, config1, state1, extra=["--pool", "1"]) as srv:
        r = srv.probe(WHOAMI, "acme/alpha", OUTCOMES)
        time.sleep(1.0)
        members = S.pool_members(srv.state, srv.run, srv.pid)
        said = "cannot create a sandbox ahead" in srv.stderr()
        if CAN:
            tap.ok(r == S.answer("ALPHA") and members and not said,
                   f"{B.name} creates ahead: a sandbox waits, and serve says nothing of starting cold",
                   (r, members))
        else:
            tap.ok(r == S.answer("ALPHA") and not members and said,
                   f"{B.name} cannot create ahead: serve says every sandbox starts cold, none waits, and the "
                   "probe answers as without the pool", (r, members, srv.stderr()[-300:]))
finally:
    work.close()
tap.finish()
