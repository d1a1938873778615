#!/usr/bin/python3
"""How much silent and slow clients delay a valid probe through `serve`
(docs/performance.md).  A benchmark, never a test: it prints numbers and
judges nothing by exit status.

One serve at --concurrency 1.  Rounds alternate two variants of the same
trivial probe (it writes {"result":"YES"}), timed through the client:

  alone   nothing else is connected.
  loaded  first 20 connections that send nothing and 20 that send one byte
          of a valid frame every 2 s are opened (and left open), then the
          probe is asked; the 40 are closed after it answered.

Before the frame reader moved off the slots, each such connection held the
one slot for up to the 10 s frame deadline, so `loaded` took 10 s per
connection ahead of the probe, or got ERROR from a full queue.

usage (as root, after scripts/quickstart or with --rootfs):
  bench/slow_clients.py [--runs 20] [--silent 20] [--slow 20] [--build build]
                        [--rootfs /var/lib/sealed-probe/rootfs] [--json FILE]
"""

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

OUTCOMES = ("YES", "NO", "UNKNOWN")
PROBE = 'import json\nwith open("/probe/out", "w") as f:\n    json.dump({"result": "YES"}, f)\n'
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GIT_ENV = {"PATH": PATH, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@x.invalid"}
DRIP_SECONDS = 2.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


def frame(repo, script):
    def field(tag, value):
        return struct.pack(">BI", tag, len(value)) + value
    body = field(1, repo.encode()) + b"".join(field(2, o.encode()) for o in OUTCOMES) + field(3, script.encode())
    return b"SPRB" + struct.pack(">BBI", 1, 1, len(body)) + body


def ask(client, socket_path, repo):
    t0 = time.perf_counter()
    r = subprocess.run([client, "--repo", repo] + [a for o in OUTCOMES for a in ("--outcome", o)],
                       input=PROBE.encode(), capture_output=True,
                       env={"PATH": PATH, "SEALED_PROBE_SOCKET": socket_path, "SEALED_PROBE_TIMEOUT": "600"})
    return time.perf_counter() - t0, r.stdout.decode(errors="replace").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed rounds of each variant (default 20)")
    ap.add_argument("--silent", type=int, default=20, help="silent connections per loaded round (default 20)")
    ap.add_argument("--slow", type=int, default=20, help="one-byte-every-2-s connections per loaded round")
    ap.add_argument("--build", default="build", help="the meson build directory")
    ap.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs")
    ap.add_argument("--json", metavar="FILE", help="also write every sample here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("slow_clients: needs root (runc, mounts, staging)")
    proxy = os.path.abspath(os.path.join(args.build, "src", "sealed-probe-proxy"))
    client = os.path.abspath(os.path.join(args.build, "src", "sealed-probe"))

    work = tempfile.mkdtemp(prefix="sp-slow-")
    os.chmod(work, 0o755)
    state = os.path.join(work, "state")
    sock = os.path.join(work, "probe.sock")
    ready = os.path.join(work, "ready")
    proc = None
    samples = {"alone": [], "loaded": []}
    try:
        src = os.path.join(work, "src")
        os.makedirs(src)
        with open(os.path.join(src, "README.md"), "w") as f:
            f.write("bench\n")
        for a in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
            subprocess.run(["git", "-C", src, *a], check=True, capture_output=True, env={**GIT_ENV, "HOME": work})
        clone = os.path.join(work, "clone")
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", src, clone], check=True, capture_output=True,
                       env={**GIT_ENV, "HOME": work})
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["bench/slow"], "runtime": "runc",
                                        "maxInvocations": 100000}}, f)
        subprocess.run([proxy, "stage", "--config", config, "--state", state, "--clone", f"bench/slow={clone}"],
                       check=True, capture_output=True, env={"PATH": PATH})
        err = open(os.path.join(work, "serve.stderr"), "wb")
        proc = subprocess.Popen([proxy, "serve", "--config", config, "--state", state, "--rootfs", args.rootfs,
                                 "--socket", sock, "--ready-file", ready, "--concurrency", "1",
                                 "--release", "immediate"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env={"PATH": PATH})
        deadline = time.monotonic() + 300
        while not (os.path.exists(ready) and os.path.getsize(ready) > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("slow_clients: serve did not become ready")
            time.sleep(0.02)
        slow_frame = frame("bench/slow", PROBE)
        for _ in range(2):
            ask(client, sock, "bench/slow")  # warm up
        for i in range(args.runs):
            dt, out = ask(client, sock, "bench/slow")
            samples["alone"].append((dt * 1000, out))
            stop = threading.Event()
            conns = []
            for k in range(args.silent + args.slow):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                conns.append(s)
            drips = []
            for s in conns[args.silent:]:
                def drip(s=s):
                    for b in slow_frame:
                        if stop.wait(DRIP_SECONDS):
                            return
                        try:
                            s.send(bytes([b]))
                        except OSError:
                            return
                th = threading.Thread(target=drip, daemon=True)
                th.start()
                drips.append(th)
            time.sleep(0.2)
            dt, out = ask(client, sock, "bench/slow")
            samples["loaded"].append((dt * 1000, out))
            stop.set()
            for s in conns:
                s.close()
            for th in drips:
                th.join()
            log(f"round {i + 1}: alone {samples['alone'][-1][0]:.1f} ms, loaded {samples['loaded'][-1][0]:.1f} ms")
            time.sleep(0.3)  # the 40 closed connections are refused and audited
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        subprocess.run([proxy, "unstage", "--state", state], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"kernel {platform.release()}, {os.cpu_count()} cpus, --concurrency 1, "
          f"{args.silent} silent + {args.slow} slow connections, {args.runs} rounds (ms)")
    print("variant  answered  median   p90     min     max")
    for k, v in samples.items():
        ms = [t for t, _ in v]
        ok = sum(1 for _, o in v if o == '{"result":"YES"}')
        print(f"{k:8} {ok:3}/{len(v):<4} {statistics.median(ms):7.1f} {pct(ms, 0.9):7.1f} {min(ms):7.1f} "
              f"{max(ms):7.1f}")
    delay = statistics.median(t for t, _ in samples["loaded"]) - statistics.median(t for t, _ in samples["alone"])
    print(f"median delay from the {args.silent + args.slow} connections: {delay:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kernel": platform.release(), "cpus": os.cpu_count(), "samples_ms": samples}, f, indent=1)


if __name__ == "__main__":
    main()
