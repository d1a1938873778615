"""`serve` reads request frames off the slots (docs/operations.md, "One
request"): at --concurrency 1, 20 silent connections and 20 that send one
byte every 2 s delay a valid probe by little (a generous bound here; the
figure is bench/slow_clients.py's); each of them gets ERROR at the frame
deadline, audited; a request sent slowly but within the deadline is served;
and connections beyond SP_SERVE_UNREAD_MAX get ERROR at once."""

import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-frames-")
YES = S.answer("YES")
QUICK = S.answer_script("YES")
BOUNDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "base", "bounds.h")


def bound(name):
    with open(BOUNDS) as f:
        return int(re.search(r"#define %s\s+(\d+)" % name, f.read()).group(1))


ANSWER_1 = b"SPRB\x01\x02\x00\x00\x00\x01\x01"  # the response frame naming the first outcome
UNREAD_MAX = bound("SP_SERVE_UNREAD_MAX")
READ_SECONDS = bound("SP_SERVE_REQUEST_READ_SECONDS")


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    return s


def drip(s, data, every, stop):
    """Sends data one byte every `every` seconds until done, stopped, or the
    proxy closes the connection."""
    for b in data:
        if stop.wait(every):
            return
        try:
            s.send(bytes([b]))
        except OSError:
            return


def reply(s):
    got = b""
    try:
        while len(got) < 64:
            chunk = s.recv(64 - len(got))
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    return got


def timed_probe(srv):
    t0 = time.monotonic()
    out = srv.probe(QUICK, "acme/alpha", timeout=120)
    return out, time.monotonic() - t0


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=10, maxInvocations=1000)
    state = work.staged_state(config, [("acme/alpha", alpha)])
    frame = S.request_frame("acme/alpha", S.OUTCOMES, QUICK)
    with S.serving(work, config, state, concurrency=1) as srv:
        base = [timed_probe(srv) for _ in range(3)]
        tap.ok(all(o == YES for o, _ in base), "control: a valid probe answers alone", base)
        alone = sorted(t for _, t in base)[1]

        stop = threading.Event()
        silent = [connect(srv.socket) for _ in range(20)]
        slow = [connect(srv.socket) for _ in range(20)]
        drips = [threading.Thread(target=drip, args=(s, frame, 2.0, stop), daemon=True) for s in slow]
        for th in drips:
            th.start()
        time.sleep(0.5)
        t_open = time.monotonic()
        out, took = timed_probe(srv)
        tap.ok(out == YES and took - alone < 5.0,
               "at --concurrency 1, 20 silent and 20 one-byte-every-2-s connections delay a valid probe by less "
               "than 5 s (it answers, off the slots)",
               f"{out!r}: {took:.2f} s against {alone:.2f} s alone")

        # Each of the 40 gets ERROR at the frame deadline, and is audited.
        replies = [reply(s) for s in silent + slow]
        waited = time.monotonic() - t_open
        stop.set()
        tap.ok(all(r == S.ERROR_FRAME for r in replies) and waited < READ_SECONDS + 5,
               f"every silent and slow connection gets exactly ERROR within the {READ_SECONDS} s frame deadline",
               f"{waited:.1f} s: {set(replies)}")
        for s in silent + slow:
            s.close()
        time.sleep(0.3)
        late = [rec for rec in S.audit_lines(state, srv.run)
                if rec["reason"] == f"frame: the request did not arrive within {READ_SECONDS} s"]
        tap.ok(len(late) == 40 and all(rec["status"] == "refused" and not rec["launched"] and not rec["debited"]
                                       for rec in late),
               "each is audited refused, not debited, not launched, with the deadline as its reason", len(late))

        # A whole request sent slowly, but within the deadline, is served.
        s = connect(srv.socket)
        body_at = len(frame) - 40
        s.sendall(frame[:body_at])
        stop2 = threading.Event()
        th = threading.Thread(target=drip, args=(s, frame[body_at:], 0.05, stop2), daemon=True)
        th.start()
        got = reply(s)
        s.close()
        tap.ok(got == ANSWER_1, "a valid request trickled in within the deadline is answered", got)

        # Beyond SP_SERVE_UNREAD_MAX unread connections: ERROR at once.
        held = [connect(srv.socket) for _ in range(UNREAD_MAX)]
        time.sleep(0.5)
        extra = connect(srv.socket)
        t0 = time.monotonic()
        got = reply(extra)
        took = time.monotonic() - t0
        extra.close()
        tap.ok(got == S.ERROR_FRAME and took < 3,
               f"connection {UNREAD_MAX + 1} while {UNREAD_MAX} are unread gets ERROR at once", (got, took))
        for h in held:
            h.close()
        time.sleep(0.5)
        refused = [rec for rec in S.audit_lines(state, srv.run) if "still sending" in (rec["reason"] or "")]
        tap.ok(len(refused) == 1 and refused[0]["status"] == "refused",
               "it is audited refused, naming the bound", refused)
        out, took = timed_probe(srv)
        tap.ok(out == YES, "afterwards a valid probe answers", (out, took))
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
finally:
    work.close()
tap.finish()
