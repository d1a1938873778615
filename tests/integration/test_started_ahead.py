"""Interpreters started ahead (docs/runtimes.md, "Interpreters started
ahead"): where the backend can (starts_ahead: runc, gVisor, Docker), a sandbox of
the pool runs its interpreter before its request, waiting for a signal only
serve gives.  One check per rule, on every backend:
- the script runs as a fresh `python3 -I -S -B /probe/probe.py` would: the
  probe compares its own sys facts with those of such a fresh interpreter
  it starts itself, in the same sandbox, and the one listed difference (a
  frame below the script's, the waiter's) is the only one; a cold sandbox
  has none, and a backend that does not start ahead runs its pool cold;
- the interpreter waited: a sandbox that waited longer than the timeout
  still runs its request, and its interpreter was started before it;
- the timeout counts from the signal, so does the audit's wall time, and
  the CPU the interpreter spent before it is not the probe's;
- a waiting interpreter holds nothing of a request: the pool's own checks
  (test_pool.py: probe.py and out empty, no canary in any file) and its
  stop and kill -9 checks run with these sandboxes on runc, gVisor and
  Docker."""

import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, require_root_and  # noqa: E402

B = backend()
require_root_and("git")
import sp_serve as S  # noqa: E402

tap = Tap()
work = S.Work("sp-ahead-")
AHEAD = B.starts_ahead
# The pool serve's timeout comes from the trivial probe's round trip
# measured first, so that a probe of SLEEP_S fits in it on a loaded host.
SLEEP_S = 1.0

# The probe's facts, taken before it imports anything, against a fresh
# interpreter's, which the same script gives when it finds /tmp/.sp-child.
# Its stdin is what the probe's is (an empty pipe at its end under runc,
# gVisor and Docker, /dev/null under sbx; STDIN below checks that a pool
# sandbox's is the cold one's) and its stdout and stderr /dev/null, as the
# sandbox's are.  The answer says whether the two agree, and whether this
# interpreter was the one started ahead (its command line is the waiter's).
FACTS = r'''import sys
MODULES = sorted(sys.modules)
NAMES = [(k, type(v).__name__) for k, v in globals().items()]
import json
WITH_JSON = sorted(sys.modules)
import os, subprocess


def depth():
    f, n = sys._getframe(), 0
    while f:
        n, f = n + 1, f.f_back
    return n - 1


def facts():
    return {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "flags": repr(sys.flags),
        "modules": MODULES, "with_json": WITH_JSON, "names": NAMES, "file": __file__, "cached": __cached__,
        "spec": repr(__spec__), "loader": [type(__loader__).__name__, __loader__.name, __loader__.path],
        "stdio": [[os.fstat(fd).st_mode >> 12, os.isatty(fd)] for fd in (0, 1, 2)],
        "stdin": [sys.stdin.seekable(), sys.stdin.read()], "cwd": os.getcwd(), "env": dict(os.environ),
        "executable": sys.executable, "prefix": sys.prefix, "xoptions": sys._xoptions,
        "warnoptions": sys.warnoptions, "depth": depth(),
    }


if os.path.exists("/tmp/.sp-child"):
    with open("/tmp/.sp-child", "w") as f:
        json.dump(facts(), f)
    sys.exit(0)
mine = json.loads(json.dumps(facts()))  # as the fresh one's come back: lists, not tuples
open("/tmp/.sp-child", "w").close()
fifo = os.fstat(0).st_mode >> 12 == 1
subprocess.run(["/usr/bin/python3", "-I", "-S", "-B", "/probe/probe.py"], input=b"" if fifo else None,
               stdin=None if fifo else subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd="/probe/repo",
               env={"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/tmp"})
with open("/tmp/.sp-child") as f:
    fresh = json.load(f)
ahead = b"-c" in open("/proc/self/cmdline", "rb").read().split(b"\0")
differ = sorted(k for k in fresh if fresh[k] != mine[k])
if differ == [] and not ahead:
    answer = "SAME-COLD"
elif (differ == ["depth", "modules"] and ahead and mine["depth"] == fresh["depth"] + 1
        and mine["modules"] == fresh["with_json"] != fresh["modules"]):
    answer = "SAME-AHEAD"
else:
    answer = "DIFFERENT"
open("/probe/out", "w").write(json.dumps({"result": answer}))
'''
FACT_OUTCOMES = ("SAME-COLD", "SAME-AHEAD", "DIFFERENT")

# How old this interpreter is, against how long ago the client sent it:
# OLDER when it was started at least a second before (it waited), else YOUNGER.
AGE = r'''import json, os, time
ticks = os.sysconf("SC_CLK_TCK")
start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
age = time.clock_gettime(time.CLOCK_BOOTTIME) - start
open("/probe/out", "w").write(json.dumps({"result": "OLDER" if age > %f else "YOUNGER"}))
'''
AGE_OUTCOMES = ("OLDER", "YOUNGER", "UNSURE")

# What the probe's stdin is, before anything reads it.
STDIN = r'''import json, os, stat, sys
st = os.fstat(0)
kind = "PIPE" if stat.S_ISFIFO(st.st_mode) else "NULL" if stat.S_ISCHR(st.st_mode) else "OTHER"
empty = os.read(0, 1) == b""
open("/probe/out", "w").write(json.dumps({"result": kind if empty and not sys.stdin.isatty() else "OTHER"}))
'''
STDIN_OUTCOMES = ("PIPE", "NULL", "OTHER")

SLEEP = "import json, time\ntime.sleep(%s)\nopen('/probe/out', 'w').write(json.dumps({'result': 'WOKE'}))\n"
SLEEP_OUTCOMES = ("WOKE", "NO", "MAYBE")
TRIVIAL = "open('/probe/out', 'w').write('{\"result\": \"YES\"}')\n"
TRIVIAL_OUTCOMES = ("YES", "NO", "MAYBE")


def last_result(srv):
    recs = [r for r in S.audit_lines(srv.state, srv.run) if r.get("status") != "admitted"]
    return recs[-1] if recs else {}


try:
    clone = work.make_clone("one", {"README": b"one\n"})
    config = work.write_config(["acme/one"], timeout=120)
    state = work.staged_state(config, [("acme/one", clone)])

    # ---- the same facts as a fresh interpreter
    with S.serving(work, config, state, extra=["--pool", "0"]) as srv:
        cold = srv.probe(FACTS, "acme/one", FACT_OUTCOMES)
        cold_stdin = srv.probe(STDIN, "acme/one", STDIN_OUTCOMES)
        cold_cpu, trips = [], []
        for _ in range(3):
            t0 = time.monotonic()
            srv.probe(TRIVIAL, "acme/one", TRIVIAL_OUTCOMES)
            trips.append(time.monotonic() - t0)
            cold_cpu.append(last_result(srv).get("cpu_ms"))
    tap.ok(cold == S.answer("SAME-COLD"),
           "a cold sandbox runs the script exactly as a fresh interpreter beside it does", cold)
    TIMEOUT = max(3, math.ceil(SLEEP_S + 4 * max(trips)))
    print(f"# trivial probe round trips {[round(t, 2) for t in trips]} s: timeout {TIMEOUT} s")
    config = work.write_config(["acme/one"], timeout=TIMEOUT)

    with S.serving(work, config, state, extra=["--pool", "1"]) as srv:
        S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
        pooled = srv.probe(FACTS, "acme/one", FACT_OUTCOMES)
        want = "SAME-AHEAD" if AHEAD else "SAME-COLD"
        tap.ok(pooled == S.answer(want),
               f"a pool sandbox's script sees the same sys facts as a fresh interpreter's"
               f"{', but for the waiter frame below it and json already imported (exactly the modules a fresh one has after import json)' if AHEAD else ' (started cold: ' + B.name + ' does not start ahead)'}",
               pooled)

        S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
        pooled_stdin = srv.probe(STDIN, "acme/one", STDIN_OUTCOMES)
        tap.ok(pooled_stdin == cold_stdin and "OTHER" not in pooled_stdin,
               "a pool sandbox's stdin is a cold one's: empty, at its end, of the same kind",
               (pooled_stdin, cold_stdin))

        # ---- it waited, and the timeout counts from the signal
        S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
        time.sleep(TIMEOUT + 1)
        waited = srv.probe(AGE % (TIMEOUT + 0.5), "acme/one", AGE_OUTCOMES)
        tap.ok(waited == S.answer("OLDER" if AHEAD else "YOUNGER"),
               f"the interpreter {'was started before its request and waited longer than the timeout' if AHEAD else 'started with its request'}",
               waited)

        S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
        time.sleep(TIMEOUT + 1)
        slept = srv.probe(SLEEP % SLEEP_S, "acme/one", SLEEP_OUTCOMES)
        rec = last_result(srv)
        # Where the sandbox starts at its request (sbx), wall_ms
        # holds that start too.
        tap.ok(slept == S.answer("WOKE") and not rec.get("timed_out")
               and (not AHEAD or rec.get("wall_ms", 1e9) < TIMEOUT * 1000),
               f"a probe of {SLEEP_S} s in a sandbox that waited {TIMEOUT + 1} s is answered: its "
               f"{TIMEOUT} s timeout{' and its wall time count' if AHEAD else ' counts'} from "
               f"{'the signal' if AHEAD else 'its start'}", (slept, rec.get("wall_ms")))

        S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
        t0 = time.monotonic()
        late = srv.probe(SLEEP % (TIMEOUT + 5), "acme/one", SLEEP_OUTCOMES)
        took = time.monotonic() - t0
        rec = last_result(srv)
        tap.ok(late == S.ERROR_LINE and rec.get("timed_out") is True and took >= TIMEOUT,
               f"a probe that outlives the timeout is killed no sooner than {TIMEOUT} s after its request",
               (late, rec.get("timed_out"), round(took, 2)))

        # ---- the CPU before the signal is not the probe's
        pooled_cpu = []
        for _ in range(3):
            S.wait_pool_full_n(srv, 1 if S.CREATES_AHEAD else 0)
            srv.probe(TRIVIAL, "acme/one", TRIVIAL_OUTCOMES)
            pooled_cpu.append(last_result(srv).get("cpu_ms"))
    if not B.reports_resource_facts:
        tap.skip("the audit's cpu_ms leaves out the interpreter's start", f"{B.name} reports no cpu_ms")
    elif not AHEAD:
        tap.skip("the audit's cpu_ms leaves out the interpreter's start", f"{B.name} does not start ahead")
    else:
        ok = all(isinstance(c, int) for c in cold_cpu + pooled_cpu) \
            and statistics.median(pooled_cpu) < statistics.median(cold_cpu)
        tap.ok(ok, "the audit's cpu_ms of a trivial probe leaves out the interpreter's start-up: less than a "
               "cold start's (medians of 3)", (pooled_cpu, cold_cpu))
finally:
    work.close()
tap.finish()
