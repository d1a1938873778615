#!/usr/bin/python3
"""Sandbox start-up cost, the floor under every probe's latency: how long the
rootfs preflight, writing a dry-run bundle, and running a trivial probe in it
under runc take.  A benchmark, never a test: it prints numbers and judges
nothing.  docs/performance.md records what it measured and why it matters.

usage (as root, after scripts/quickstart):
  bench/sandbox_start.py [--runs N] [--rootfs DIR] [--build DIR]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def timed(argv, **kw):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def report(name, samples):
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    print(f"{name:<28} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   min {ms[0]:7.1f} ms   (n={len(ms)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs")
    ap.add_argument("--build", default="build")
    args = ap.parse_args()

    proxy = os.path.join(args.build, "src", "sealed-probe-proxy")
    builder = os.path.join(args.build, "src", "rootfs", "sealed-probe-rootfs")
    work = tempfile.mkdtemp(prefix="sp-bench-")
    # The sandbox's user-namespace root walks down to the bundle (docs/bundle.md).
    os.chmod(work, 0o711)
    try:
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["bench/repo"], "runtime": "runc"}}, f)
        script = os.path.join(work, "probe.py")
        with open(script, "w") as f:
            f.write('import json\nwith open("/probe/out", "w") as f:\n    json.dump({"result": "YES"}, f)\n')

        verify, write, run = [], [], []
        for i in range(args.runs):
            verify.append(timed([builder, "verify", args.rootfs]))
            bundle = os.path.join(work, f"b{i}")
            write.append(timed([proxy, "bundle", "--dry-run", "--config", config, "--repo", "bench/repo",
                                "--script", script, "--out", bundle, "--rootfs", args.rootfs]))
            state = os.path.join(work, "runc")
            run.append(timed(["runc", "--root", state, "run", "--bundle", bundle, f"bench-{i}"]))
            subprocess.run(["runc", "--root", state, "delete", "--force", f"bench-{i}"], capture_output=True)
            with open(os.path.join(bundle, "out")) as f:
                assert json.load(f) == {"result": "YES"}, "the probe did not answer"
            # A dry-run bundle is a tmpfs of its own.
            subprocess.run(["umount", bundle], capture_output=True)
        report("rootfs verify (preflight)", verify)
        report("bundle --dry-run", write)
        report("runc run, trivial probe", run)
    finally:
        for i in range(args.runs):
            subprocess.run(["umount", os.path.join(work, f"b{i}")], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
