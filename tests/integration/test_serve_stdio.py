"""A probe's stdout and stderr are /dev/null itself, and its stdin /dev/null or,
under runc, gVisor and Docker, an empty pipe at its end whose other end no host
process holds (docs/runtimes.md): what it writes reaches no host process.  A probe floods both outputs while
the test looks at its fds 0-2 from the host, and at every runtime process of
its sandbox still alive (none may be relaying, and none may be spending CPU
on it); the look starts once the flood is seen, and the flood lasts until the
test, done looking, tells the probe to stop (SIGUSR1).

Under gVisor the probe has no host process of its own: it runs inside the
sandbox process (runsc-sandbox, the sentry), whose fds 0-2 are the probe's
stdio; those are looked at instead, and the sandbox itself, which does the
probe's writes within the sandbox's own limits, is not counted as a relay.

Under Docker the container runs a fixed wrapper that points fds 1 and 2 at
/dev/null before it execs the probe, and its fd 0 is the stdin serve's
attach held open and has closed (docs/runtimes.md), so the same line holds; the container's LogConfig is none and nothing the probe prints
reaches the daemon's disk (its data root, /var/lib/sealed-probe-test/docker,
and its logs).  The daemon's processes are shared (other tests, other
proxies), so their CPU is compared with a baseline: what dockerd,
containerd and the container's shim spend while the probe floods, against
what dockerd and containerd spent over as long a window just before the
probe started, with a margin of a quarter of the CPU the probe itself spent
flooding (the relay it replaced cost 3 to 4 times the probe's own).  The
baseline and the probe's CPU are printed."""

DOCKER_DATA_ROOT = "/var/lib/sealed-probe-test/docker"   # scripts/dockerd's
DOCKER_DAEMON_LOGS = ("/run/sealed-probe-test/dockerd.log", "/run/sealed-probe-test/containerd.log")

import contextlib
import glob
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, docker_api, docker_shims, docker_state_containers, serve_test  # noqa: E402

B, S = serve_test("nsenter")

tap = Tap()
work = S.Work("sp-serve-stdio-")
YES = S.answer("YES")

# Floods stdout and stderr until the test, done looking, sends it SIGUSR1,
# then answers YES (NO if it gave up after 20 s without the signal).  The
# flood lasts as long as the test's look however loaded the machine is.
FLOOD = """import json, os, signal, time
told = []
signal.signal(signal.SIGUSR1, lambda *_: told.append(1))
block = b"FLOOD-STDIO-CANARY " * 4096
end = time.monotonic() + 20
written = 0
while not told and time.monotonic() < end:
    for fd in (1, 2):
        written += os.write(fd, block)
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if written > 0 and told else "NO"}, f)
"""
# The look starts once the flood is seen (this much written by the probe's
# host process, or under gVisor by the sandbox), not at a time assumed: what
# the sandbox's processes spend starting up is not a relay.
FLOOD_SEEN = 8 << 20


def relay_candidate(argv0):
    """A runtime process that could relay a probe's output: every runc
    process; under gVisor every runsc process but the sandbox (the sentry
    runs the probe itself)."""
    name = os.path.basename(argv0)
    if B.runs_on_sentry:
        return name.startswith(b"runsc") and name != b"runsc-sandbox"
    if B.runtime_is_daemon:
        # The daemon's processes: its dockerd and containerd (their
        # pidfiles), every containerd shim and runc they start.
        return name.startswith((b"containerd", b"runc")) or name == b"dockerd"
    return name.startswith(b"runc")


def of_sandbox(argv, cid):
    """Whether a runtime process's argv names the probe's sandbox: its
    container id sp-RUN-NAME (for sbx the VM, sp-RUN-NAME.SUFFIX) or its
    bundle directory (RUN/NAME/bundle, as the gofer names it)."""
    run, name = cid.split("-", 2)[1:]
    bundle = f"/{run}/{name}/bundle".encode()
    return any(a == cid.encode() or a.startswith(cid.encode() + b".") or bundle in a for a in argv)


def runtime_processes(cid):
    """{pid: (cmdline, cpu ticks)} of every runtime process alive that could
    relay (relay_candidate) the output of the probe in sandbox cid.  Only its
    own: another sandbox's processes (a pool's refill being created, another
    test's) hold none of its stdio, and spend CPU of their own."""
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
        if argv and relay_candidate(argv[0]) and (B.runtime_is_daemon or of_sandbox(argv, cid)):
            found[int(pid)] = (b" ".join(argv)[:120], int(fields[11]) + int(fields[12]))
    return found


# How long the look lasts, and the noise floor of the daemon's ticks (a
# tick is 10 ms) that a margin never goes under.
WINDOW = 1.5
DOCKER_NOISE_TICKS = 5


def ticks(pid):
    """User and system CPU ticks pid has spent, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError, TypeError):
        return 0


def daemon_ticks(shim_pids):
    """CPU ticks of the daemon's dockerd and containerd, and of shim_pids."""
    total = sum(ticks(p) for p in shim_pids)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    name = os.path.basename(f.read().split(b"\0")[0])
                if name in (b"dockerd", b"containerd"):
                    total += ticks(pid)
    return total


def written(pid):
    """Bytes pid has passed to write(2) so far (/proc/PID/io), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("wchar:"))
    except (OSError, StopIteration, ValueError):
        return None


def probe_pid(base, count):
    """The flooding probe: of the probe ids' interpreters, the one that has
    written a MiB (one waiting in serve's pool has written only what its
    runc init did, about 2 KB)."""
    pids = [pid for pid, (_, cmd) in S.probe_processes(base, count).items() if b"probe.py" in cmd]
    writing = [pid for pid in pids if (written(pid) or 0) >= 1 << 20]
    return writing[0] if len(writing) == 1 else None


def descendants(pid):
    """pid and every process below it."""
    children = {}
    for other in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{other}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(other))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children.get(p, [])
    return found


def empty_stdin(link, pid):
    """Whether fd 0's link is /dev/null, or under runc, gVisor and Docker
    (whose probe's stdin is a pipe, docs/runtimes.md, "Interpreters started
    ahead") a pipe whose other end no process outside the sandbox holds."""
    if link == "/dev/null":
        return True
    if not (B.oci_cli or B.docker) or not link.startswith("pipe:"):
        return False
    inside = descendants(pid)
    for other in os.listdir("/proc"):
        if not other.isdigit() or int(other) in inside:
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{other}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{other}/fd/{fd}") == link:
                        return False
    return True


def sandbox_pid(state, cid):
    """Under gVisor: the sandbox process of the probe's sandbox cid (not of
    one waiting in serve's pool)."""
    run, name = cid.split("-", 2)[1:]
    pids = [p["sandbox"] for bundle, p in S.gvisor_sandboxes(state).items()
            if bundle.endswith(f"/{run}/{name}/bundle") and "sandbox" in p]
    return pids[0] if len(pids) == 1 else None


def docker_while_running(state, pid):
    """Under docker, while the probe pid runs: (container id, the API's
    inspect of it, {pid: [fds]} of the host processes other than the probe
    holding the other end of its fd 1 or 2, the pids of its shims)."""
    # The probe's: the one whose process is pid (one of the pool's runs its
    # interpreter too, started ahead, waiting).
    ids = sorted(docker_state_containers(state, socket_path=B.socket).values())
    def pid_of(i):
        value = docker_api("GET", f"/containers/{i}/json", socket_path=B.socket)[1]
        return value.get("State", {}).get("Pid") if isinstance(value, dict) else None
    ids = [i for i in ids if pid_of(i) == pid]
    cid = ids[0] if len(ids) == 1 else None
    info = None
    if cid:
        status, value = docker_api("GET", f"/containers/{cid}/json", socket_path=B.socket)
        info = value if status == 200 and isinstance(value, dict) else None
    pipes = set()
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("pipe:"):
                pipes.add(link)
    holders = {}
    for other in os.listdir("/proc"):
        if not other.isdigit() or int(other) == pid:
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{other}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{other}/fd/{fd}") in pipes:
                        holders.setdefault(int(other), []).append(int(fd))
    shims = {p for p, _ in docker_shims([cid])} if cid else set()
    return cid, info, holders, shims


def file_has(path, needle):
    try:
        with open(path, "rb") as f:
            return needle in f.read()
    except OSError:
        return False


try:
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"], timeout=30)
    state = work.staged_state(config, [("acme/app", clone)])
    with S.serving(work, config, state) as srv:
        result = {}
        # The daemon's CPU over a window before the probe: its baseline.
        if B.runtime_is_daemon:
            base_start = daemon_ticks(set())
            S.wait_for(lambda: False, timeout=WINDOW)
            baseline = daemon_ticks(set()) - base_start
        t = threading.Thread(target=lambda: result.setdefault("r", srv.probe(FLOOD, "acme/app")))
        t.start()
        cid = S.wait_container(state, srv.run, timeout=30, serve_pid=srv.pid)
        if B.runs_on_sentry:
            pid = S.wait_for(lambda: cid and sandbox_pid(state, cid), timeout=30)
        else:
            pid = S.wait_for(lambda: probe_pid(srv.probe_id_base, 4), timeout=30)
        start = written(pid) if pid else None
        flooding = start is not None and S.wait_for(lambda: (written(pid) or 0) - start >= FLOOD_SEEN, timeout=60)
        fds = {}
        if pid:
            for fd in (0, 1, 2):
                try:
                    fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError as e:
                    fds[fd] = str(e)
        docker_facts = docker_while_running(state, pid) if B.runtime_is_daemon else None
        shims = docker_facts[3] if docker_facts else set()
        before = runtime_processes(cid) if cid else {}
        daemon_before, probe_before = (daemon_ticks(shims), ticks(pid)) if B.runtime_is_daemon else (0, 0)
        S.wait_for(lambda: False, timeout=WINDOW)
        after = runtime_processes(cid) if cid else {}
        daemon_after, probe_after = (daemon_ticks(shims), ticks(pid)) if B.runtime_is_daemon else (0, 0)
        # The look is over: the probe stops flooding and answers.
        if B.runs_on_sentry and pid:
            # runsc reaches the sandbox's control socket from serve's network
            # namespace, which serve left the host's for.
            subprocess.run(["nsenter", "-t", str(srv.pid), "-n", "-m", "--"]
                           + B.kill_argv(B.run_root(state, srv.run), cid, "USR1"), capture_output=True)
        elif pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
        t.join(timeout=60)
        null_fds = pid is not None and empty_stdin(fds.get(0), pid) and fds.get(1) == fds.get(2) == "/dev/null"
        if B.runtime_is_daemon:
            cid, info, holders, shims = docker_facts
            tap.ok(null_fds, "docker: while it floods, the probe's fds 1 and 2 are /dev/null itself, not pipes to "
                             "its containerd shim (the wrapper's), and fd 0 an empty pipe no host process holds the "
                             "other end of", fds)
            tap.ok(cid and not holders, "docker: no host process holds the other end of any of the probe's fds",
                   holders)
            log = ((info or {}).get("HostConfig") or {}).get("LogConfig") or {}
            tap.ok(log.get("Type") == "none" and not (info or {}).get("LogPath"),
                   "docker: while it runs, the container's HostConfig.LogConfig.Type is none (the API's inspect) and "
                   "it has no LogPath", (log, (info or {}).get("LogPath")))
        elif B.runs_on_sentry:
            B.not_applicable(tap, "while it floods, the probe's fds 0, 1 and 2 are /dev/null itself, not pipes to a "
                             "host process", "the probe has no host process; it runs inside runsc-sandbox, whose "
                             "fds are checked next")
            tap.ok(null_fds, "gvisor: while it floods, the sandbox's fds 1 and 2 (the probe's stdio, written by "
                             "the sentry) are /dev/null itself, and fd 0 /dev/null or a pipe no host process holds "
                             "the other end of", fds)
        else:
            tap.ok(null_fds, "while it floods, the probe's fds 1 and 2 are /dev/null itself, and fd 0 /dev/null or a "
                             "pipe no host process holds the other end of", fds)
        busy = {p: (before[p][0], after[p][1] - before[p][1]) for p in before if p in after
                and after[p][1] - before[p][1] > 10}
        name = ("no runtime process spends CPU while the probe floods (nothing relays its output)"
                + (" (runsc and its gofer; the sandbox is the probe)" if B.runs_on_sentry else ""))
        if B.runtime_is_daemon:
            spent, probe_spent = daemon_after - daemon_before, probe_after - probe_before
            margin = max(DOCKER_NOISE_TICKS, probe_spent // 4)
            print(f"# docker: CPU ticks over {WINDOW} s: dockerd and containerd before the probe {baseline}; "
                  f"dockerd, containerd and the shim while it flooded {spent}; the probe itself {probe_spent}",
                  flush=True)
            tap.ok(cid and flooding and probe_spent > 0 and spent <= baseline + margin,
                   "docker: dockerd, containerd and the container's shim spend no CPU on the flood beyond their "
                   "baseline (plus a quarter of the probe's own CPU)",
                   {"baseline": baseline, "spent": spent, "probe": probe_spent, "margin": margin})
        else:
            tap.ok(cid and flooding and not busy, name,
                   {"sandbox": cid, "flood seen": bool(flooding), "busy": busy, "alive": before})
        tap.ok(result.get("r") == YES, "the flooding probe still answers", result)
        with open(os.path.join(state, "audit", "audit.jsonl"), "rb") as f:
            audit = f.read()
        tap.ok(b"FLOOD-STDIO-CANARY" not in audit and b"FLOOD-STDIO-CANARY" not in open(srv.stderr_path, "rb").read(),
               "the flood reaches neither the audit log nor serve's output")
        if B.runtime_is_daemon:
            cid = docker_facts[0]
            cdir = os.path.join(DOCKER_DATA_ROOT, "containers", cid or "?")
            json_logs = glob.glob(os.path.join(DOCKER_DATA_ROOT, "containers", "*", f"{cid}-json.log*")) if cid else []
            hits = [p for p in DOCKER_DAEMON_LOGS if file_has(p, b"FLOOD-STDIO-CANARY")]
            hits += [os.path.join(d, n) for d, _, fs in os.walk(cdir) for n in fs
                     if file_has(os.path.join(d, n), b"FLOOD-STDIO-CANARY")]
            tap.ok(cid and not json_logs and not hits,
                   "docker: nothing the probe printed reaches the daemon's disk: no json log file of the container "
                   "under the data root, and the flood in no file of its container directory nor in dockerd's or "
                   "containerd's log", {"json logs": json_logs, "hits": hits})
finally:
    work.close()
tap.finish()
