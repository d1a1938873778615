"""One owner per state directory, and one run directory per instance
(docs/operations.md, "One owner per state directory", "Two instances on one
host").  Beside a live serve: `unstage`, a re-`stage` of the same name,
`check` and a second serve on the same state each refuse at once, naming
`serve` and its pid, and change nothing: the seed is as it was and the next
probe still gives the answer it gave before, audited with the same seed.
`status` names the holder while serve runs and nobody once it stopped.  Two
serves with their own state and run directories share nothing: each run
directory holds only its own state directory's workspaces and its own
probe-id locks.  On every backend."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-owner-")
YES = S.answer("YES")
# YES while the seed holds the marker the clone was staged with.
MARKER_PROBE = ("import json, os\n"
                "p = '/probe/repo/marker.txt'\n"
                "r = 'YES' if os.path.exists(p) and open(p).read() == 'first\\n' else 'NO'\n"
                "json.dump({'result': r}, open('/probe/out', 'w'))\n")
HELD = re.compile(r"is in use by `serve` \(pid (\d+)\)")


def run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def refused_by(r, srv):
    """The refusal names serve and its pid, in one line, with exit 1."""
    m = HELD.search(r.stderr)
    return r.returncode == 1 and m is not None and int(m.group(1)) == srv.pid and len(r.stderr.splitlines()) == 1


def status(state, json_out=False):
    return run([S.PROXY, "status", "--state", state] + (["--json"] if json_out else []))


def seeds_view(state):
    """The seed store as it is: staged.json's bytes, and every seed file."""
    with open(os.path.join(state, "staged.json"), "rb") as f:
        staged = f.read()
    return staged, S.tree_fingerprint(os.path.join(state, "seeds"))


try:
    alpha = work.make_clone("alpha", {"marker.txt": b"first\n"})
    config = work.write_config(["acme/alpha"], timeout=30, maxInvocations=1000)
    state = work.staged_state(config, [("acme/alpha", alpha)])

    r = status(state)
    tap.ok(r.returncode == 0 and r.stdout.startswith("owner ") and "none:" in r.stdout.splitlines()[0],
           "status: with nothing running, nobody holds the state directory", r.stdout + r.stderr)

    with S.serving(work, config, state) as srv:
        before = seeds_view(state)
        tap.ok(srv.probe(MARKER_PROBE, "acme/alpha") == YES, "live serve: the probe answers YES from the seed")

        r = run([S.PROXY, "unstage", "--state", state])
        tap.ok(refused_by(r, srv), "unstage beside a live serve refuses at once, naming serve and its pid",
               (r.returncode, r.stdout, r.stderr))
        # A re-stage of the same name, from a clone whose marker differs.
        work.git(alpha, "checkout", "-q", "-b", "other")
        with open(os.path.join(alpha, "marker.txt"), "w") as f:
            f.write("second\n")
        work.git(alpha, "commit", "-q", "-am", "second")
        t0 = time.monotonic()
        r = work.stage(state, config, [("acme/alpha", alpha)])
        tap.ok(refused_by(r, srv) and time.monotonic() - t0 < 30,
               "stage of the same name beside a live serve refuses at once, naming serve and its pid",
               (r.returncode, r.stdout, r.stderr))
        r = run([S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs,
                 "--probe-ids", S.probe_ids(), *B.serve_args()], timeout=300)
        tap.ok(refused_by(r, srv), "check beside a live serve refuses at once, naming serve and its pid",
               (r.returncode, r.stderr))
        second = S.Serve(work, config, state)
        try:
            ok = second.start(ready_timeout=60)
            tap.ok(not ok and second.returncode == 1 and HELD.search(second.stderr()) is not None
                   and str(srv.pid) in second.stderr(),
                   "a second serve on the same state refuses at once, naming the first and its pid",
                   (ok, second.returncode, second.stderr()[-400:]))
        finally:
            second.cleanup()
        tap.ok(seeds_view(state) == before, "none of them changed staged.json or any seed file")
        tap.ok(srv.probe(MARKER_PROBE, "acme/alpha") == YES,
               "the next probe still answers YES: it runs on the seed serve verified")
        recs = [rec for rec in S.audit_lines(state, srv.run) if rec["status"] == "answered"]
        tap.ok(len(recs) == 2 and len({rec["seed_digest"] for rec in recs}) == 1,
               "both answers are audited answered, from the same seed", recs)

        r = status(state)
        first = r.stdout.splitlines()[0] if r.stdout else ""
        tap.ok(r.returncode == 0 and first == f"owner         serve (pid {srv.pid}) holds this state directory now",
               "status beside a live serve names it and its pid", r.stdout + r.stderr)
        r = status(state, json_out=True)
        owner = json.loads(r.stdout).get("owner") if r.returncode == 0 else None
        tap.ok(owner == {"verb": "serve", "pid": srv.pid}, "status --json: owner is serve and its pid", r.stdout)
        tap.ok(srv.stop() == 0, "serve stops cleanly", srv.stderr()[-300:])

    r = status(state, json_out=True)
    tap.ok(r.returncode == 0 and json.loads(r.stdout)["owner"] is None,
           "status --json after the stop: nobody holds the state directory", r.stdout + r.stderr)
    r = run([S.PROXY, "unstage", "--state", state])
    tap.ok(r.returncode == 0, "unstage after the stop succeeds", r.stderr)

    # ---- two instances, each with its own state and run directory -----------
    beta = work.make_clone("beta", {"marker.txt": b"first\n"})
    state1 = work.staged_state(config, [("acme/alpha", beta)])
    state2 = work.staged_state(config, [("acme/alpha", beta)])
    rd1 = tempfile.mkdtemp(prefix="sp-rd1-", dir="/run")
    rd2 = tempfile.mkdtemp(prefix="sp-rd2-", dir="/run")
    os.chmod(rd1, 0o711)
    os.chmod(rd2, 0o711)
    key = (lambda st: "%x-%x" % (os.stat(st).st_dev, os.stat(st).st_ino))
    listing = (lambda d, sub: sorted(os.listdir(os.path.join(d, sub))) if os.path.isdir(os.path.join(d, sub)) else [])
    try:
        with S.serving(work, config, state1, extra=("--run-dir", rd1)) as s1, \
                S.serving(work, config, state2, extra=("--run-dir", rd2)) as s2:
            tap.ok(s1.probe(MARKER_PROBE, "acme/alpha") == YES and s2.probe(MARKER_PROBE, "acme/alpha") == YES,
                   "two instances: both answer")
            if B.workspaces_on_host:
                tap.ok(listing(rd1, "work") == [] and listing(rd2, "work") == [],
                       f"two instances: {B.name} keeps its workspaces under STATE, none in either run directory",
                       (listing(rd1, "work"), listing(rd2, "work")))
            else:
                tap.ok(listing(rd1, "work") == [key(state1)] and listing(rd2, "work") == [key(state2)],
                       "two instances: each run directory holds only its own state directory's workspaces",
                       (listing(rd1, "work"), listing(rd2, "work"), key(state1), key(state2)))
            ids1 = {int(n) for n in listing(rd1, "ids")}
            ids2 = {int(n) for n in listing(rd2, "ids")}
            tap.ok(ids1 and ids2 and not ids1 & ids2
                   and all(s1.probe_id_base <= i < s1.probe_id_base + 64 for i in ids1)
                   and all(s2.probe_id_base <= i < s2.probe_id_base + 64 for i in ids2),
                   "two instances: each holds its probe-id locks in its own run directory, in its own range",
                   (sorted(ids1)[:4], sorted(ids2)[:4]))
            stray = [k for k in (key(state1), key(state2))
                     if os.path.isdir("/run/sealed-probe/work") and k in os.listdir("/run/sealed-probe/work")]
            tap.ok(stray == [], "two instances: nothing of either is in the default /run/sealed-probe", stray)
            s1.stop()
            s2.stop()
        tap.ok(all(listing(d, sub) == [] for d in (rd1, rd2) for sub in ("work", "ids")),
               "two instances: once both stopped, neither run directory holds anything of theirs",
               [(d, sub, listing(d, sub)) for d in (rd1, rd2) for sub in ("work", "ids")])
    finally:
        for d in (rd1, rd2):
            subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)

    r = run([S.PROXY, "serve", "--config", config, "--run-dir", "relative/dir"])
    tap.ok(r.returncode == 2 and "--run-dir must be an absolute path" in r.stderr,
           "--run-dir: a relative path is a usage error naming it", r.stderr)
finally:
    work.close()
tap.finish()
