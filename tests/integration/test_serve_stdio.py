"""A probe's stdin, stdout and stderr are /dev/null itself (docs/runtimes.md):
what it writes reaches no host process.  A probe floods both outputs while
the test looks at its fds 0-2 from the host, and at every runtime process
still alive (none may be relaying, and none may be spending CPU on it).

Under gVisor the probe has no host process of its own: it runs inside the
sandbox process (runsc-sandbox, the sentry), whose fds 0-2 are the probe's
stdio; those are looked at instead, and the sandbox itself, which does the
probe's writes within the sandbox's own limits, is not counted as a relay."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, require_root_and  # noqa: E402

B = backend()
require_root_and("git")
import sp_serve as S  # noqa: E402

tap = Tap()
work = S.Work("sp-serve-stdio-")
YES = S.answer("YES")

# Floods stdout and stderr for about 3 s, then answers.
FLOOD = """import json, os, sys, time
block = b"FLOOD-STDIO-CANARY " * 4096
end = time.monotonic() + 3
written = 0
while time.monotonic() < end:
    for fd in (1, 2):
        written += os.write(fd, block)
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if written > 0 else "NO"}, f)
"""


def relay_candidate(argv0):
    """A runtime process that could relay a probe's output: every runc
    process; under gVisor every runsc process but the sandbox (the sentry
    runs the probe itself)."""
    name = os.path.basename(argv0)
    if B.gvisor:
        return name.startswith(b"runsc") and name != b"runsc-sandbox"
    return name.startswith(b"runc")


def runtime_processes():
    """{pid: (cmdline, cpu ticks)} of every runtime process alive that could
    relay (relay_candidate)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if argv and relay_candidate(argv[0]):
            found[int(pid)] = (b" ".join(argv)[:120], int(fields[11]) + int(fields[12]))
    return found


def probe_pid(base, count):
    return next((pid for pid, (_, cmd) in S.probe_processes(base, count).items() if b"probe.py" in cmd), None)


def sandbox_pid(state):
    """Under gVisor: the one running sandbox process of this state directory."""
    pids = [p["sandbox"] for p in S.gvisor_sandboxes(state).values() if "sandbox" in p]
    return pids[0] if len(pids) == 1 else None


try:
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"], timeout=30)
    state = work.staged_state(config, [("acme/app", clone)])
    with S.serving(work, config, state) as srv:
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", srv.probe(FLOOD, "acme/app")))
        t.start()
        if B.gvisor:
            pid = S.wait_for(lambda: sandbox_pid(state), timeout=30)
        else:
            pid = S.wait_for(lambda: probe_pid(srv.probe_id_base, 4), timeout=30)
        fds = {}
        if pid:
            for fd in (0, 1, 2):
                try:
                    fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError as e:
                    fds[fd] = str(e)
        before = runtime_processes()
        S.wait_for(lambda: False, timeout=1.5)
        after = runtime_processes()
        t.join(timeout=60)
        null_fds = pid is not None and fds == {0: "/dev/null", 1: "/dev/null", 2: "/dev/null"}
        if B.gvisor:
            B.not_applicable(tap, "while it floods, the probe's fds 0, 1 and 2 are /dev/null itself, not pipes to a "
                             "host process", "the probe has no host process; it runs inside runsc-sandbox, whose "
                             "fds are checked next")
            tap.ok(null_fds, "gvisor: while it floods, the sandbox's fds 0, 1 and 2 (the probe's stdio, written by "
                             "the sentry) are /dev/null itself, not pipes to a host process", fds)
        else:
            tap.ok(null_fds, "while it floods, the probe's fds 0, 1 and 2 are /dev/null itself, not pipes to a host "
                             "process", fds)
        busy = {p: (before[p][0], after[p][1] - before[p][1]) for p in before if p in after
                and after[p][1] - before[p][1] > 10}
        tap.ok(not busy, "no runtime process spends CPU while the probe floods (nothing relays its output)"
               + (" (runsc and its gofer; the sandbox is the probe)" if B.gvisor else ""),
               {"busy": busy, "alive": before})
        tap.ok(result.get("r") == YES, "the flooding probe still answers", result)
        with open(os.path.join(state, "audit", "audit.jsonl"), "rb") as f:
            audit = f.read()
        tap.ok(b"FLOOD-STDIO-CANARY" not in audit and b"FLOOD-STDIO-CANARY" not in open(srv.stderr_path, "rb").read(),
               "the flood reaches neither the audit log nor serve's output")
finally:
    work.close()
tap.finish()
