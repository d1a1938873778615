#!/usr/bin/python3
"""Where the CPU of one trivial probe goes on runc, process by process and
exec by exec: the client, serve's own threads, each `runc` invocation, the
stages of `runc init` and the probe's python3.  A benchmark, never a test:
it prints numbers and judges nothing.  docs/performance.md ("CPU per
probe") records what it measured.

One serve (`--snapshot overlay --release immediate --pool 1`, on a staged
fixture of 100 files, as bench/realistic.py starts it) answers --blocks
blocks of --runs sequential trivial probes, each after a pause of
--pause-ms (so that the pool's refill, a `runc create`, counts for the
probe that used the sandbox, as it does per probe).  During each block,
bpftrace (bench/cpu_breakdown.bt; `apt-get install bpftrace`, tracefs at
/sys/kernel/tracing) logs every exec, fork and dead thread machine-wide;
this keeps the tree of serve and the clients (by fork ancestry, so the
`runc init` stages that serve adopts as the subreaper count) and splits
each process at its execs.  A thread's CPU is its sum_exec_runtime (exact,
user and system together); the user/system split is the kernel's
tick-sampled utime/stime (4 ms ticks at HZ=250: rough per process, fair over
a block).  serve's live threads are read from /proc/PID/task/*/schedstat
before and after (their user/system split from /proc/PID/stat, at the
clock tick's 10 ms, of the whole process).  Kernel threads (kworkers: cgroup and overlay teardown
done asynchronously) are not in it; work the kernel does in a process's
context (mounts, namespaces, cgroup creation, page faults, exec) is in that
process's system time.

Rows (ms of CPU per probe; the median of the blocks, each block's too):
  client                 sealed-probe, and its fork before the exec
  serve's forks          serve's fork children before they exec runc
  runc create            the Go binary (create, the init's handshake, cgroups)
  create's init fork     runc create's child before it execs /proc/self/exe
  init: memfd copy       runc 1.1's copy of its own binary into a sealed memfd
                         and the re-exec (CVE-2019-5736)
  init: nsexec           runc init's C stages 0 and 1 (namespaces, clone)
  init: Go to exec       stage 2: the Go runtime, mounts, pivot_root, seccomp,
                         the wait on the exec fifo, up to the exec of python3
  python3                the probe: interpreter start-up, imports, script, exit
  runc delete            the Go binary (gone when serve removes directly)
  serve                  serve's live threads, and its threads that exited

usage (as root):
  bench/cpu_breakdown.py [--build build] [--rootfs /var/lib/sealed-probe/rootfs]
                         [--runs 25] [--blocks 3] [--pause-ms 400]
                         [--probe-ids 2129300000] [--json FILE]
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_latency import OUTCOMES, PATH, PROBE, Harness, add_harness_arguments, log  # noqa: E402

TRACER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_breakdown.bt")
ANSWER = '{"result":"YES"}'
LINE = re.compile(r"^([FPEX]) ([0-9]+) ([0-9]+)(?: (.*))?$")
ROWS = [
    ("client", r"^sealed-probe$|before exec of .*/sealed-probe$"),
    ("serve's forks before exec of runc", r"^sealed-probe-pr before exec"),
    ("runc create", r"^runc create$"),
    ("runc create's init fork before exec", r"before exec of /proc/self/exe$"),
    ("runc init: memfd copy of runc, re-exec", r"^exe before exec of /dev/fd/"),
    ("runc init: nsexec stages 0, 1", r"^(exe|[0-9]+)$|\[runc:\[1:CHILD\]\]"),
    ("runc init: Go, stage 2, to exec", r"\[runc:\[2:INIT\]\]|^runc:\[2:INIT\] before exec|/fork/fork before exec"),
    ("python3 -I -S -B (the probe)", r"^python3$"),
    ("runc delete or kill", r"^runc delete or kill$"),
    ("serve's threads", r"^serve"),
]


def user_sys_ns(pid):
    """The process's utime and stime (all its threads, tick-sampled)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = 1e9 / os.sysconf("SC_CLK_TCK")
    return int(fields[11]) * tick, int(fields[12]) * tick


def schedstat_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def parse(path, roots, serve_pid):
    """{label: [ns, utime_ns, stime_ns, execs]} over the tree under roots.
    A process is labelled by its last exec's file name; a `runc` whose
    child execs /proc/self/exe (its init) is `runc create`, any other
    `runc` is `runc delete or kill`."""
    tree = set(roots)
    parent, prev_comm, offset, last_x = {}, {}, {}, {}
    image = {serve_pid: "serve (threads that exited)"}
    execs = collections.Counter()
    segments = []  # (label, ns, ut, st) of a thread's part before an exec
    out = collections.defaultdict(lambda: [0, 0, 0, 0])

    with open(path, errors="replace") as f:
        for line in f:
            # Anything else (bpftrace's own lines) is skipped.
            m = LINE.match(line.rstrip("\n"))
            if m is None:
                continue
            kind, tgid, tid, rest = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4) or ""
            if kind == "F":
                child = int(rest)
                if tgid in tree:
                    tree.add(child)
                    parent[child] = tgid
                    image.setdefault(child, image.get(tgid, "?") + "/fork")
                continue
            if tgid not in tree:
                continue
            if kind == "P":
                prev_comm[tid] = rest or "?"
                continue
            parts = rest.rsplit(" ", 3)
            if len(parts) != 4 or not all(x.isdigit() for x in parts[1:]):
                continue
            name, ns, ut, st = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
            if kind == "E":
                o = offset.get(tid, (0, 0, 0))
                before = prev_comm.get(tid, image.get(tgid, "?"))
                segments.append((f"{before} before exec of {name}", ns - o[0], ut - o[1], st - o[2]))
                offset[tid] = (ns, ut, st)
                image[tgid] = os.path.basename(name)
                execs[(tgid, name)] += 1
            else:
                last_x[tid] = (tgid, name, ns, ut, st, image.get(tgid, "?"))
    creates = {parent.get(tgid) for (tgid, name) in execs if name == "/proc/self/exe"}

    def label(tgid, img):
        if img == "runc":
            return "runc create" if tgid in creates else "runc delete or kill"
        return img

    for lab, ns, ut, st in segments:
        o = out[lab]
        o[0] += ns
        o[1] += ut
        o[2] += st
    for (tgid, name), n in execs.items():
        out[label(tgid, os.path.basename(name))][3] += n
    for tid, (tgid, comm, ns, ut, st, img) in last_x.items():
        o0 = offset.get(tid, (0, 0, 0))
        lab = label(tgid, img)
        if lab.endswith("/fork"):
            lab = f"{lab} [{comm}]"
        o = out[lab]
        o[0] += ns - o0[0]
        o[1] += ut - o0[1]
        o[2] += st - o0[2]
    return out


def block(h, s, repo, runs, pause_s, work, k):
    """One block of probes under the tracer: {label: [ms, user ms, sys ms,
    execs]} per probe."""
    trace = os.path.join(work, f"trace-{k}.txt")
    with open(trace, "w") as out:
        bt = subprocess.Popen(["bpftrace", TRACER], stdout=out, stderr=subprocess.DEVNULL, env={"PATH": PATH})
    try:
        deadline = time.monotonic() + 60
        while os.path.getsize(trace) == 0 and time.monotonic() < deadline and bt.poll() is None:
            time.sleep(0.1)
        if os.path.getsize(trace) == 0:
            sys.exit("cpu_breakdown: bpftrace printed nothing (is tracefs mounted at /sys/kernel/tracing?)")
        # "Attaching 5 probes..." comes first; the probes attach after it.
        time.sleep(2)
        clients = []
        spid = s.proc.pid
        before = schedstat_ns(spid)
        us_before = user_sys_ns(spid)
        for i in range(runs):
            time.sleep(pause_s)
            c = subprocess.Popen([h.client, "--repo", repo] + [a for o in OUTCOMES for a in ("--outcome", o)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 env={"PATH": PATH, "SEALED_PROBE_SOCKET": s.socket})
            clients.append(c.pid)
            answer, _ = c.communicate(PROBE.encode())
            if answer.decode(errors="replace").strip() != ANSWER:
                log(f"  block {k}, probe {i}: answered {answer[:80]!r}")
        # The last probe's removal and the pool's refill.
        time.sleep(max(1.0, pause_s))
        live = schedstat_ns(spid) - before
        us = [a - b for a, b in zip(user_sys_ns(spid), us_before)]
    finally:
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(timeout=30)
        except subprocess.TimeoutExpired:
            bt.kill()
            bt.wait()
    rows = parse(trace, [spid] + clients, spid)
    rows["serve (live threads)"] = [live, us[0], us[1], 0]
    return {lab: [v[0] / runs / 1e6, v[1] / runs / 1e6, v[2] / runs / 1e6, v[3] / runs] for lab, v in rows.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=25, help="probes per block (default 25)")
    ap.add_argument("--blocks", type=int, default=3, help="blocks, each traced on its own (default 3)")
    ap.add_argument("--pause-ms", type=int, default=400, help="pause before each probe (default 400)")
    add_harness_arguments(ap, 2_129_300_000)
    args = ap.parse_args()
    if shutil.which("bpftrace", path=PATH) is None:
        sys.exit("cpu_breakdown: needs bpftrace (apt-get install bpftrace)")
    if not os.path.isdir("/sys/kernel/tracing/events/sched"):
        sys.exit("cpu_breakdown: no tracefs at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)")
    h = Harness(args, ["runc"], "cb")
    try:
        repos, clones = h.fixtures([100])
        config = h.config("runc", "runc", [repos[100]])
        state = h.stage("runc/pool1", config, clones)
        serve_args = ["--snapshot", "overlay", "--release", "immediate", "--pool", "1"]
        s = h.start_serve("runc/pool1", "runc", config, state, serve_args, repos[100])
        if s is None:
            sys.exit(f"cpu_breakdown: {h.unavailable}")
        blocks = []
        for k in range(args.blocks):
            log(f"block {k + 1} of {args.blocks}: {args.runs} probes")
            blocks.append(block(h, s, repos[100], args.runs, args.pause_ms / 1000, h.work, k))
        report(blocks, args, serve_args, h.machine)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": h.machine, "serve": serve_args, "runs": args.runs, "blocks": blocks}, f,
                          indent=1)
    finally:
        h.close()


def report(blocks, args, serve_args, machine):
    def grouped(b):
        g = {name: [0.0, 0.0, 0.0, 0.0] for name, _ in ROWS}
        g["other"] = [0.0, 0.0, 0.0, 0.0]
        for lab, v in b.items():
            name = next((n for n, rx in ROWS if re.search(rx, lab)), "other")
            g[name] = [a + x for a, x in zip(g[name], v)]
        return g

    gs = [grouped(b) for b in blocks]
    print(f"\n## CPU per trivial probe, runc\n\n{machine['cpus']} cpus, kernel {machine['kernel']}, "
          f"{machine['runc']}; serve {' '.join(serve_args)}; {args.blocks} blocks of {args.runs} probes, "
          f"{args.pause_ms} ms apart\n")
    print("| what | ms per probe (median) | user | sys | execs per probe | blocks |")
    print("|---|---:|---:|---:|---:|---|")
    totals = [sum(v[0] for v in g.values()) for g in gs]
    for name in [n for n, _ in ROWS] + ["other"]:
        ms = [g[name][0] for g in gs]
        if max(ms) == 0:
            continue
        med = statistics.median(ms)
        print(f"| {name} | {med:.1f} | {statistics.median(g[name][1] for g in gs):.1f} | "
              f"{statistics.median(g[name][2] for g in gs):.1f} | {statistics.median(g[name][3] for g in gs):.2f} | "
              f"{', '.join(f'{x:.1f}' for x in ms)} |")
    print(f"| **total** | **{statistics.median(totals):.1f}** | | | | {', '.join(f'{x:.1f}' for x in totals)} |")
    print("\nEvery exec and process part, per probe (median of the blocks):\n")
    labels = sorted({lab for b in blocks for lab in b}, key=lambda lab: -statistics.median(b.get(lab, [0])[0]
                                                                                            for b in blocks))
    for lab in labels:
        v = [b.get(lab, [0, 0, 0, 0]) for b in blocks]
        print(f"  {statistics.median(x[0] for x in v):7.2f} ms  {statistics.median(x[3] for x in v):4.2f} execs  {lab}")


if __name__ == "__main__":
    main()
