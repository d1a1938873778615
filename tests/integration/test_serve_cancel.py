"""Cancellation (docs/operations.md, "Cancellation"): a client whose
connection closes before its answer cancels its invocation.  At
--concurrency 1, a client that closes 1 s into a probe that would sleep 60 s
leaves no probe 5 s later, and the next probe answers within 5 s; its audit
line says `cancelled`, cause `client_gone`, debited (it was admitted).  One
that goes away while queued is audited `cancelled` without a debit or a
launch.  The bucketed release holds the worker to the cancelled one's
boundary, never longer.  Stopping serve cancels what runs the same way:
the client gets ERROR, the line says cause `stopped`.  Each on every
backend."""

import datetime
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-cancel-")
YES = S.answer("YES")
SLEEPY = "import time, json\ntime.sleep(%s)\njson.dump({'result': 'YES'}, open('/probe/out', 'w'))\n"
QUICK = S.answer_script("YES")
GONE_WITHIN = 5.0    # the bound: no probe left 5 s after the client closed


def open_request(srv, script):
    """A client that sends its request whole and half-closes, as the real one
    does, and then holds its connection open until the test closes it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(srv.socket)
    s.sendall(S.request_frame("acme/alpha", S.OUTCOMES, script))
    s.shutdown(socket.SHUT_WR)
    return s


def probe_left(srv, state):
    """What is left of the probes of srv's run but its pool: containers,
    and the harness's leftovers (processes in the run's cgroups, cgroups,
    workspaces, mounts)."""
    left = sorted(S.probe_containers(state, srv.run, srv.pid))
    return left + S.leaks_now(state, srv.run, serve_pid=srv.pid, srv=srv)


def audit_time(text):
    """An audit time ("2026-12-04T08:00:00.123Z") in seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def record_of(state, run, status_not="admitted", newest=True):
    lines = [r for r in S.audit_lines(state, run) if r["status"] != status_not]
    return lines[-1] if lines and newest else (lines[0] if lines else None)


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=120, maxInvocations=1000)

    # ---- a client that closes 1 s into a 60 s probe --------------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    with S.serving(work, config, state, concurrency=1, queue=4) as srv:
        conn = open_request(srv, SLEEPY % 60)
        started = S.wait_container(state, srv.run, timeout=60, serve_pid=srv.pid)
        tap.ok(started is not None, "client gone: the 60 s probe starts", srv.stderr()[-300:])
        time.sleep(1)
        conn.close()
        closed = time.monotonic()
        S.wait_for(lambda: not probe_left(srv, state), timeout=GONE_WITHIN)
        left = probe_left(srv, state)
        gone_after = time.monotonic() - closed
        tap.ok(left == [], f"client gone: nothing of its probe is left {GONE_WITHIN:.0f} s after the client "
               "closed (no container, no probe process, no workspace or mount)", (left, round(gone_after, 2)))
        t0 = time.monotonic()
        out = srv.probe(QUICK, "acme/alpha", timeout=60)
        tap.ok(out == YES and time.monotonic() - closed < GONE_WITHIN,
               f"client gone: at --concurrency 1 the next probe answers within {GONE_WITHIN:.0f} s of the close",
               (out, round(time.monotonic() - t0, 2), round(time.monotonic() - closed, 2)))
        lines = S.audit_lines(state, srv.run)
        rec = next((r for r in lines if r["status"] not in ("admitted", "answered")), None)
        tap.ok(rec is not None and rec["status"] == "cancelled" and rec["cause"] == "client_gone"
               and rec["debited"] is True and rec["launched"] is True and rec["result"] == "ERROR"
               and "client went away" in (rec["reason"] or "") and rec["wall_ms"] < 30000,
               "client gone: audited `cancelled`, cause `client_gone`, debited and launched, its wall time "
               "the 1 s it ran, not the 60 s", rec)
        tap.ok(all(not S.audit_key_problems(r) for r in lines), "client gone: every audit line is well-formed",
               [S.audit_key_problems(r) for r in lines])
        tap.ok(srv.stop() == 0, "client gone: serve stops cleanly", srv.stderr()[-300:])
        tap.ok(S.leaks(state, srv.run, after_exit=True, srv=srv) == [], "client gone: nothing of the run is left",
               S.leaks_now(state, srv.run, after_exit=True, srv=srv))

    # ---- gone while queued: nothing spent on it ------------------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    with S.serving(work, config, state, concurrency=1, queue=4) as srv:
        res = {}
        first = threading.Thread(target=lambda: res.update(first=srv.probe(SLEEPY % 3, "acme/alpha", timeout=60)))
        first.start()
        S.wait_container(state, srv.run, timeout=60, serve_pid=srv.pid)
        queued = open_request(srv, QUICK)
        time.sleep(0.3)
        queued.close()
        first.join(timeout=90)
        S.wait_for(lambda: len([r for r in S.audit_lines(state, srv.run) if r["status"] != "admitted"]) >= 2,
                   timeout=30)
        lines = S.audit_lines(state, srv.run, admissions=True)
        admitted = [r for r in lines if r["status"] == "admitted"]
        cancel = [r for r in lines if r["status"] == "cancelled"]
        tap.ok(res.get("first") == YES, "queued: the running probe answers", res)
        tap.ok(len(cancel) == 1 and cancel[0]["cause"] == "client_gone" and cancel[0]["debited"] is False
               and cancel[0]["launched"] is False and cancel[0]["sandbox"] is None and len(admitted) == 1,
               "queued: a client gone before its turn is audited `cancelled`, cause `client_gone`, neither "
               "debited nor launched, with no admission record", lines)
        tap.ok(srv.probe(QUICK, "acme/alpha", timeout=60) == YES, "queued: afterwards a probe answers")

    # ---- bucketed release: the worker waits for the cancelled one's boundary --
    state = work.staged_state(config, [("acme/alpha", alpha)])
    with S.serving(work, config, state, concurrency=1, queue=4, extra=("--release", "bucketed")) as srv:
        conn = open_request(srv, SLEEPY % 60)
        S.wait_container(state, srv.run, timeout=60, serve_pid=srv.pid)
        time.sleep(1)
        conn.close()
        closed = time.monotonic()
        S.wait_for(lambda: not probe_left(srv, state), timeout=GONE_WITHIN)
        left = probe_left(srv, state)
        tap.ok(left == [], f"bucketed: nothing of the probe is left {GONE_WITHIN:.0f} s after the close", left)
        out = srv.probe(QUICK, "acme/alpha", timeout=120)
        rec = [r for r in S.audit_lines(state, srv.run) if r["status"] not in ("admitted",)]
        cancel = next((r for r in rec if r["status"] == "cancelled"), None)
        nxt = next((r for r in rec if r["status"] == "answered"), None)
        tap.ok(out == YES and cancel is not None and cancel["release_ms"] is not None and nxt is not None,
               "bucketed: the next probe answers, after the cancelled one's release", (out, rec))
        if cancel is not None and nxt is not None:
            # The next one started when the cancelled one's worker was let go:
            # at its boundary (release_ms after its start), not at once.
            gap = audit_time(nxt["started"]) - audit_time(cancel["started"])
            tap.ok(gap * 1000 >= cancel["release_ms"] - 50,
                   "bucketed: the worker is held to the cancelled invocation's boundary, so that what queues "
                   "behind it waits a released duration", (gap, cancel["release_ms"]))
        tap.ok(time.monotonic() - closed < 30, "bucketed: and no longer than the ladder allows")

    # ---- stopping serve cancels what runs -------------------------------------
    state = work.staged_state(config, [("acme/alpha", alpha)])
    srv = S.Serve(work, config, state, concurrency=2)
    try:
        if not srv.start():
            raise S.ServeFailed(srv.stderr())
        res = {}
        t = threading.Thread(target=lambda: res.update(out=srv.probe(SLEEPY % 60, "acme/alpha", timeout=90)))
        t.start()
        S.wait_container(state, srv.run, timeout=60, serve_pid=srv.pid)
        t0 = time.monotonic()
        rc = srv.stop()
        t.join(timeout=60)
        tap.ok(rc == 0 and res.get("out") == S.ERROR_LINE and time.monotonic() - t0 < 30,
               "stop: serve stops at once, and the running probe's client gets ERROR", (rc, res))
        rec = record_of(state, srv.run)
        tap.ok(rec is not None and rec["status"] == "cancelled" and rec["cause"] == "stopped"
               and rec["debited"] is True, "stop: its line says `cancelled`, cause `stopped`", rec)
        tap.ok(S.leaks(state, srv.run, after_exit=True, srv=srv) == [], "stop: nothing of the run is left",
               S.leaks_now(state, srv.run, after_exit=True, srv=srv))
    finally:
        srv.cleanup()
finally:
    work.close()
tap.finish()
