#!/usr/bin/python3
"""End-to-end probe latency through `sealed-probe-proxy serve`, against the
plain `runc run` floor.  A benchmark, never a test: it prints numbers and
judges nothing by exit status.  docs/performance.md records what it measured.

For each fixture repository size (small files in a git repository, generated
deterministically), it stages the repository, then times a trivial probe
(writes {"result":"YES"}, never reads the repository):

  baseline  `runc run` of a `bundle --dry-run --state` bundle: the seed is
            copied into repo/ once, beforehand, so each run pays only the
            sandbox (namespaces, cgroup, mounts, seccomp, CPython).
  overlay   the client `sealed-probe` against `serve --snapshot overlay`.
  copy      the client against `serve --snapshot copy`.

Rounds are interleaved (one run of each variant and size per round, in a
shuffled order, seeded), so slow drift of a shared machine hits every pair
alike and no pair always runs right after the same other.  Each serve
gets its own state directory (one proxy per state directory).  From each
serve's audit log it also reads the proxy-side time (finished - received) and
the runtime's own `wall_ms` (launch of `runc run` to its exit), to split the
client-observed latency into: sandbox, the proxy's own work around it
(workspace, bundle, snapshot, `runc delete`, cleanup), and client + socket.

usage (as root, after scripts/quickstart or with --rootfs):
  bench/e2e_latency.py [--runs 30] [--warmup 3] [--sizes 100,10000]
                       [--modes overlay,copy] [--build build] [--seed 1]
                       [--rootfs /var/lib/sealed-probe/rootfs] [--json FILE]
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

OUTCOMES = ("YES", "NO", "UNKNOWN")
ANSWER = '{"result":"YES"}'
PROBE = 'import json\nwith open("/probe/out", "w") as f:\n    json.dump({"result": "YES"}, f)\n'
FILES_PER_DIR = 100
GIT_ENV_EXTRA = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
                 "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
                 "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


def summary(samples):
    if not samples:
        return None
    return {"n": len(samples), "median": statistics.median(samples), "p90": pct(samples, 0.9),
            "min": min(samples), "max": max(samples)}


# ---- fixtures ----------------------------------------------------------------

def make_clone(work, name, nfiles, git_env):
    """A committed repository of nfiles small files, FILES_PER_DIR per
    directory, same bytes every time; cloned with --no-hardlinks."""
    src = os.path.join(work, "src", name)
    os.makedirs(src)
    for i in range(nfiles):
        d = os.path.join(src, f"d{i // FILES_PER_DIR:03d}")
        if i % FILES_PER_DIR == 0:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i:05d}.txt"), "w") as f:
            f.write(f"file {i}\n{hashlib.sha256(str(i).encode()).hexdigest()}\n")
    with open(os.path.join(src, "README.md"), "w") as f:
        f.write(f"bench fixture, {nfiles} files\n")

    def git(*a):
        # No automatic gc: a detached `gc --auto` would still be packing
        # while the source is removed.
        subprocess.run(["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-C", src, *a], check=True,
                       capture_output=True, env=git_env)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "fixture")
    dst = os.path.join(work, "clones", name)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", src, dst], check=True, capture_output=True, env=git_env)
    shutil.rmtree(src)
    return dst


def stage(proxy, config, state, clones):
    argv = [proxy, "stage", "--config", config, "--state", state]
    for repo, path in clones:
        argv += ["--clone", f"{repo}={path}"]
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env={"PATH": PATH})
    if r.returncode != 0:
        raise RuntimeError(f"stage into {state} failed: {r.stderr.strip()}")
    return time.perf_counter() - t0


# ---- serve -------------------------------------------------------------------

class Serve:
    started = []

    def __init__(self, proxy, config, state, rootfs, mode, work):
        self.dir = tempfile.mkdtemp(prefix="sp-e2e-", dir="/tmp")  # short: sun_path
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "probe.sock")
        self.ready = os.path.join(self.dir, "ready")
        self.stderr_path = os.path.join(work, f"serve-{mode}.stderr")
        # Each proxy its own probe id range (docs/runtimes.md): they run side by side.
        probe_ids = str(2_050_000_000 + 64 * len(Serve.started))
        Serve.started.append(mode)
        self.argv = [proxy, "serve", "--config", config, "--state", state, "--rootfs", rootfs,
                     "--socket", self.socket, "--ready-file", self.ready, "--snapshot", mode,
                     "--probe-ids", probe_ids]
        self.proc = None
        self.ready_s = None

    def start(self, timeout=300):
        self._err = open(self.stderr_path, "wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._err, env={"PATH": PATH})
        while time.monotonic() < t0 + timeout:
            if os.path.exists(self.ready) and os.path.getsize(self.ready) > 0:
                self.ready_s = time.monotonic() - t0
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read().strip()

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log(f"serve {self.proc.pid} ignored SIGTERM for 60 s; killing it")
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def ask(client, socket_path, repo):
    t0 = time.perf_counter()
    r = subprocess.run([client, "--repo", repo] + [a for o in OUTCOMES for a in ("--outcome", o)],
                       input=PROBE.encode(), capture_output=True,
                       env={"PATH": PATH, "SEALED_PROBE_SOCKET": socket_path})
    dt = time.perf_counter() - t0
    return dt, r.stdout.decode(errors="replace").strip()


def run_baseline(runc_root, bundle, cid):
    t0 = time.perf_counter()
    r = subprocess.run(["runc", "--root", runc_root, "run", "--bundle", bundle, cid],
                       stdin=subprocess.DEVNULL, capture_output=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        subprocess.run(["runc", "--root", runc_root, "delete", "--force", cid], capture_output=True)
        raise RuntimeError(f"runc run failed ({r.returncode}): {r.stderr.decode(errors='replace').strip()}")
    with open(os.path.join(bundle, "out")) as f:
        if json.load(f) != {"result": "YES"}:
            raise RuntimeError("the baseline probe did not answer YES")
    return dt


def parse_ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def audit_records(state):
    path = os.path.join(state, "audit", "audit.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- main --------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="timed runs per variant and size (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs per variant and size first (default 3)")
    ap.add_argument("--sizes", default="100,10000", help="fixture sizes in files, comma-separated")
    ap.add_argument("--modes", default="overlay,copy", help="serve snapshot modes to time, comma-separated")
    ap.add_argument("--build", default="build", help="the meson build directory")
    ap.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs")
    ap.add_argument("--seed", type=int, default=1, help="seed of the per-round shuffle (default 1)")
    ap.add_argument("--json", metavar="FILE", help="also write every sample and summary here")
    ap.add_argument("--keep-work", action="store_true", help="leave the work directory (debugging)")
    args = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("e2e_latency: needs root (runc, mounts, staging)")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    proxy = os.path.abspath(os.path.join(args.build, "src", "sealed-probe-proxy"))
    client = os.path.abspath(os.path.join(args.build, "src", "sealed-probe"))
    rootfs = os.path.abspath(args.rootfs)
    for p in (proxy, client):
        if not os.access(p, os.X_OK):
            sys.exit(f"e2e_latency: {p} is missing: build first")

    work = tempfile.mkdtemp(prefix="sp-e2e-work-")
    os.chmod(work, 0o711)
    git_env = {"PATH": PATH, "HOME": work, **GIT_ENV_EXTRA}
    states, serves = [], {}
    runc_root = os.path.join(work, "runc")
    result = {"machine": {"kernel": platform.release(), "cpus": os.cpu_count(),
                          "runc": subprocess.run(["runc", "--version"], capture_output=True,
                                                 text=True).stdout.splitlines()[0]},
              "runs": args.runs, "warmup": args.warmup, "sizes": sizes, "modes": modes,
              "samples_ms": {}, "summary": {}, "audit": {}, "unavailable": {}, "stage_s": {}}
    try:
        repos = {n: f"bench/r{n}" for n in sizes}
        clones = []
        for n in sizes:
            log(f"fixture: {n} files")
            clones.append((repos[n], make_clone(work, f"r{n}", n, git_env)))
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"sealedProbes": {"enabled": True, "privateRepos": [repos[n] for n in sizes],
                                        "runtime": "runc", "maxInvocations": 100000}}, f)
        script = os.path.join(work, "probe.py")
        with open(script, "w") as f:
            f.write(PROBE)

        # One state directory per serve (one proxy per state); the baseline's
        # bundles read the seeds of the first.
        mode_state = {}
        for mode in modes:
            st = os.path.join(work, f"state-{mode}")
            states.append(st)
            log(f"stage ({mode})")
            result["stage_s"][mode] = stage(proxy, config, st, clones)
            mode_state[mode] = st
        if not modes:
            st = os.path.join(work, "state-baseline")
            states.append(st)
            stage(proxy, config, st, clones)
            mode_state["baseline"] = st
        base_state = next(iter(mode_state.values()))

        bundles = {}
        for n in sizes:
            b = os.path.join(work, f"bundle-{n}")
            r = subprocess.run([proxy, "bundle", "--dry-run", "--config", config, "--repo", repos[n],
                                "--script", script, "--out", b, "--rootfs", rootfs, "--state", base_state],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, env={"PATH": PATH})
            if r.returncode != 0:
                raise RuntimeError(f"bundle --dry-run failed: {r.stderr.strip()}")
            bundles[n] = b

        for mode in modes:
            s = Serve(proxy, config, mode_state[mode], rootfs, mode, work)
            log(f"serve --snapshot {mode}")
            if not s.start():
                result["unavailable"][mode] = f"serve did not become ready: {s.stderr()[-500:]}"
                log(f"  {mode}: {result['unavailable'][mode]}")
                s.stop()
                continue
            log(f"  ready in {s.ready_s:.2f} s (pid {s.proc.pid})")
            serves[mode] = s
            _, out = ask(client, s.socket, repos[sizes[0]])
            if out != ANSWER:
                reasons = [r.get("reason") for r in audit_records(mode_state[mode])]
                result["unavailable"][mode] = f"answered {out}; audit reason: {reasons[-1] if reasons else None}"
                log(f"  {mode}: {result['unavailable'][mode]}")
                s.stop()
                del serves[mode]

        variants = ["baseline"] + [m for m in modes if m in serves]
        samples = {(v, n): [] for v in variants for n in sizes}
        counter = [0]

        def once(v, n):
            if v == "baseline":
                counter[0] += 1
                return run_baseline(runc_root, bundles[n], f"e2e-{os.getpid()}-{counter[0]}")
            dt, out = ask(client, serves[v].socket, repos[n])
            if out != ANSWER:
                reasons = [r.get("reason") for r in audit_records(mode_state[v])]
                raise RuntimeError(f"{v}: answered {out}; audit reason: {reasons[-1] if reasons else None}")
            return dt

        # Every (variant, size) pair runs once per round, in a fresh shuffled
        # order each round: drift of a shared machine hits every pair alike,
        # and no pair always follows the same other (a copy of 10,000 files
        # leaves the kernel work to do after its answer: freeing the tmpfs).
        pairs = [(v, n) for n in sizes for v in variants]
        rng = random.Random(args.seed)
        log(f"{args.warmup} warmup + {args.runs} timed rounds of {len(pairs)} runs "
            f"({', '.join(variants)} x {', '.join(map(str, sizes))} files)")
        for _ in range(args.warmup):
            for v, n in pairs:
                once(v, n)
        for _ in range(args.runs):
            order = pairs[:]
            rng.shuffle(order)
            for v, n in order:
                samples[(v, n)].append(once(v, n) * 1000)

        # The audit log: the last `runs` answered records per repo are the timed ones.
        for v in variants:
            if v == "baseline":
                continue
            recs = audit_records(mode_state[v])
            for n in sizes:
                mine = [r for r in recs if r["repo"] == repos[n] and r["status"] == "answered"][-args.runs:]
                wall = [r["wall_ms"] for r in mine]
                proxy_ms = [(parse_ts(r["finished"]) - parse_ts(r["received"])) * 1000 for r in mine]
                queue_ms = [(parse_ts(r["started"]) - parse_ts(r["received"])) * 1000 for r in mine]
                result["audit"][f"{v}/{n}"] = {"wall_ms": summary(wall), "proxy_ms": summary(proxy_ms),
                                               "queue_ms": summary(queue_ms),
                                               "snapshot": sorted({r["snapshot"] for r in mine})}

        for (v, n), ms in samples.items():
            result["samples_ms"][f"{v}/{n}"] = ms
            result["summary"][f"{v}/{n}"] = summary(ms)

        # ---- the table ----
        print(f"\nend-to-end latency of a trivial probe, {args.runs} runs after {args.warmup} warmups, "
              f"{os.cpu_count()} cpus, {result['machine']['runc']}, kernel {platform.release()}")
        print(f"{'files':>6}  {'variant':<9} {'median':>8} {'p90':>8} {'min':>8}  {'ratio':>6}  "
              f"{'proxy':>7} {'runc run':>8} {'around':>7} {'client':>7}")
        ratios = {}
        for n in sizes:
            base = result["summary"][f"baseline/{n}"]["median"]
            for v in variants:
                s = result["summary"][f"{v}/{n}"]
                ratio = s["median"] / base
                if v != "baseline":
                    ratios[f"{v}/{n}"] = ratio
                extra = ""
                a = result["audit"].get(f"{v}/{n}")
                if a and a["wall_ms"]:
                    pm, wm = a["proxy_ms"]["median"], a["wall_ms"]["median"]
                    extra = f"{pm:6.1f}  {wm:7.1f}  {pm - wm:6.1f}  {s['median'] - pm:6.1f}"
                print(f"{n:>6}  {v:<9} {s['median']:8.1f} {s['p90']:8.1f} {s['min']:8.1f}  {ratio:5.2f}x  {extra}")
        result["ratios"] = ratios
        print("(ms; ratio = median / baseline median of the same size; from the audit log, medians: proxy = "
              "finished - received,\n runc run = wall_ms, around = proxy - runc run, client = end-to-end - proxy)")
        if len(sizes) >= 2:
            lo, hi = sizes[0], sizes[-1]
            for v in variants:
                g = result["summary"][f"{v}/{hi}"]["median"] / result["summary"][f"{v}/{lo}"]["median"]
                result.setdefault("growth", {})[v] = g
                print(f"{v:<9} median at {hi} files / at {lo} files: {g:.2f}x")
        for mode, why in result["unavailable"].items():
            print(f"{mode}: not measured: {why}")
    finally:
        for s in serves.values():
            s.stop()
        for st in states:
            if os.path.isdir(st):
                r = subprocess.run([proxy, "unstage", "--state", st], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, env={"PATH": PATH})
                if r.returncode != 0:
                    log(f"unstage {st}: {r.stderr.strip()}")
        if os.path.isdir(runc_root):
            for cid in os.listdir(runc_root):
                subprocess.run(["runc", "--root", runc_root, "delete", "--force", cid], capture_output=True)
        if args.keep_work:
            log(f"work directory kept: {work}")
        else:
            # The dry-run bundles are tmpfs mounts of their own.
            for n in sizes:
                subprocess.run(["umount", os.path.join(work, f"bundle-{n}")], capture_output=True)
            subprocess.run(["rm", "-rf", "--one-file-system", work])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
