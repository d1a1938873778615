"""Shared plumbing for the integration tests: TAP output, skips with reasons,
and one cached rootfs per build directory (built by the real builder from the
pinned lock and the fetched debs; see docs/rootfs.md)."""

import fcntl
import hashlib
import os
import subprocess
import sys


class Tap:
    """Named TAP lines; the plan is printed at the end, so a crash mid-way
    leaves a short count that meson reports as a failure."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, detail=""):
        self.n += 1
        if not cond:
            self.failed += 1
        line = f"{'ok' if cond else 'not ok'} {self.n} - {name}"
        print(line, flush=True)
        if detail and not cond:
            for d in str(detail).splitlines()[:40]:
                print(f"# {d}", flush=True)
        return cond

    def finish(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)


def skip_all(reason):
    print(f"1..0 # SKIP {reason}", flush=True)
    sys.exit(0)


def require_root_and(*programs):
    """Skips the whole file, with the reason, when it cannot run here."""
    if os.geteuid() != 0:
        skip_all("needs root: the runtime runs bundles as root (CI runs as root)")
    for prog in programs:
        if not any(os.access(os.path.join(d, prog), os.X_OK) for d in os.environ.get("PATH", "").split(":")):
            skip_all(f"`{prog}` is not installed (scripts/install-deps --test installs it)")


def env_path(name):
    value = os.environ.get(name)
    if not value:
        print(f"Bail out! {name} is not set; run this test through meson", flush=True)
        sys.exit(1)
    return value


def cached_rootfs():
    """The rootfs for this build directory: built once from the pinned lock by
    the real builder, keyed by the lock's and the builder's bytes, so a change
    to either builds a new one.  Concurrent tests wait on one lock."""
    builder = env_path("SP_ROOTFS_BUILDER")
    lock = env_path("SP_ROOTFS_LOCK")
    cache = env_path("SP_ROOTFS_CACHE")
    debs = os.environ.get("SP_DEB_CACHE", "/var/cache/sealed-probe/debs")

    key = hashlib.sha256()
    for path in (lock, builder):
        with open(path, "rb") as f:
            key.update(hashlib.sha256(f.read()).digest())
    os.makedirs(cache, mode=0o700, exist_ok=True)
    target = os.path.join(cache, key.hexdigest()[:16])
    with open(os.path.join(cache, ".lock"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if not os.path.isdir(target):
            r = subprocess.run([builder, "build", "--lock", lock, "--debs", debs, "--out", target],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
            if r.returncode != 0:
                print(f"Bail out! building the rootfs failed (run scripts/rootfs-fetch first?): "
                      f"{r.stderr.strip()}", flush=True)
                sys.exit(1)
    return target


def unmount_under(top):
    """Unmounts everything mounted at or below top, deepest first: a dry-run
    bundle is a tmpfs of its own (docs/bundle.md), which rm -rf cannot
    remove."""
    top = os.path.realpath(top)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == top or point.startswith(top + "/"):
                points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def remove_bundle(path):
    """Removes a dry-run bundle: its tmpfs, then its directory."""
    unmount_under(path)
    subprocess.run(["rm", "-rf", path], capture_output=True)
