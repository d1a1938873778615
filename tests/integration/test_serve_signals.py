"""serve and signals (docs/operations.md, "Signals"; sealed-probe-proxy(8)):
SIGTERM, SIGINT, SIGHUP and SIGQUIT each stop serve the clean way while a
probe runs and a sandbox waits in the pool: exit 0, one line naming the
signal, the probe's client answered ERROR, and nothing of the run left (no
socket, ready file, container, cgroup, mount, workspace or runtime state
directory).  SIGUSR1, SIGUSR2, SIGALRM and a real-time signal are ignored
with one line each, and serve goes on answering.  A stop asked for during
the preflight leaves nothing either, and serve never says ready.  On every
backend."""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-signals-")
YES = S.answer("YES")
SLEEPY = "import time, json\ntime.sleep(%s)\njson.dump({'result': 'YES'}, open('/probe/out', 'w'))\n"
QUICK = S.answer_script("YES")
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
IGNORED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGRTMIN + 3)


def signal_word(sig):
    """How serve names it: SIGHUP, or "signal N" for a real-time one."""
    return f"signal {int(sig)}" if sig >= signal.SIGRTMIN else signal.Signals(sig).name


def work_left(state, run):
    """The run's directories that must go with it: its work directory
    below the test's --run-dir (runc, gvisor), or STATE/<backend>-work/RUN."""
    return [p for p in (os.path.join(S.work_dir(state), run or "-"), B.run_root(state, run or "-"))
            if os.path.lexists(p)]


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=60, maxInvocations=1000)

    # ---- each stopping signal, with a probe running --------------------------
    for sig in STOPPING:
        name = signal.Signals(sig).name
        state = work.staged_state(config, [("acme/alpha", alpha)])
        srv = S.Serve(work, config, state, concurrency=2)
        try:
            if not tap.ok(srv.start(), f"{name}: serve becomes ready", srv.stderr()[-400:]):
                continue
            res = {}
            t = threading.Thread(target=lambda: res.update(out=srv.probe(SLEEPY % 30, "acme/alpha", timeout=90)))
            t.start()
            S.wait_container(state, srv.run, timeout=60, serve_pid=srv.pid)
            rc = srv.stop(sig=sig)
            t.join(timeout=60)
            err = srv.stderr()
            tap.ok(rc == 0 and f"{name} from pid {os.getpid()}: stopping cleanly" in err,
                   f"{name}: serve stops cleanly (exit 0), saying which signal and from whom", (rc, err[-500:]))
            tap.ok(res.get("out") == S.ERROR_LINE, f"{name}: the running probe's client gets ERROR", res)
            left = S.leaks(state, srv.run, after_exit=True, srv=srv) + work_left(state, srv.run)
            tap.ok(left == [], f"{name}: nothing of the run is left (socket, ready file, containers, cgroups, "
                   "mounts, workspaces, runtime state)", left)
        finally:
            srv.cleanup()

    # ---- signals that are ignored, one line each -----------------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    with S.serving(work, config, state) as srv:
        for sig in IGNORED:
            os.kill(srv.pid, sig)
        S.wait_for(lambda: all(f"{signal_word(s)} from pid" in srv.stderr() for s in IGNORED), timeout=10)
        err = srv.stderr()
        for sig in IGNORED:
            word = signal_word(sig)
            lines = [ln for ln in err.splitlines() if f"{word} from pid" in ln]
            tap.ok(len(lines) == 1 and "ignored" in lines[0] and "SIGTERM, SIGINT, SIGHUP or SIGQUIT" in lines[0],
                   f"{word}: ignored, with one line saying so and what stops serve", lines)
        tap.ok(srv.alive() and srv.probe(QUICK, "acme/alpha", timeout=60) == YES,
               "ignored signals: serve goes on answering")
        tap.ok(srv.stop() == 0, "ignored signals: and stops cleanly on SIGTERM", srv.stderr()[-300:])

    # ---- nohup: a SIGHUP ignored at start stays ignored ----------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    srv = S.Serve(work, config, state)
    srv.ignored_at_start = (signal.SIGHUP,)
    try:
        if tap.ok(srv.start(), "nohup: serve started with SIGHUP ignored becomes ready", srv.stderr()[-400:]):
            os.kill(srv.pid, signal.SIGHUP)
            time.sleep(1)
            tap.ok(srv.alive() and srv.probe(QUICK, "acme/alpha", timeout=60) == YES
                   and "SIGHUP" not in srv.stderr(),
                   "nohup: a SIGHUP ignored when serve started stays ignored: it goes on answering",
                   srv.stderr()[-400:])
            tap.ok(srv.stop() == 0 and "SIGTERM from pid" in srv.stderr(),
                   "nohup: SIGTERM still stops it cleanly", srv.stderr()[-300:])
    finally:
        srv.cleanup()

    # ---- a stop during the preflight --------------------------------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    roots = os.path.join(state, B.state_subdir)
    srv = S.Serve(work, config, state)
    try:
        before = set(os.listdir(roots)) if os.path.isdir(roots) else set()
        srv._out = open(srv.stdout_path, "wb")
        srv._err = open(srv.stderr_path, "wb")
        srv.proc = S.subprocess.Popen(srv.argv, stdin=S.subprocess.DEVNULL, stdout=srv._out, stderr=srv._err,
                                      env=srv.env, cwd=srv.dir, preexec_fn=srv.signals_at_start)
        # The run's runtime state directory is made in the preflight, before
        # the canary: signal then.
        new = S.wait_for(lambda: (set(os.listdir(roots)) - before) if os.path.isdir(roots) else None, timeout=60,
                         interval=0.01)
        run = sorted(new)[0] if new else None
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.proc.wait(timeout=120)
        err = srv.stderr()
        tap.ok(run is not None and rc == 1 and "stopped before it was ready" in err
               and srv.ready_content() in (None, ""),
               "preflight: a SIGTERM during the preflight stops serve before it says ready (exit 1, said)",
               (run, rc, err[-500:]))
        left = S.leaks(state, run, after_exit=True, srv=srv) + work_left(state, run) if run else ["no run seen"]
        tap.ok(left == [], "preflight: and leaves nothing of the run", left)
    finally:
        srv.cleanup()
finally:
    work.close()
tap.finish()
