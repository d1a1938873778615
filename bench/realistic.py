#!/usr/bin/python3
"""A realistic probe beside the trivial one, end to end through `serve`
against the bare run of the same bundle by the runtime itself, with the CPU
each probe costs, throughput at concurrency 1 and 2, and serve's private
memory.  A benchmark, never a test: it prints numbers and the issue's
targets with PASS or MISS, and judges nothing by exit status.
docs/performance.md records what it measured.

The probes (the bundle runs `python3 -I -S -B /probe/probe.py`):
  trivial    writes {"result":"YES"}; never reads the repository.
  realistic  imports os, re, pathlib and json, walks /probe/repo with
             os.walk (leaving .git out), reads every file that decodes as
             UTF-8 text through pathlib, counts the lines matching a fixed
             regex and answers YES when the count is above 0 (it is, at
             every size: one file in ten matches).

For each runtime (--runtimes: runc, gvisor, docker) and each fixture size
(--sizes, default 100, 10,000 and 100,000 files; git repositories of small
files, 100 a directory, the same bytes every run, made once and staged into
every state directory), the variants:

  baseline  the runtime's own run of a `bundle --dry-run` bundle, the
            repository copied in place into its repo/ (as
            bench/e2e_latency.py does: `RUNTIME GLOBAL-FLAGS run --bundle B
            ID`, or for docker `docker run --rm` through the CLI with the
            create body's flags); before each run its probe.py is rewritten
            in place with the probe's script (untimed).
  poolN     the client against `serve --snapshot overlay --release
            immediate --pool N`, for each N in --pool (default 1).  A serve
            without --pool (its --help does not name it) runs without it,
            as the variant `new`, and the output says so.
  old       with --compare-build DIR and --compare-rootfs DIR (runc only):
            the same probes through that build's client and serve
            (`--snapshot overlay`, no --release or --probe-ids: the build
            of commit 754432d has neither, and answers at once), on a state
            directory staged by that build's own `stage`, with its own
            rootfs.  bench/build-compare.sh makes both.

Latency: rounds of every (runtime, variant, probe, size) once, shuffled per
round (seeded); a runtime takes part in its first --runs-RUNTIME rounds
only (gvisor's realistic probe at 10,000 files takes about 9 s).  Each run
is preceded by a pause of --pause-ms (default 250): a pooled serve refills
its pool after an answer, and a probe that follows another at once would
time the refill, not the pool.  medians, p90s, the ratio to the same
runtime's baseline and to bare runc's, and from each serve's audit log the
sandbox's cpu_ms, wall_ms and the proxy's time.

CPU: for each (runtime, variant, probe, size), a block of --cpu-runs
sequential probes, then a wait until serve's process tree is idle, measured
two ways and divided by the block's probes:
  tree     CPU time of the processes this bench waited for (clients,
           `runc run` and what it ran) plus serve's own and its descendants'
           (live ones and those it reaped: the sandboxes, whose inits it
           reaps as their subreaper), from /proc/PID/stat.  Docker's
           daemon, containerd and the containers are not in it.
  machine  the whole machine's non-idle time from /proc/stat over the same
           window: everything, other load included.

Throughput: per runtime (and old), serve is restarted on the same state with
--concurrency 1, then 2 (the first --pool value), and --clients client
threads each ask the trivial probe at the smallest size in a closed loop for
--throughput-seconds; probes per second = answers / (last answer - start).

Memory: serve's Private_Clean + Private_Dirty (/proc/PID/smaps_rollup),
idle (ready, a probe answered, its pool refilled) and after the latency and
CPU runs, with the same for its descendant processes (a pool's created,
unstarted sandboxes: `runc init`, runsc's sandbox and gofer; docker's are
the daemon's, not serve's).

usage (as root):
  bench/realistic.py [--build build] [--rootfs /var/lib/sealed-probe/rootfs]
                     [--runs 20] [--warmup 2] [--runs-gvisor 3] [--runs-docker N]
                     [--sizes 100,10000,100000] [--sizes-gvisor 100,10000]
                     [--probes trivial,realistic] [--runtimes runc[,gvisor][,docker]]
                     [--pool 1[,0]] [--compare-build DIR --compare-rootfs DIR]
                     [--cpu-runs 5] [--throughput-seconds 20] [--clients 4]
                     [--pause-ms 250] [--probe-ids 2103000000] [--json FILE]
                     [--runsc PATH] [--gvisor-platform ptrace]
                     [--docker-socket PATH] [--docker PATH] [--seed 1]
"""

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_latency import (ANSWER, PATH, PROBE, Harness, add_harness_arguments, ask,  # noqa: E402
                         audit_records, log, parse_ts, summary, version_line)

# The fixtures' files read "file N\n<sha256 of N>\n": the lines `file N`
# with N ending in 7 match, one file in ten.
REALISTIC = '''import json
import os
import pathlib
import re

PATTERN = re.compile(r"^file [0-9]*7$", re.MULTILINE)
count = 0
for top, dirs, files in os.walk("/probe/repo"):
    dirs[:] = [d for d in dirs if d != ".git"]
    for name in files:
        try:
            text = pathlib.Path(top, name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        count += len(PATTERN.findall(text))
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if count > 0 else "NO"}, f)
'''
PROBES = {"trivial": PROBE, "realistic": REALISTIC}
TICK = os.sysconf("SC_CLK_TCK")

# The issue's acceptance (issue 18), judged on runc.
TARGET_TRIVIAL_VS_BARE = 0.6     # trivial, warm: at most this times bare `runc run`
TARGET_OLD_OVER_NEW = {100: 3.0, 10000: 1.5}  # realistic: old / new at least this
TARGET_REALISTIC_VS_BARE = 1.1   # realistic at 10,000 files: at most this times bare `runc run`
TARGET_THROUGHPUT = 1.7          # concurrency 2 / concurrency 1, pool on: at least this
TARGET_FLAT = 0.10               # trivial, largest / smallest size: within this of 1


# ---- /proc ---------------------------------------------------------------------

def machine_busy_s():
    """Non-idle CPU seconds of the whole machine (/proc/stat `cpu`: all but
    idle and iowait; guest time is inside user)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICK


def proc_stat(pid):
    """(ppid, comm, utime + stime + cutime + cstime in ticks) or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    f = s[s.rindex(")") + 2:].split()
    return int(f[1]), comm, sum(int(x) for x in f[11:15])


def tree(pid):
    """{pid: (comm, ticks)} of pid and its live descendants."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st:
                procs[int(name)] = st
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in procs:
            out[p] = (procs[p][1], procs[p][2])
            todo += [c for c, st in procs.items() if st[0] == p]
    return out


def tree_cpu_s(pids):
    """CPU seconds of this process's waited-for children, plus each pid's
    tree: each process's own time and that of the children it reaped, so a
    tick is counted once."""
    t = os.times()
    ticks = sum(c for pid in pids for _, c in tree(pid).values())
    return t.children_user + t.children_system + ticks / TICK


def private_kb(pid):
    """(Private_Clean + Private_Dirty, Rss) in kB, from smaps_rollup."""
    v = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":"):
                    v[parts[0][:-1]] = int(parts[1]) if parts[1].isdigit() else 0
    except OSError:
        return None  # gone, or not ours to read (gVisor's sandbox is not dumpable)
    return v.get("Private_Clean", 0) + v.get("Private_Dirty", 0), v.get("Rss", 0)


def memory(pid):
    own, own_rss = private_kb(pid) or (None, None)
    kids = {p: c for p, (c, _) in tree(pid).items() if p != pid}
    priv = rss = unreadable = 0
    comms = {}
    for p, c in kids.items():
        m = private_kb(p)
        if m is None:
            unreadable += 1
        else:
            priv += m[0]
            rss += m[1]
        comms[c] = comms.get(c, 0) + 1
    return {"serve_private_kb": own, "serve_rss_kb": own_rss, "descendants": len(kids),
            "descendants_private_kb": priv, "descendants_rss_kb": rss, "descendants_unreadable": unreadable,
            "descendant_comms": comms}


def settle(pids, quiet=0.3, limit=10.0):
    """Waits until the trees of pids use no CPU for `quiet` seconds (a
    pool's refill, a deferred delete), at most `limit` seconds."""
    t_end = time.monotonic() + limit
    last = tree_cpu_s(pids)
    while time.monotonic() < t_end:
        time.sleep(quiet)
        now = tree_cpu_s(pids)
        if now == last:
            return
        last = now


# ---- main --------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed runs per variant, probe and size (default 20)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs of each first (default 2)")
    ap.add_argument("--sizes", default="100,10000,100000", help="fixture sizes in files (default 100,10000,100000)")
    ap.add_argument("--probes", default="trivial,realistic", help="probes to time (default trivial,realistic)")
    ap.add_argument("--runtimes", default="runc", help="runc, gvisor, docker, comma-separated (default runc)")
    for rt, runs, sizes in (("runc", None, None), ("gvisor", 3, "100,10000"), ("docker", None, None)):
        ap.add_argument(f"--runs-{rt}", type=int, default=runs,
                        help=f"{rt}'s timed runs (default {runs if runs is not None else '--runs'})")
        ap.add_argument(f"--warmup-{rt}", type=int, default=1 if runs is not None else None,
                        help=f"{rt}'s warmup runs (default {1 if runs is not None else '--warmup'})")
        ap.add_argument(f"--sizes-{rt}", default=sizes,
                        help=f"{rt}'s sizes (default {sizes or '--sizes'})")
    ap.add_argument("--pool", default="1", help="serve --pool values, one variant each (default 1; the first "
                    "is the candidate the targets judge)")
    ap.add_argument("--compare-build", metavar="DIR", help="the meson build directory of an older commit "
                    "(754432d): its serve, client and stage, as the variant `old` (runc)")
    ap.add_argument("--compare-rootfs", metavar="DIR", help="the rootfs that build's own builder made")
    ap.add_argument("--cpu-runs", type=int, default=5, help="probes per CPU block (default 5; 0: no CPU blocks)")
    ap.add_argument("--throughput-seconds", type=float, default=20,
                    help="each throughput run's length (default 20; 0: none)")
    ap.add_argument("--clients", type=int, default=4, help="closed-loop clients in throughput runs (default 4)")
    ap.add_argument("--pause-ms", type=int, default=250, help="pause before each timed run (default 250)")
    add_harness_arguments(ap, 2_103_000_000)
    args = ap.parse_args()

    runtimes = [r for r in args.runtimes.split(",") if r]
    probes = [p for p in args.probes.split(",") if p]
    for p in probes:
        if p not in PROBES:
            sys.exit(f"realistic: --probes: `{p}` is not one of {', '.join(PROBES)}")
    pools = [int(x) for x in args.pool.split(",") if x]
    sizes_all = [int(x) for x in args.sizes.split(",") if x]
    v = vars(args)
    runs = {rt: v[f"runs_{rt}"] if v[f"runs_{rt}"] is not None else args.runs for rt in runtimes}
    warmup = {rt: v[f"warmup_{rt}"] if v[f"warmup_{rt}"] is not None else args.warmup for rt in runtimes}
    sizes = {rt: [int(x) for x in (v[f"sizes_{rt}"] or args.sizes).split(",") if x] for rt in runtimes}
    skipped = {rt: [n for n in sizes_all if n not in sizes[rt]] for rt in runtimes}
    sizes_all = sorted(set(sizes_all) | {n for rt in runtimes for n in sizes[rt]})
    old = None
    if args.compare_build:
        if not args.compare_rootfs:
            sys.exit("realistic: --compare-build needs --compare-rootfs (that commit's own rootfs)")
        old = {"proxy": os.path.abspath(os.path.join(args.compare_build, "src", "sealed-probe-proxy")),
               "client": os.path.abspath(os.path.join(args.compare_build, "src", "sealed-probe")),
               "rootfs": os.path.abspath(args.compare_rootfs)}
        for p in (old["proxy"], old["client"]):
            if not os.access(p, os.X_OK):
                sys.exit(f"realistic: {p} is missing (--compare-build)")
        if "runc" not in runtimes:
            sys.exit("realistic: --compare-build compares under runc: add it to --runtimes")

    h = Harness(args, runtimes, "rl")
    r = subprocess.run([h.proxy, "serve", "--help"], capture_output=True, text=True, env={"PATH": PATH})
    has_pool = "--pool" in r.stdout + r.stderr
    if not has_pool:
        log("realistic: this serve has no --pool (its --help does not name it): the variant `new` runs without")
        pools = [None]
    vname = {p: "new" if p is None else f"pool{p}" for p in pools}
    cand = vname[pools[0]]
    result = {"machine": h.machine, "runs": runs, "warmup": warmup, "sizes": sizes, "skipped_sizes": skipped,
              "probes": probes, "runtimes": runtimes, "pools": pools, "serve_has_pool": has_pool,
              "pause_ms": args.pause_ms, "compare": old, "samples_ms": {}, "summary": {}, "audit": {},
              "cpu": {}, "memory": {}, "throughput": {}, "targets": {}, "unavailable": h.unavailable,
              "stage_s": h.stage_s, "probe_ids": h.probe_ids_used,
              "python_scripts": {p: PROBES[p] for p in probes}}
    if old:
        result["compare"]["version"] = version_line(["git", "-C", os.path.dirname(os.path.abspath(args.compare_build)),
                                                     "log", "-1", "--format=%h (%cs)"])
    script_sha = {p: "sha256:" + hashlib.sha256(PROBES[p].encode()).hexdigest() for p in probes}
    t_start = time.monotonic()
    try:
        repos, clones = h.fixtures(sizes_all)
        configs, state_of, client_of = {}, {}, {}
        for rt in runtimes:
            configs[rt] = h.config(rt, rt, [repos[n] for n in sizes[rt]])
        variants = []  # (runtime, variant) with serves
        for rt in runtimes:
            mine = [c for c in clones if int(c[0][len("bench/r"):]) in sizes[rt]]
            for p in pools:
                state_of[(rt, vname[p])] = h.stage(f"{rt}/{vname[p]}", configs[rt], mine)
            if rt == "runc" and old:
                state_of[(rt, "old")] = h.stage("runc/old", configs[rt], mine, proxy=old["proxy"])
        script = os.path.join(h.work, "probe.py")
        with open(script, "w") as f:
            f.write(PROBE)
        for rt in runtimes:
            for n in sizes[rt]:
                line = h.make_baseline(rt, f"{rt}/{n}", configs[rt], repos[n], script,
                                       state_of[(rt, vname[pools[0]])])
            log(f"baseline ({rt}): {line}")

        for rt in runtimes:
            for p in pools:
                key = f"{rt}/{vname[p]}"
                serve_args = ["--snapshot", "overlay", "--release", "immediate"]
                if p is not None:
                    serve_args += ["--pool", str(p)]
                if h.start_serve(key, rt, configs[rt], state_of[(rt, vname[p])], serve_args, repos[sizes[rt][0]]):
                    variants.append((rt, vname[p]))
                    client_of[(rt, vname[p])] = h.client
            if rt == "runc" and old:
                if h.start_serve("runc/old", rt, configs[rt], state_of[(rt, "old")], ["--snapshot", "overlay"],
                                 repos[sizes[rt][0]], proxy=old["proxy"], client=old["client"],
                                 rootfs=old["rootfs"], probe_ids=False):
                    variants.append((rt, "old"))
                    client_of[(rt, "old")] = old["client"]
        has_baseline = {rt: True for rt in runtimes}
        if "docker" in runtimes:
            for n in sizes["docker"]:
                diffs = h.check_docker_baseline(f"docker/{n}")
                if diffs is None:
                    has_baseline["docker"] = False
                    break
                result.setdefault("docker_baseline_differs", {})[str(n)] = diffs
        variants = [(rt, "baseline") for rt in runtimes if has_baseline[rt]] + variants

        serve_pid = {(rt, vn): h.serves[f"{rt}/{vn}"].proc.pid for rt, vn in variants if vn != "baseline"}
        settle(list(serve_pid.values()))
        for (rt, vn), pid in serve_pid.items():
            result["memory"][f"{rt}/{vn}"] = {"idle": memory(pid)}

        def once(rt, vn, probe, n):
            if vn == "baseline":
                return h.run_baseline(f"{rt}/{n}", PROBES[probe])
            dt, out = ask(client_of[(rt, vn)], h.serves[f"{rt}/{vn}"].socket, repos[n], PROBES[probe])
            if out != ANSWER:
                reasons = [x.get("reason") for x in audit_records(state_of[(rt, vn)])]
                raise RuntimeError(f"{rt}/{vn} {probe} {n}: answered {out}; audit reason: "
                                   f"{reasons[-1] if reasons else None}")
            return dt

        quads = [(rt, vn, probe, n) for rt, vn in variants for probe in probes for n in sizes[rt]]
        samples = {q: [] for q in quads}
        rng = random.Random(args.seed)
        pause = args.pause_ms / 1000
        n_rounds = max(runs.values(), default=0)
        n_warm = max(warmup.values(), default=0)
        log(f"latency: {n_warm} warmup + {n_rounds} timed rounds of up to {len(quads)} runs "
            f"({', '.join(f'{rt}/{vn}' for rt, vn in variants)}; {', '.join(probes)}; "
            f"{'; '.join(f'{rt}: {len(sizes[rt])} sizes, {runs[rt]} runs' for rt in runtimes)})")
        for k in range(n_warm):
            for q in quads:
                if k < warmup[q[0]]:
                    time.sleep(pause)
                    once(*q)
        for k in range(n_rounds):
            order = [q for q in quads if k < runs[q[0]]]
            rng.shuffle(order)
            t0 = time.monotonic()
            for q in order:
                time.sleep(pause)
                samples[q].append(once(*q) * 1000)
            log(f"  round {k + 1}/{n_rounds}: {len(order)} runs in {time.monotonic() - t0:.1f} s")

        for q, ms in samples.items():
            key = "/".join(map(str, q))
            result["samples_ms"][key] = ms
            result["summary"][key] = summary(ms)
        # The audit log: per (repo, script), the last `runs` answered records
        # are the timed ones.
        for rt, vn in variants:
            if vn == "baseline":
                continue
            recs = audit_records(state_of[(rt, vn)])
            for probe in probes:
                for n in sizes[rt]:
                    mine = [x for x in recs if x.get("repo") == repos[n] and x.get("status") == "answered"
                            and x.get("script_sha256") in (script_sha[probe], None)][-runs[rt]:]
                    if not mine:
                        continue
                    proxy_ms = [(parse_ts(x["finished"]) - parse_ts(x["received"])) * 1000 for x in mine]
                    result["audit"][f"{rt}/{vn}/{probe}/{n}"] = {
                        "wall_ms": summary([x["wall_ms"] for x in mine if x.get("wall_ms") is not None]),
                        "cpu_ms": summary([x["cpu_ms"] for x in mine if x.get("cpu_ms")]),
                        "proxy_ms": summary(proxy_ms), "records": mine}

        # ---- CPU blocks ----
        if args.cpu_runs > 0:
            log(f"cpu: blocks of {args.cpu_runs} probes (gvisor/docker: at most their --runs)")
            for q in quads:
                rt, vn, probe, n = q
                k = min(args.cpu_runs, runs[rt])
                if k == 0:
                    continue
                pids = [serve_pid[(rt, vn)]] if vn != "baseline" else []
                settle(pids)
                m0, t0, w0 = machine_busy_s(), tree_cpu_s(pids), time.monotonic()
                for _ in range(k):
                    once(*q)
                settle(pids)
                m1, t1, w1 = machine_busy_s(), tree_cpu_s(pids), time.monotonic()
                result["cpu"]["/".join(map(str, q))] = {"n": k, "tree_s": (t1 - t0) / k, "machine_s": (m1 - m0) / k,
                                                         "window_s": w1 - w0}
        for (rt, vn), pid in serve_pid.items():
            result["memory"][f"{rt}/{vn}"]["after"] = memory(pid)

        # ---- throughput ----
        if args.throughput_seconds > 0:
            n0 = min(sizes_all)
            for rt, vn in variants:
                if vn not in (cand, "old") or n0 not in sizes[rt]:
                    continue
                h.stop_serve(f"{rt}/{vn}")
                for c in (1, 2):
                    key = f"{rt}/{vn}/c{c}"
                    serve_args = ["--snapshot", "overlay", "--concurrency", str(c)]
                    if vn != "old":
                        serve_args += ["--release", "immediate"] + (["--pool", str(pools[0])]
                                                                    if pools[0] is not None else [])
                    s = h.start_serve(key, rt, configs[rt], state_of[(rt, vn)], serve_args, repos[n0],
                                      **({"proxy": old["proxy"], "client": old["client"], "rootfs": old["rootfs"],
                                          "probe_ids": False} if vn == "old" else {}))
                    if s is None:
                        continue
                    result["throughput"][key] = throughput(client_of[(rt, vn)], s.socket, repos[n0],
                                                           args.clients, args.throughput_seconds)
                    result["throughput"][key]["memory"] = memory(s.proc.pid)
                    t = result["throughput"][key]
                    log(f"  {key}: {t['answers']} answers in {t['seconds']:.1f} s, {t['per_s']:.2f}/s "
                        f"({t['errors']} not YES)")
                    h.stop_serve(key)
        result["elapsed_s"] = time.monotonic() - t_start
        write_json(args.json, result)  # before the report, should it fail
        report(result, runtimes, probes, sizes, variants, cand, old, args)
    finally:
        h.close()
    write_json(args.json, result)


def write_json(path, result):
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


def throughput(client, socket_path, repo, clients, seconds):
    """clients threads, each asking the trivial probe in a closed loop
    until `seconds` have passed; the in-flight answers count."""
    done, lock = [], threading.Lock()
    # One untimed probe a client first: every one connected once, the pool warm.
    warm = [threading.Thread(target=ask, args=(client, socket_path, repo)) for _ in range(clients)]
    for t in warm:
        t.start()
    for t in warm:
        t.join()
    t0 = time.monotonic()
    deadline = t0 + seconds

    def loop():
        while time.monotonic() < deadline:
            dt, out = ask(client, socket_path, repo)
            with lock:
                done.append((time.monotonic() - t0, dt * 1000, out == ANSWER))

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [d for d in done if d[2]]
    span = max((d[0] for d in done), default=seconds)
    return {"clients": clients, "answers": len(ok), "errors": len(done) - len(ok), "seconds": span,
            "per_s": len(ok) / span if span else 0.0, "latency_ms": summary([d[1] for d in ok]),
            "samples": [[round(a, 4), round(b, 2), c] for a, b, c in done]}


def fmt(x, spec=".1f"):
    return format(x, spec) if x is not None else "-"


def report(result, runtimes, probes, sizes, variants, cand, old, args):
    S = result["summary"]

    def med(*q):
        s = S.get("/".join(map(str, q)))
        return s["median"] if s else None

    def ratio(a, b):
        return a / b if a is not None and b else None

    versions = ", ".join(x for x in (result["machine"].get("runc"), result["machine"].get("runsc")) if x)
    if "gvisor" in runtimes:
        versions += f" (--platform={args.gvisor_platform})"
    if "docker" in runtimes:
        versions += f", {result['machine']['docker']}"
    print(f"\n## Realistic benchmark\n\n{os.cpu_count()} cpus, kernel {platform.release()}, {versions}; "
          f"serve --snapshot overlay --release immediate"
          + (f" --pool {result['pools'][0]}" if result["pools"][0] is not None else " (no --pool in this serve)")
          + "; runs: " + ", ".join(f"{rt} {result['runs'][rt]}" for rt in runtimes) + "; "
          f"{args.pause_ms} ms pause before each run; {result['elapsed_s'] / 60:.1f} min in all")
    for rt in runtimes:
        if result["skipped_sizes"][rt]:
            print(f"{rt}: not run at {', '.join(f'{n:,}' for n in result['skipped_sizes'][rt])} files "
                  f"(--sizes-{rt})")
    if old:
        print(f"old = {old.get('version') or old['proxy']}, its own client, serve, stage and rootfs")

    print("\n### Latency, end to end (ms)\n")
    print("| runtime | probe | files | variant | median | p90 | × own baseline | × bare runc | sandbox cpu_ms "
          "| wall_ms | proxy ms |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for rt in runtimes:
        for probe in probes:
            for n in sizes[rt]:
                for r2, vn in variants:
                    if r2 != rt or med(rt, vn, probe, n) is None:
                        continue
                    s = S[f"{rt}/{vn}/{probe}/{n}"]
                    a = result["audit"].get(f"{rt}/{vn}/{probe}/{n}", {})

                    def am(k):
                        return a[k]["median"] if a.get(k) else None
                    rb = ratio(s["median"], med(rt, "baseline", probe, n))
                    rr = ratio(s["median"], med("runc", "baseline", probe, n))
                    print(f"| {rt} | {probe} | {n:,} | {vn} | {s['median']:.1f} | {s['p90']:.1f} | "
                          f"{fmt(rb, '.2f')} | {fmt(rr, '.2f')} | {fmt(am('cpu_ms'), '.0f')} | "
                          f"{fmt(am('wall_ms'), '.0f')} | {fmt(am('proxy_ms'), '.1f')} |")

    print("\n### Backends side by side (median ms; × bare `runc run` of the same probe and size)\n")
    cols = [(rt, vn) for rt, vn in variants]
    print("| probe | files | " + " | ".join(f"{rt} {vn}" for rt, vn in cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    for probe in probes:
        for n in sorted({n for rt in runtimes for n in sizes[rt]}):
            cells = []
            for rt, vn in cols:
                m = med(rt, vn, probe, n)
                rr = ratio(m, med("runc", "baseline", probe, n))
                cells.append("-" if m is None else f"{m:.0f}" + (f" ({rr:.2f}×)" if rr is not None else ""))
            print(f"| {probe} | {n:,} | " + " | ".join(cells) + " |")

    if result["cpu"]:
        print("\n### CPU seconds per probe\n")
        print("tree = this bench's waited-for children (clients, the baseline's runtime) + serve and its "
              "descendants, from /proc/PID/stat (docker: the daemon's side is not in it); machine = the whole "
              "machine's non-idle time from /proc/stat over the same window, other load included.\n")
        print("| runtime | probe | files | variant | n | tree s | machine s |")
        print("|---|---|---:|---|---:|---:|---:|")
        for key, c in result["cpu"].items():
            rt, vn, probe, n = key.split("/")
            print(f"| {rt} | {probe} | {int(n):,} | {vn} | {c['n']} | {c['tree_s']:.3f} | {c['machine_s']:.3f} |")

    if result["throughput"]:
        print(f"\n### Throughput, trivial probe at {min(n for rt in runtimes for n in sizes[rt]):,} files, "
              f"{args.clients} closed-loop clients, {args.throughput_seconds:g} s\n")
        print("| runtime | variant | concurrency 1 /s | concurrency 2 /s | ratio | median ms c1 | median ms c2 |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for rt, vn in variants:
            c1, c2 = result["throughput"].get(f"{rt}/{vn}/c1"), result["throughput"].get(f"{rt}/{vn}/c2")
            if not c1 and not c2:
                continue
            r = ratio(c2 and c2["per_s"], c1 and c1["per_s"])
            print(f"| {rt} | {vn} | {fmt(c1 and c1['per_s'], '.2f')} | {fmt(c2 and c2['per_s'], '.2f')} | "
                  f"{fmt(r, '.2f')} | {fmt(c1 and c1['latency_ms'] and c1['latency_ms']['median'], '.0f')} | "
                  f"{fmt(c2 and c2['latency_ms'] and c2['latency_ms']['median'], '.0f')} |")

    if result["memory"]:
        print("\n### serve's private memory (Private_Clean + Private_Dirty, MiB) and its descendants'\n")
        print("| serve | idle | after the runs | descendants idle (private / RSS MiB, what) | descendants after |")
        print("|---|---:|---:|---|---|")

        def kids(m):
            if not m or not m["descendants"]:
                return "none"
            what = ", ".join(f"{c} ×{k}" for c, k in sorted(m["descendant_comms"].items()))
            bad = f", {m['descendants_unreadable']} unreadable" if m["descendants_unreadable"] else ""
            return f"{m['descendants_private_kb'] / 1024:.1f} / {m['descendants_rss_kb'] / 1024:.1f} ({what}{bad})"
        for key, m in result["memory"].items():
            idle, after = m.get("idle"), m.get("after")
            print(f"| {key} | {fmt(idle and idle['serve_private_kb'] and idle['serve_private_kb'] / 1024, '.1f')} | "
                  f"{fmt(after and after['serve_private_kb'] and after['serve_private_kb'] / 1024, '.1f')} | "
                  f"{kids(idle)} | {kids(after)} |")
        if "docker" in runtimes:
            print("(docker: a pool's containers are the daemon's processes, not serve's descendants)")

    # ---- targets (runc) ----
    print("\n### Targets (issue 18, runc)\n")
    T = result["targets"]

    def judge(name, value, ok, text):
        T[name] = {"value": value, "pass": ok}
        print(f"- {'PASS' if ok else 'MISS'}: {text}" if value is not None else f"- n/a: {name}: not measured")

    if "runc" in runtimes:
        for n in sizes["runc"]:
            r = ratio(med("runc", cand, "trivial", n), med("runc", "baseline", "trivial", n))
            judge(f"trivial/{n}", r, r is not None and r <= TARGET_TRIVIAL_VS_BARE,
                  f"trivial probe at {n:,} files, {cand}: {fmt(r, '.2f')}× bare `runc run` "
                  f"(target ≤ {TARGET_TRIVIAL_VS_BARE}×)")
        for n, want in TARGET_OLD_OVER_NEW.items():
            r = ratio(med("runc", "old", "realistic", n), med("runc", cand, "realistic", n))
            if n in sizes["runc"] and old:
                judge(f"old_over_new/{n}", r, r is not None and r >= want,
                      f"realistic probe at {n:,} files, old / {cand}: {fmt(r, '.2f')}× faster (target ≥ {want}×)")
        r = ratio(med("runc", cand, "realistic", 10000), med("runc", "baseline", "realistic", 10000))
        if 10000 in sizes["runc"]:
            judge("realistic_vs_bare/10000", r, r is not None and r <= TARGET_REALISTIC_VS_BARE,
                  f"realistic probe at 10,000 files, {cand}: {fmt(r, '.2f')}× bare `runc run` with the repository "
                  f"in place (target ≤ {TARGET_REALISTIC_VS_BARE}×)")
        c1, c2 = result["throughput"].get(f"runc/{cand}/c1"), result["throughput"].get(f"runc/{cand}/c2")
        if c1 or c2:
            r = ratio(c2 and c2["per_s"], c1 and c1["per_s"])
            judge("throughput", r, r is not None and r >= TARGET_THROUGHPUT,
                  f"throughput, {cand}, concurrency 2 / 1: {fmt(r, '.2f')}× (target ≥ {TARGET_THROUGHPUT}×"
                  + (", with the pool on)" if result["pools"][0] else "; this serve has no pool)"))
        lo, hi = min(sizes["runc"]), max(sizes["runc"])
        if lo != hi:
            r = ratio(med("runc", cand, "trivial", hi), med("runc", cand, "trivial", lo))
            judge("flat", r, r is not None and abs(r - 1) <= TARGET_FLAT,
                  f"trivial probe, {cand}, {hi:,} / {lo:,} files: {fmt(r, '.2f')}× (target within "
                  f"{TARGET_FLAT:.0%} of 1)")
    for rt in runtimes:
        if rt == "runc":
            continue
        for probe in probes:
            for n in sizes[rt]:
                r = ratio(med(rt, cand, probe, n), med("runc", "baseline", probe, n))
                if r is not None:
                    print(f"- info: {rt} {cand} {probe} at {n:,} files: {r:.2f}× bare `runc run`")
    for key, why in result["unavailable"].items():
        print(f"- {key}: not measured: {why}")


if __name__ == "__main__":
    main()
