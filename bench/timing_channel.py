#!/usr/bin/python3
"""How well an observer tells two secret-dependent probes apart from the
client's latency alone, under each of serve's release modes
(--release immediate|bucketed|fixed; src/base/release_ladder.h,
docs/threat-model.md).  docs/performance.md, "Timing channel", records what
it measured.

Two probes over the same staged repository, both answering YES:

  A  writes its answer at once;
  B  busy-loops --delta-ms (default 200) of wall time first: the branch a
     secret would pick.  200 ms, well inside the first 1 s bucket, and
     well above the ~100 ms spread of a trivial probe's own run time here,
     so that immediate mode shows the leak plainly (at 40 ms it shows it
     only at about 70 %: the spread hides much of it).

For each mode in --modes (default immediate,bucketed,fixed) one serve
starts with that --release, a config timeout of --timeout seconds (default
2: fixed then releases at 7 s, bucketed can reach 1, 2, 4 and 8 s) and
--concurrency slots (default 4).  --calls calls of each probe (default 200),
in one seeded random order, go through the real client `sealed-probe`, from
several client threads; each call's latency is the client process's, from
its start to its exit.  Client threads never outnumber the slots (at most
--concurrency), so that no call waits in serve's queue: a queued call's
latency would carry its wait, the release times of the calls ahead of it.  Concurrent calls still share the CPUs, which can only
lengthen a probe's own work (and so push it across a bucket boundary: a
real leak, counted as such).  Immediate, the control, runs with
--immediate-threads (default 1): the quietest setting, so the leak it
measures is not drowned in the noise of contention.

The observer: the best-threshold classifier.  Over every threshold t (each
observed latency) and both directions ("B if latency > t", "B if latency
<= t"), the balanced accuracy on the pooled sample; the best one.  That
maximum is fitted on the very sample it scores (it is 0.5 + D/2, D the
two-sample Kolmogorov-Smirnov distance), so even two identical distributions
score above 50 %: with 200 calls of each probe, about 54 % on average and
above 55 % about one time in five.  Beside it the table prints its chance level (the
95th percentile of the same statistic with the labels shuffled, --perms
times) and the held-out accuracy: repeated stratified 5-fold
cross-validation, the threshold and direction fitted on four folds and
scored on the fifth, which an indistinguishable pair puts at 50 % +- noise.
The targets (the issue's) are judged on the held-out accuracy (--judge
best: on the in-sample maximum instead): at most 55 % in bucketed and
fixed, at least --immediate-target (default 90 %) in immediate, where a
leak must show for the bench to mean anything.  Every call must answer YES.
A missed target prints a FAIL line and the exit status is 1 (--no-targets:
report only, exit 0).

From each serve's audit log (the two scripts told apart by their sha256) it
also reports, per probe, the release values the proxy chose (release_ms:
bucketed only ladder boundaries, fixed one value), the time the answer was
ready (finished - received) and, in --json, the probe's own wall_ms: the
busy loop is there, in the proxy, whatever the client sees.

usage (as root, after scripts/quickstart or with --rootfs):
  bench/timing_channel.py [--modes immediate,bucketed,fixed] [--calls 200]
                          [--delta-ms 200] [--timeout 2] [--concurrency 4]
                          [--threads N] [--immediate-threads 1] [--warmup 4]
                          [--runtime runc|gvisor] [--gvisor-platform ptrace]
                          [--runsc PATH] [--probe-ids 2104000000]
                          [--build build] [--rootfs /var/lib/sealed-probe/rootfs]
                          [--seed 1] [--perms 2000] [--judge heldout|best]
                          [--immediate-target 0.9] [--no-targets] [--json FILE]
"""

import argparse
import collections
import hashlib
import json
import os
import platform
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_latency import (GIT_ENV_EXTRA, PATH, Serve, audit_records, log, make_clone, parse_ts, stage,  # noqa: E402
                         version_line)

OUTCOMES = ("YES", "NO", "UNKNOWN")
ANSWER = '{"result":"YES"}'
PROBE_A = 'import json\nwith open("/probe/out", "w") as f:\n    json.dump({"result": "YES"}, f)\n'
PROBE_B = ('import json, time\n'
           't0 = time.monotonic()\n'
           'while time.monotonic() - t0 < {delta}:\n'
           '    pass\n'
           'with open("/probe/out", "w") as f:\n'
           '    json.dump({{"result": "YES"}}, f)\n')
MODES = ("immediate", "bucketed", "fixed")
LADDER_MS = (1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 512000)  # SP_RELEASE_LADDER_MS
MARGIN_MS = 5000  # SP_RELEASE_MARGIN_MS
HIDDEN_TARGET = 0.55  # bucketed and fixed: at most this accuracy
CONCURRENCY_MAX = 16  # SP_SERVE_CONCURRENCY_MAX
PROBE_ID_STRIDE = 1000
FOLDS, CV_REPEATS = 5, 20


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


def spread(samples):
    if not samples:
        return None
    return {"n": len(samples), "median": statistics.median(samples), "p10": pct(samples, 0.1),
            "p25": pct(samples, 0.25), "p75": pct(samples, 0.75), "p90": pct(samples, 0.9),
            "min": min(samples), "max": max(samples)}


# ---- the observer ------------------------------------------------------------

def best_threshold(a, b):
    """The best balanced accuracy of "B if x > t" or "B if x <= t" over
    every threshold t between distinct pooled values (and below all of
    them).  Returns (accuracy, t, direction), direction ">" or "<="."""
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    na, nb = len(a), len(b)
    best = (0.5, pooled[0][0] - 1, ">")
    a_le = b_le = 0  # how many of each are <= the threshold
    i = 0
    while i < len(pooled):
        x = pooled[i][0]
        while i < len(pooled) and pooled[i][0] == x:
            if pooled[i][1]:
                b_le += 1
            else:
                a_le += 1
            i += 1
        acc = 0.5 * (a_le / na + (nb - b_le) / nb)  # B if > x
        if acc > best[0]:
            best = (acc, x, ">")
        if 1 - acc > best[0]:
            best = (1 - acc, x, "<=")
    return best


def ks_accuracy(labels_sorted, na, nb, breaks):
    """best_threshold's accuracy for labels given in the pooled sort order
    (1 = B), thresholds only at breaks (indices after which the value
    changes): for the permutations."""
    a_le = b_le = 0
    d = 0.0
    for i, lab in enumerate(labels_sorted):
        if lab:
            b_le += 1
        else:
            a_le += 1
        if breaks[i]:
            diff = abs(a_le / na - b_le / nb)
            if diff > d:
                d = diff
    return 0.5 + d / 2


def chance_level(a, b, perms, rng, q=0.95):
    """The q quantile of best_threshold's accuracy with the labels shuffled
    over the same pooled latencies."""
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    values = [x for x, _ in pooled]
    breaks = [i == len(values) - 1 or values[i + 1] != values[i] for i in range(len(values))]
    labels = [lab for _, lab in pooled]
    accs = []
    for _ in range(perms):
        rng.shuffle(labels)
        accs.append(ks_accuracy(labels, len(a), len(b), breaks))
    return pct(accs, q)


def held_out(a, b, rng, folds=FOLDS, repeats=CV_REPEATS):
    """Repeated stratified k-fold: the threshold and direction fitted on
    k-1 folds (best_threshold), scored on the one left out; the balanced
    accuracy over every held-out call, averaged over the repeats."""
    accs = []
    for _ in range(repeats):
        ia, ib = list(range(len(a))), list(range(len(b)))
        rng.shuffle(ia)
        rng.shuffle(ib)
        ok_a = ok_b = 0
        for k in range(folds):
            test_a = set(ia[k::folds])
            test_b = set(ib[k::folds])
            train_a = [a[i] for i in range(len(a)) if i not in test_a]
            train_b = [b[i] for i in range(len(b)) if i not in test_b]
            _, t, direction = best_threshold(train_a, train_b)

            def says_b(x):
                return x > t if direction == ">" else x <= t
            ok_a += sum(1 for i in test_a if not says_b(a[i]))
            ok_b += sum(1 for i in test_b if says_b(b[i]))
        accs.append(0.5 * (ok_a / len(a) + ok_b / len(b)))
    return statistics.mean(accs)


def ask(client, socket_path, repo, script):
    """One call through the client: its latency in ms (process start to
    exit) and its stdout."""
    t0 = time.perf_counter()
    r = subprocess.run([client, "--repo", repo] + [x for o in OUTCOMES for x in ("--outcome", o)],
                       input=script, capture_output=True,
                       env={"PATH": PATH, "SEALED_PROBE_SOCKET": socket_path})
    dt = (time.perf_counter() - t0) * 1000
    return dt, r.stdout.decode(errors="replace").strip()


def run_calls(client, socket_path, repo, scripts, order, threads):
    """Every call of `order` (a list of probe names), handed out in order
    to `threads` client threads.  Returns a list of (probe, ms, answer)."""
    todo = queue.Queue()
    for i, p in enumerate(order):
        todo.put((i, p))
    out = [None] * len(order)
    done = [0]
    lock = threading.Lock()
    step = max(1, len(order) // 10)

    def worker():
        while True:
            try:
                i, p = todo.get_nowait()
            except queue.Empty:
                return
            ms, answer = ask(client, socket_path, repo, scripts[p])
            out[i] = (p, ms, answer)
            with lock:
                done[0] += 1
                if done[0] % step == 0:
                    log(f"    {done[0]}/{len(order)} calls")

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


# ---- main --------------------------------------------------------------------

def bucket_of(ms):
    """The ladder boundary a client latency in bucketed mode was released
    at: the largest at or below it (the client adds, never subtracts)."""
    below = [b for b in LADDER_MS if b <= ms]
    return below[-1] if below else 0


def fmt_counts(counter):
    return ", ".join(f"{k}×{v}" if k is not None else f"null×{v}" for k, v in sorted(counter.items(),
                     key=lambda kv: (kv[0] is None, kv[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default=",".join(MODES), help="release modes, comma-separated "
                    "(default immediate,bucketed,fixed)")
    ap.add_argument("--calls", type=int, default=200, help="timed calls of each probe per mode (default 200)")
    ap.add_argument("--delta-ms", type=float, default=200, help="probe B's busy loop, ms (default 200)")
    ap.add_argument("--timeout", type=int, default=2, help="the config's timeout, s (default 2: fixed at 7 s)")
    ap.add_argument("--concurrency", type=int, default=4, help="serve --concurrency (default 4, at most 16)")
    ap.add_argument("--threads", type=int, help="client threads in bucketed and fixed (default: --concurrency; "
                    "at most --concurrency, so nothing queues)")
    ap.add_argument("--immediate-threads", type=int, default=1, help="client threads in immediate (default 1)")
    ap.add_argument("--warmup", type=int, default=4, help="untimed calls per mode first, half A, half B "
                    "(default 4)")
    ap.add_argument("--runtime", default="runc", choices=("runc", "gvisor"))
    ap.add_argument("--runsc", metavar="PATH", help="runsc binary for gvisor (default: serve's own search)")
    ap.add_argument("--gvisor-platform", default="ptrace", help="gVisor platform (default ptrace)")
    ap.add_argument("--probe-ids", type=int, default=2_104_000_000,
                    help=f"first probe id range; each serve the next, {PROBE_ID_STRIDE} apart "
                         f"(default 2104000000)")
    ap.add_argument("--build", default="build", help="the meson build directory")
    ap.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs")
    ap.add_argument("--seed", type=int, default=1, help="seed of the call order and the statistics (default 1)")
    ap.add_argument("--perms", type=int, default=2000, help="label shuffles for the chance level (default 2000)")
    ap.add_argument("--judge", choices=("heldout", "best"), default="heldout",
                    help="which accuracy the targets judge (default heldout: cross-validated)")
    ap.add_argument("--immediate-target", type=float, default=0.90,
                    help="immediate must reach at least this accuracy (default 0.90)")
    ap.add_argument("--no-targets", action="store_true", help="report only: no FAIL, exit 0")
    ap.add_argument("--json", metavar="FILE", help="also write every sample and summary here")
    ap.add_argument("--keep-work", action="store_true", help="leave the work directory (debugging)")
    args = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("timing_channel: needs root (runtimes, mounts, staging)")
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit(f"timing_channel: --modes: `{m}` is not one of {', '.join(MODES)}")
    if not 1 <= args.concurrency <= CONCURRENCY_MAX:
        sys.exit(f"timing_channel: --concurrency must be 1 to {CONCURRENCY_MAX}")
    threads_held = args.threads or args.concurrency
    for name, t in (("--threads", threads_held), ("--immediate-threads", args.immediate_threads)):
        if not 1 <= t <= args.concurrency:
            sys.exit(f"timing_channel: {name} must be 1 to --concurrency ({args.concurrency}): a call queued "
                     f"behind a held one would carry that one's release time")
    if args.calls < 10 or args.delta_ms < 0 or not 1 <= args.timeout <= 300:
        sys.exit("timing_channel: --calls at least 10, --delta-ms at least 0, --timeout 1 to 300")
    proxy = os.path.abspath(os.path.join(args.build, "src", "sealed-probe-proxy"))
    client = os.path.abspath(os.path.join(args.build, "src", "sealed-probe"))
    rootfs = os.path.abspath(args.rootfs)
    for p in (proxy, client):
        if not os.access(p, os.X_OK):
            sys.exit(f"timing_channel: {p} is missing: build first")
    runtime_args = []
    if args.runtime == "gvisor":
        runtime_args = ["--gvisor-platform", args.gvisor_platform]
        if args.runsc:
            runtime_args += ["--runsc", os.path.abspath(args.runsc)]

    scripts = {"A": PROBE_A.encode(), "B": PROBE_B.format(delta=args.delta_ms / 1000).encode()}
    sha = {"sha256:" + hashlib.sha256(s).hexdigest(): p for p, s in scripts.items()}
    repo = "bench/timing"
    t_begin = time.monotonic()
    machine = {"kernel": platform.release(), "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
               "runc": version_line(["runc", "--version"])}
    if args.runtime == "gvisor":
        machine["runsc"] = version_line([args.runsc or "runsc", "--version"])
    work = tempfile.mkdtemp(prefix="sp-tc-work-")
    os.chmod(work, 0o711)
    git_env = {"PATH": PATH, "HOME": work, **GIT_ENV_EXTRA}
    result = {"machine": machine, "args": vars(args), "modes": {}}
    serve, states = None, []
    try:
        clone = make_clone(work, "timing", 100, git_env)
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"sealedProbes": {"enabled": True, "privateRepos": [repo], "runtime": args.runtime,
                                        "timeout": args.timeout, "maxInvocations": 100000}}, f)
        rng = random.Random(args.seed)
        for k, mode in enumerate(modes):
            state = os.path.join(work, f"state-{mode}")
            states.append(state)
            log(f"{mode}: stage")
            stage(proxy, config, state, [(repo, clone)])
            ids = args.probe_ids + k * PROBE_ID_STRIDE
            threads = args.immediate_threads if mode == "immediate" else threads_held
            serve = Serve(proxy, config, state, rootfs, f"release-{mode}",
                          ["--release", mode, "--concurrency", str(args.concurrency)], ids, runtime_args, work)
            log(f"{mode}: serve --release {mode} --concurrency {args.concurrency} --probe-ids {ids}, "
                f"{threads} client thread(s)")
            if not serve.start():
                raise RuntimeError(f"serve --release {mode} did not become ready: {serve.stderr()[-1000:]}")
            warm = ["A", "B"] * (args.warmup // 2) + ["A"] * (args.warmup % 2)
            for p, ms, answer in run_calls(client, serve.socket, repo, scripts, warm, threads):
                if answer != ANSWER:
                    raise RuntimeError(f"{mode}: warmup probe {p} answered {answer}: {serve.stderr()[-1000:]}")
            order = ["A"] * args.calls + ["B"] * args.calls
            rng.shuffle(order)
            log(f"{mode}: {len(order)} calls, {threads} thread(s)")
            t0 = time.monotonic()
            calls = run_calls(client, serve.socket, repo, scripts, order, threads)
            wall_s = time.monotonic() - t0
            serve.stop()
            serve = None

            recs = [r for r in audit_records(state) if r.get("status") != "admitted"
                    and r.get("script_sha256") in sha]
            recs.sort(key=lambda r: (r["received"], int(r["id"].rsplit("-", 1)[1])))
            per = {"A": [], "B": []}
            for r in recs:
                per[sha[r["script_sha256"]]].append(r)
            skip = {"A": warm.count("A"), "B": warm.count("B")}
            audit = {}
            for p in ("A", "B"):
                mine = per[p][skip[p]:]
                audit[p] = {"records": len(mine),
                            "status": dict(collections.Counter(r["status"] for r in mine)),
                            "release_ms": dict(collections.Counter(r.get("release_ms") for r in mine)),
                            "ready_ms": spread([(parse_ts(r["finished"]) - parse_ts(r["received"])) * 1000
                                                for r in mine if r.get("finished")]),
                            "wall_ms": spread([r["wall_ms"] for r in mine if r.get("wall_ms") is not None]),
                            "overflow": sum(1 for r in mine if r.get("release_overflow"))}
            lat = {p: [ms for q, ms, ans in calls if q == p] for p in ("A", "B")}
            answers = {p: dict(collections.Counter(ans for q, _, ans in calls if q == p)) for p in ("A", "B")}
            acc, thr, direction = best_threshold(lat["A"], lat["B"])
            stats_rng = random.Random(args.seed * 1000 + k)
            chance = chance_level(lat["A"], lat["B"], args.perms, stats_rng)
            cv = held_out(lat["A"], lat["B"], stats_rng)
            client_buckets = ({p: dict(collections.Counter(bucket_of(ms) for ms in lat[p])) for p in ("A", "B")}
                              if mode == "bucketed" else None)
            result["modes"][mode] = {
                "concurrency": args.concurrency, "threads": threads, "probe_ids": ids, "wall_s": wall_s,
                "samples_ms": lat, "latency": {p: spread(lat[p]) for p in lat}, "answers": answers,
                "best_threshold": {"accuracy": acc, "threshold_ms": thr, "b_if": direction},
                "chance95": chance, "heldout": cv, "audit": audit, "client_buckets": client_buckets}
            log(f"{mode}: done in {wall_s:.0f} s; best-threshold {acc:.3f} (chance95 {chance:.3f}), "
                f"held-out {cv:.3f}")
        result["machine"]["loadavg_end"] = os.getloadavg()
    finally:
        if serve is not None:
            serve.stop()
        for st in states:
            if os.path.isdir(st):
                r = subprocess.run([proxy, "unstage", "--state", st], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, env={"PATH": PATH})
                if r.returncode != 0:
                    log(f"unstage {st}: {r.stderr.strip()}")
        if args.keep_work:
            log(f"work directory kept: {work}")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", work])
    total_s = time.monotonic() - t_begin
    result["total_wall_s"] = total_s

    # ---- the table ----
    la0, la1 = machine["loadavg_start"], machine.get("loadavg_end", (float("nan"),) * 3)
    print(f"\n### Timing channel: probe A (answers at once) vs B (busy-loops {args.delta_ms:g} ms first), "
          f"{args.calls} calls each per mode\n")
    print(f"{args.runtime}, {machine['cpus']} cpus, kernel {machine['kernel']}, {machine['runc'] or ''}; "
          f"load average {la0[0]:.2f} at the start, {la1[0]:.2f} at the end; config timeout {args.timeout} s; "
          f"serve --concurrency {args.concurrency}; judged on the "
          f"{'held-out' if args.judge == 'heldout' else 'best-threshold'} accuracy; "
          f"total wall time {total_s:.0f} s\n")
    print("| mode | client threads | A median [p10, p90] ms | B median [p10, p90] ms | best-threshold acc. "
          "| chance 95 % | held-out acc. | release_ms seen (audit), A / B | ready ms A / B (audit medians) "
          "| wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, m in result["modes"].items():
        la, lb = m["latency"]["A"], m["latency"]["B"]
        rel = " / ".join(fmt_counts(m["audit"][p]["release_ms"]) for p in ("A", "B"))
        ready = " / ".join(f"{m['audit'][p]['ready_ms']['median']:.0f}" if m["audit"][p]["ready_ms"] else "-"
                           for p in ("A", "B"))
        print(f"| {mode} | {m['threads']} | {la['median']:.1f} [{la['p10']:.1f}, {la['p90']:.1f}] "
              f"| {lb['median']:.1f} [{lb['p10']:.1f}, {lb['p90']:.1f}] "
              f"| {100 * m['best_threshold']['accuracy']:.1f} % | {100 * m['chance95']:.1f} % "
              f"| {100 * m['heldout']:.1f} % | {rel} | {ready} | {m['wall_s']:.0f} s |")
    print("\n(latency: the client process, start to exit; best-threshold: the best balanced accuracy of "
          "\"B if latency > t\" or its reverse\n over every observed t, fitted on the sample it scores; "
          "chance 95 %: that statistic's 95th percentile with the labels\n shuffled; held-out: "
          f"{CV_REPEATS}x repeated stratified {FOLDS}-fold, the threshold fitted on 4/5 and scored on the rest; "
          "release_ms:\n value x count, `null` in immediate; ready: finished - received, when the answer was "
          "ready in the proxy)")

    # ---- the targets ----
    failures = []
    what = "held-out" if args.judge == "heldout" else "best-threshold"
    for mode, m in result["modes"].items():
        judged = m["heldout"] if args.judge == "heldout" else m["best_threshold"]["accuracy"]
        checks = []  # (ok, line)
        if any(a != ANSWER for p in ("A", "B") for a in m["answers"][p]):
            checks.append((False, f"{mode}: not every call answered YES: A {m['answers']['A']}, "
                                  f"B {m['answers']['B']}"))
        if mode == "immediate":
            checks.append((judged >= args.immediate_target,
                           f"{mode}: {what} accuracy {100 * judged:.1f} % (target at least "
                           f"{100 * args.immediate_target:.0f} %: the leak the other modes must hide)"))
        else:
            line = f"{mode}: {what} accuracy {100 * judged:.1f} % (target at most {100 * HIDDEN_TARGET:.0f} %)"
            seen = set(m["audit"]["A"]["release_ms"]) | set(m["audit"]["B"]["release_ms"])
            if mode == "bucketed":
                cb = m["client_buckets"]
                if len(set(cb["A"]) | set(cb["B"])) > 1:
                    line += (f"; the calls span several buckets (client: A {fmt_counts(cb['A'])}; "
                             f"B {fmt_counts(cb['B'])}): a probe whose work crosses a boundary lands in a "
                             f"later one")
                off = seen - set(LADDER_MS)
                if off:
                    checks.append((False, f"{mode}: release values off the ladder (audit): "
                                          f"{sorted(off, key=str)}"))
            else:
                expect = args.timeout * 1000 + MARGIN_MS
                if seen != {expect}:
                    checks.append((False, f"{mode}: release values (audit) {sorted(seen, key=str)}, "
                                          f"not only {expect}"))
            checks.append((judged <= HIDDEN_TARGET, line))
        for ok, line in checks:
            print(("target met: " if ok else "FAIL: ") + line)
            if not ok:
                failures.append(line)
    result["failures"] = failures
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    print(f"total wall time {total_s:.0f} s")
    if failures and not args.no_targets:
        print(f"FAIL: {len(failures)} target(s) missed")
        sys.exit(1)
    print("all targets met" if not failures else "targets not judged (--no-targets)")


if __name__ == "__main__":
    main()
