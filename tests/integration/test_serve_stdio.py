"""A probe's stdin, stdout and stderr are /dev/null itself (docs/runtimes.md):
what it writes reaches no host process.  A probe floods both outputs while
the test looks at its fds 0-2 from the host, and at every runtime process
still alive (none may be relaying, and none may be spending CPU on it)."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, require_root_and  # noqa: E402

require_root_and("runc", "git")
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


def runtime_processes():
    """{pid: (cmdline, cpu ticks)} of every runc process alive."""
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
        if argv and os.path.basename(argv[0]).startswith(b"runc"):
            found[int(pid)] = (b" ".join(argv)[:120], int(fields[11]) + int(fields[12]))
    return found


def probe_pid(base, count):
    return next((pid for pid, (_, cmd) in S.probe_processes(base, count).items() if b"probe.py" in cmd), None)


try:
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"], timeout=30)
    state = work.staged_state(config, [("acme/app", clone)])
    with S.serving(work, config, state) as srv:
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", srv.probe(FLOOD, "acme/app")))
        t.start()
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
        tap.ok(pid is not None and fds == {0: "/dev/null", 1: "/dev/null", 2: "/dev/null"},
               "while it floods, the probe's fds 0, 1 and 2 are /dev/null itself, not pipes to a host process", fds)
        busy = {p: (before[p][0], after[p][1] - before[p][1]) for p in before if p in after
                and after[p][1] - before[p][1] > 10}
        tap.ok(not busy, "no runtime process spends CPU while the probe floods (nothing relays its output)",
               {"busy": busy, "alive": before})
        tap.ok(result.get("r") == YES, "the flooding probe still answers", result)
        with open(os.path.join(state, "audit", "audit.jsonl"), "rb") as f:
            audit = f.read()
        tap.ok(b"FLOOD-STDIO-CANARY" not in audit and b"FLOOD-STDIO-CANARY" not in open(srv.stderr_path, "rb").read(),
               "the flood reaches neither the audit log nor serve's output")
finally:
    work.close()
tap.finish()
