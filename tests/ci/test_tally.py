"""scripts/tally, which CI's last line comes from: it sums TAP results over
meson builds, counts a test that failed without a `not ok` line as one
failure, and under each failure prints why (the `not ok` lines with their
diagnostics, or the end of the test's stderr), since CI's record keeps only
the log's tail."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap  # noqa: E402

TALLY = os.environ["SP_TALLY"]


def build(root, name, tests):
    logs = os.path.join(root, name, "meson-logs")
    os.makedirs(logs)
    with open(os.path.join(logs, "testlog.json"), "w") as f:
        for test in tests:
            f.write(json.dumps(test) + "\n")
    return os.path.join(root, name)


def tally(*builds):
    run = subprocess.run([sys.executable, TALLY, *builds], capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout.splitlines()


tap = Tap()
with tempfile.TemporaryDirectory() as root:
    clean = build(root, "clean", [
        {"name": "s / a", "result": "OK", "stdout": "ok 1 - one\nok 2 - two\nok 3 - three # SKIP no premise\n"},
        {"name": "s / b", "result": "SKIP", "stdout": "1..0 # SKIP backend missing\n"},
    ])
    rc, out = tally(clean)
    tap.ok(rc == 0 and out[-1] == "2 passed, 0 failed, 2 skipped", "a clean build sums to its counts and exits 0",
           (rc, out))
    tap.ok(not any("FAILED" in line for line in out), "a clean build names no failure", out)

    failing = build(root, "failing", [
        {"name": "s / control", "result": "FAIL",
         "stdout": "ok 1 - one\nnot ok 2 - the control held\n# 10050\nok 3 - three\n"},
        {"name": "s / crash", "result": "ERROR", "stdout": "ok 1 - one\n",
         "stderr": "".join(f"noise {i}\n" for i in range(30)) + "Traceback\nKeyError: 'x'\n"},
        {"name": "s / timeout", "result": "TIMEOUT", "stdout": "ok 1 - one\nok 2 - two\n"},
    ])
    rc, out = tally(clean, failing)
    tap.ok(rc == 1 and out[-1] == "7 passed, 3 failed, 2 skipped",
           "failures are summed over builds, a crash or timeout counting as one, and the exit is 1", (rc, out))
    text = "\n".join(out)
    tap.ok("tally: FAILED " + failing + ": s / control\ntally:   not ok 2 - the control held\ntally:   # 10050\n"
           in text + "\n", "a failed check is printed with its diagnostic under the test's name", out)
    tap.ok("ok 3 - three" not in text, "the passing lines after a failure are not printed", out)
    tap.ok("tally:   KeyError: 'x'" in text and "tally:   result ERROR; its stderr ends:" in text,
           "a test that failed without a `not ok` line shows the end of its stderr", out)
    tap.ok(sum(line.startswith("tally:   ") for line in out if "noise" in line) < 12,
           "a long stderr is cut to its last lines", out)
    tap.ok("tally:   result TIMEOUT; its stdout ends:" in text,
           "a test that left no stderr shows the end of its stdout", out)
    tap.ok(all(not line[0].isdigit() for line in out[:-1]), "the sum is the only line that starts with a count",
           out)

    rc, out = tally(os.path.join(root, "never-built"))
    tap.ok(rc == 1 and out[-1] == "0 passed, 1 failed, 0 skipped", "a build with no test log counts as a failure",
           (rc, out))

    empty = build(root, "empty", [])
    rc, out = tally(empty)
    tap.ok(rc == 1 and out[-1] == "0 passed, 0 failed, 0 skipped", "nothing run exits 1: CI never goes green on nothing",
           (rc, out))
tap.finish()
