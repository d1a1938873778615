"""A wait the Docker daemon answers with something that cannot be read is the
runtime's failure, audited `runtime`, never `timed_out` (issue 25, item 7;
docs/audit.md, "status"): `timed_out` only when the probe's timeout fired,
and `environment` only when the daemon cannot be reached.

serve talks to the project's dockerd (SP_DOCKER_SOCKET) through the logging
forwarding proxy of sp_fake_docker.py (--forward), which passes the first
wait (the canary's) through untouched and answers every later one with a
malformed answer of one kind (--wait-answer KIND), sent once the daemon's own
answer came, so that the probe has run its course:

    deep           a JSON array 100,000 levels deep     "nesting deeper than"
    bad-utf8       invalid UTF-8 in a JSON string       "invalid UTF-8"
    not-json       an HTML page                         "invalid JSON" or "outside a string"
    huge           5 MiB of valid JSON (over the 4 MiB  "is over 4194304 bytes"
                   the client reads)
    status-500     Docker's error form, status 500,     "status 500"
                   the token in its "message"
    dropped        cut short of its Content-Length      "partial file"
    dropped-early  no answer at all, the connection     "returned nothing"
                   closed at once, the probe running
    dup-key        a JSON object whose key (the token)  "duplicate key"
                   is there twice
    bad-after-key  a bad value after a key (the token)  "invalid JSON"
    unreachable    nothing answers the wait at all: the "could not be reached"
                   proxy moves its socket away once the
                   probe's start is answered (back 5 s
                   later); audited `environment`; serve
                   runs with --pool 0, so that the start
                   is at the request, not ahead of it
    gone           dropped-early, and the socket moved  "could not be reached", "no
                   away at once (back 5 s later): the   longer answers" or "does not
                   daemon went away during the wait;    answer"
                   audited `environment`, as at create
                   and start

Each malformed answer holds a token of its own.  For each kind, one serve
(its own proxy) and one probe that sleeps 0.5 s and then answers YES: the
agent gets the canonical ERROR line; the audit result record is status
`runtime` and cause `runtime` (unreachable and gone: `environment` and
`environment`), launched, `timed_out` false, with a reason that names the
wait of the probe's container and the answer's problem; its wall_ms is under
a third of the config's 60 s timeout (and, for the kinds answered after the
daemon's own answer, at least the probe's 0.5 s); the token is nowhere, in
no form a reason could quote it (the daemon's "message", a key, a JSON
path): not in the audit log, serve's stdout or stderr, nor the client's
output; the proxy's log shows that the canary's wait passed and the probe's
was answered with the kind; and nothing of the run is left: the probe's
container answers 404 at the daemon while serve runs (unreachable, gone:
once the socket is back and serve stopped), and after serve's SIGTERM
nothing of the run is left (S.leaks: containers by the state's label,
cgroups, mounts, work directories).

Two controls pass every answer through: `ok`, where the same probe is
`answered` YES, cause `none`; and `timeout`, where a probe that sleeps past
a 3 s timeout is `timed_out`, cause `timeout`, `timed_out` true, its wall_ms
at least the timeout, its container killed: the timeout is still told as
one.

Registered once (not in the backend matrix), only when tests/meson.build's
sp_backends has docker, with SP_BACKEND=docker: sp_harness.backend() SKIPs
the file, saying why, when docker is not selected by SP_BACKENDS or the
project's dockerd does not answer at SP_DOCKER_SOCKET, and fails it (Bail
out!) under CI=true."""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, docker_api, require_root_and  # noqa: E402

require_root_and("git")
import sp_serve as S  # noqa: E402  (sp_harness.backend(): SKIP or Bail out! without the daemon)
from sp_fake_docker import ForwardingProxy  # noqa: E402

B = S.B
if not B.docker:
    from sp_harness import bail_out  # noqa: E402
    bail_out(f"SP_BACKEND={B.name}: this file is docker's alone (tests/meson.build runs it with SP_BACKEND=docker)")

TIMEOUT = 60
SLEEP = 0.5
SCRIPT = f"import time\ntime.sleep({SLEEP})\n" + S.answer_script("YES")
# The timeout control: a probe that outlives a short timeout, every answer
# passed through.
SHORT_TIMEOUT = 3
SLEEPER = "import time\ntime.sleep(120)\n" + S.answer_script("YES")
# kind: (what the reason must name of the answer's problem, any of these;
#        whether the daemon's own answer came first, so the probe ran its course;
#        the audit's status and cause).
KINDS = {
    "deep": (["nesting deeper than"], True, "runtime"),
    "bad-utf8": (["invalid UTF-8"], True, "runtime"),
    "not-json": (["invalid JSON", "outside a string"], True, "runtime"),
    "huge": (["is over 4194304 bytes"], True, "runtime"),
    "status-500": (["status 500"], True, "runtime"),
    "dropped": (["partial file"], True, "runtime"),
    "dropped-early": (["returned nothing"], False, "runtime"),
    "dup-key": (["duplicate key"], True, "runtime"),
    "bad-after-key": (["invalid JSON"], True, "runtime"),
    "unreachable": (["could not be reached"], False, "environment"),
    "gone": (["could not be reached", "no longer answers", "does not answer"], False, "environment"),
}
# unreachable, gone: how long the proxy's socket stays away.
AWAY = 5
RUN_TOKEN = os.urandom(5).hex()


def token(kind):
    return f"SP-WAIT-ANSWER-{kind}-{RUN_TOKEN}"


tap = Tap()
work = S.Work("sp-docker-wait-answers-")


def probe_wait(logged, container_id):
    """The proxy's log of the probe's container's first wait."""
    return next((q for q in logged if q["method"] == "POST"
                 and q["path"] == f"/v1.41/containers/{container_id}/wait"), None)


def container_ids(logged):
    """{name: id} of every container created through the proxy."""
    out = {}
    for q in logged:
        if q["method"] == "POST" and q["path"] == "/v1.41/containers/create":
            name = (q["query"].get("name") or [None])[0]
            out[name] = (q.get("response_json") or {}).get("Id")
    return out


def run_kind(kind, staged_config, config, clone):
    tok = token(kind)
    proxy_dir = tempfile.mkdtemp(prefix="sp-dwa-")  # short: sun_path holds 107 bytes
    proxy = ForwardingProxy(os.path.join(proxy_dir, "docker.sock"), B.socket, os.path.join(proxy_dir, "log.jsonl"),
                            wait_answer="ok" if kind == "timeout" else kind, wait_answer_after=1,
                            wait_answer_token=tok, wait_answer_away=AWAY)
    state = None
    try:
        proxy.start()
        state = work.staged_state(staged_config, [("acme/one", clone)])
        # unreachable moves the socket away once the probe's start is
        # answered: with a pool that start is the waiting container's, at its
        # create, before any request (its interpreter is started ahead), so
        # this kind starts its probe at the request (--pool 0).
        extra = ["--pool", "0"] if kind == "unreachable" else []
        with S.serving(work, config, state, binary=proxy.socket, extra=extra) as srv:
            t0 = time.monotonic()
            r = srv.client(SLEEPER if kind == "timeout" else SCRIPT, "acme/one", timeout=120)
            elapsed = time.monotonic() - t0
            run = srv.run
            records = S.audit_lines(state, run)
            rec = records[-1] if records else {}
            name = f"sp-{run}-{rec.get('sandbox')}"
            cid = container_ids(proxy.requests()).get(name)
            removed, during = None, None
            if kind in ("unreachable", "gone"):
                # The socket comes back; the container serve could not remove
                # is the run's removal's, at the stop.
                back = S.wait_for(lambda: "back" in [e["event"] for e in proxy.events()], timeout=AWAY + 30)
            elif cid:
                removed = S.wait_for(lambda: docker_api("GET", f"/containers/{cid}/json")[0] == 404, timeout=10)
                during = S.leaks(state, run, serve_pid=srv.pid)
            rc = srv.stop(timeout=60)
            if kind in ("unreachable", "gone") and cid:
                removed = bool(back) and docker_api("GET", f"/containers/{cid}/json")[0] == 404
            serve_out = srv.stdout() + srv.stderr()
            left = S.leaks(state, run, after_exit=True, srv=srv)
        logged = proxy.requests()
        events = proxy.events()
        audit = S.audit_raw(state)
    finally:
        proxy_rc = proxy.stop()
        proxy_err = proxy.stderr()
        if state:
            B.force_delete_state(state)
        shutil.rmtree(proxy_dir, ignore_errors=True)

    print(f"# {kind}: the reason: {rec.get('reason')}", flush=True)
    out = r.stdout.decode("utf-8", "replace")
    client_err = r.stderr.decode("utf-8", "replace")
    reason = rec.get("reason") or ""
    waits = [q for q in logged if q["method"] == "POST" and q["path"].endswith("/wait")]
    mine = probe_wait(logged, cid) if cid else None
    canary_waits = [q for q in waits if q["path"] != (mine or {}).get("path")]
    if kind == "ok":
        tap.ok(out == S.answer("YES") and r.returncode == 0 and client_err == "",
               "ok (control): the agent gets YES", (r.returncode, out, client_err))
        tap.ok(len(records) == 1 and rec.get("status") == "answered" and rec.get("cause") == "none"
               and rec.get("timed_out") is False and rec.get("reason") is None,
               "ok (control): audited answered, cause none, not timed out", records)
        tap.ok(mine is not None and mine.get("status") == 200 and "wait_answer" not in mine
               and all("wait_answer" not in q for q in waits),
               "ok (control): every wait passed through the proxy untouched", waits)
    elif kind == "timeout":
        wall = rec.get("wall_ms")
        kills = [q for q in logged if q["method"] == "POST" and q["path"] == f"/v1.41/containers/{cid}/kill"]
        tap.ok(out == S.ERROR_LINE and r.returncode == 0 and client_err == "",
               "timeout (control): the agent gets the canonical ERROR line", (r.returncode, out, client_err))
        tap.ok(len(records) == 1 and rec.get("status") == "timed_out" and rec.get("cause") == "timeout"
               and rec.get("timed_out") is True and f"past the {SHORT_TIMEOUT} s timeout" in reason
               and isinstance(wall, int) and SHORT_TIMEOUT * 1000 <= wall < TIMEOUT * 1000,
               f"timeout (control): a probe past the {SHORT_TIMEOUT} s timeout is audited timed_out, cause timeout, "
               "timed_out true, its wall_ms the timeout's", records)
        tap.ok(mine is not None and all("wait_answer" not in q for q in waits) and len(kills) == 1,
               "timeout (control): every wait passed through the proxy untouched; the probe's container was killed",
               (waits, kills))
    else:
        needles, after_daemon, status = KINDS[kind]
        tap.ok(out == S.ERROR_LINE and r.returncode == 0 and client_err == "",
               f"{kind}: the agent gets the canonical ERROR line", (r.returncode, out, client_err))
        tap.ok(len(records) == 1 and rec.get("status") == status and rec.get("cause") == status
               and rec.get("launched") is True and rec.get("timed_out") is False and rec.get("result") == "ERROR",
               f"{kind}: audited status {status}, cause {status}, launched, timed_out false", records)
        tap.ok(cid is not None and "wait" in reason and name in reason and f"/v1.41/containers/{cid}/wait" in reason
               and any(n in reason for n in needles),
               f"{kind}: the reason names the wait of the probe's container and the answer's problem "
               f"({' or '.join(repr(n) for n in needles)})", reason)
        wall = rec.get("wall_ms")
        tap.ok(isinstance(wall, int) and wall < TIMEOUT * 1000 // 3 and (not after_daemon or wall >= SLEEP * 1000)
               and elapsed < TIMEOUT,
               f"{kind}: wall_ms well under the {TIMEOUT} s timeout"
               + (f" (and at least the probe's {SLEEP} s: the daemon's answer came first)" if after_daemon else ""),
               f"wall_ms {wall}, the client waited {elapsed:.1f} s")
        canary_passed = len(canary_waits) >= 1 and "wait_answer" not in canary_waits[0] \
            and canary_waits[0].get("status") == 200
        if kind == "unreachable":
            start = next((q for q in logged if q["method"] == "POST"
                          and q["path"] == f"/v1.41/containers/{cid}/start"), None)
            away = [e.get("seq") for e in events if e["event"] == "away"]
            tap.ok(canary_passed and mine is None and start is not None and start.get("status") == 204
                   and away == [start["seq"]],
                   f"{kind}: the proxy passed the canary's wait through, answered the probe's start, then moved its "
                   "socket away: the probe's wait never reached it", (waits, start, events))
        else:
            away = [e.get("seq") for e in events if e["event"] == "away"]
            tap.ok(canary_passed and mine is not None and mine.get("wait_answer") == kind
                   and (mine.get("upstream_status") == 200 if after_daemon else mine.get("upstream_status") is None)
                   and away == ([mine["seq"]] if kind == "gone" else []),
                   f"{kind}: the proxy passed the canary's wait through and answered the probe's with {kind}"
                   + (", then moved its socket away" if kind == "gone" else ""), (waits, events))
        places = {"the audit log": tok.encode() in audit, "serve's output": tok in serve_out,
                  "the client's output": tok in out + client_err, "the reason": tok in reason}
        tap.ok(not any(places.values()), f"{kind}: the answer's token is nowhere: audit log, serve's output, "
               "the client's output", [p for p, found in places.items() if found])
        paths = [p for p in (proxy_dir, os.path.realpath(B.socket)) if p.encode() in audit or p in serve_out]
        tap.ok(not paths, f"{kind}: no socket's path in the audit log or serve's output", paths)
    if kind in ("unreachable", "gone"):
        tap.ok(removed is True, f"{kind}: the probe's container is gone from the daemon once the socket is back and "
               "serve stopped", (name, cid, removed))
    else:
        tap.ok(removed is True and during == [], f"{kind}: the probe's container is gone from the daemon, and "
               "nothing of the probe is left while serve runs", (name, cid, removed, during))
    tap.ok(rc == 0 and left == [], f"{kind}: serve stops cleanly and nothing of the run is left", (rc, left))
    tap.ok(proxy_rc == 0 and proxy_err == "", f"{kind}: the proxy stops cleanly and printed nothing",
           (proxy_rc, proxy_err[-800:]))


try:
    clone = work.make_clone("one", {"README.md": b"wait answers\n"})
    staged_config = work.write_config(["acme/one"])
    config = work.write_config(["acme/one"], timeout=TIMEOUT, maxInvocations=50)
    short = work.write_config(["acme/one"], timeout=SHORT_TIMEOUT, maxInvocations=50)
    for kind in ["ok", "timeout"] + list(KINDS):
        try:
            run_kind(kind, staged_config, short if kind == "timeout" else config, clone)
        except Exception as e:  # one kind's failure is named, and the others still run
            tap.ok(False, f"{kind}: the run completes", f"{type(e).__name__}: {e}")
finally:
    work.close()
tap.finish()
