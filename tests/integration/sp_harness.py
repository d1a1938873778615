"""Shared plumbing for the integration tests: TAP output, skips with reasons,
the sandbox backend a test runs on (backend(): the test matrix, see
docs/testing.md), and one cached rootfs per build directory (built by the real
builder from the pinned lock and the fetched debs; see docs/rootfs.md)."""

import fcntl
import hashlib
import json
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


def bail_out(reason):
    print(f"Bail out! {reason}", flush=True)
    sys.exit(1)


def ci():
    """CI=true: every backend must run, so what would be a skip is a failure."""
    return os.environ.get("CI") == "true"


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


# ---- the backend matrix ------------------------------------------------------
#
# tests/meson.build registers every sandbox-running integration file once per
# backend of its `sp_backends` list, with SP_BACKEND=<name>.  Each entry here
# is what a test needs to know about one backend; adding a backend is one name
# in that list and one entry here (docs/testing.md).

# Where a runtime binary is looked up: serve's own search path
# (SP_RUNTIME_SEARCH_PATH, docs/runtimes.md), never the caller's PATH.
RUNTIME_SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

BACKENDS = {
    "runc": {
        "runtime": "runc",                    # sealedProbes.runtime
        "binary": "runc",                     # the runtime binary's name
        "option": "--runc",                   # serve's, check's and bundle's option naming it
        "state": "runc",                      # serve's --root for a run: STATE/<state>/<run>
        "processes": ("runc", "runc:[2:INIT]"),  # argv[0] of its host processes
        "kernel": "host",                     # whose kernel the probe talks to (check's "kernel")
        # The global flags before the verb; the harness's fallback when a
        # dry-run bundle has no runtime-commands.json.
        "flags": (),
        # What `--version` prints for a release serve refuses (too old).
        "old_version": "runc version 1.0.0\ncommit: fake\nspec: 1.0.2-dev\n",
    },
    "gvisor": {
        "runtime": "gvisor",
        "binary": "runsc",
        "option": "--runsc",
        "state": "runsc",
        "processes": ("runsc", "runsc-gofer", "runsc-sandbox"),
        "kernel": "gvisor",
        "flags": ("--network=none", "--oci-seccomp", "--platform=ptrace"),
        "old_version": "runsc version 0.0~20200101.0\nspec: 1.0.1-dev\n",
    },
}


def find_runtime(binary):
    """The first executable regular file named binary in RUNTIME_SEARCH_PATH."""
    for d in RUNTIME_SEARCH_PATH.split(":"):
        path = os.path.join(d, binary)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class Backend:
    """The backend this test runs on: its config value, its binary and the
    option naming it, where its state lives, which host processes are its,
    and the command lines a test uses to run a dry-run bundle by hand."""

    def __init__(self, name, binary_path):
        spec = BACKENDS[name]
        self.name = name
        self.runtime = spec["runtime"]
        self.binary_name = spec["binary"]
        self.binary = binary_path
        self.option = spec["option"]
        self.state_subdir = spec["state"]
        self.process_names = tuple(n.encode() for n in spec["processes"])
        self.kernel = spec["kernel"]
        self.flags = tuple(spec["flags"])
        self.old_version = spec["old_version"]

    def __repr__(self):
        return f"Backend({self.name})"

    @property
    def gvisor(self):
        return self.name == "gvisor"

    # ---- state ----
    def run_root(self, state, run):
        """serve's --root for one run: STATE/runc/<run> or STATE/runsc/<run>."""
        return os.path.join(state, self.state_subdir, run or "")

    def container_of(self, name):
        """The container id an entry of a --root directory belongs to: runc
        keeps a directory per id; runsc keeps `<id>_sandbox:<id>.state` and
        `.lock` files."""
        if self.gvisor:
            return name.split("_sandbox:", 1)[0] if "_sandbox:" in name else None
        return name

    def occupy(self, root, cid):
        """Makes `create` of container cid in root fail, as a taken id does;
        returns the path made, which the caller removes."""
        if self.gvisor:
            path = os.path.join(root, f"{cid}_sandbox:{cid}.state")
            with open(path, "w") as f:
                f.write("{}")
            return path
        path = os.path.join(root, cid)
        os.mkdir(path, 0o700)
        return path

    # ---- running a dry-run bundle by hand ----
    def prefix(self, root, bundle=None):
        """argv up to the verb: the binary and its global flags, with root as
        --root.  Taken from the bundle's runtime-commands.json (what serve
        would exec) when there is one, else from the table above."""
        commands = os.path.join(bundle, "runtime-commands.json") if bundle else None
        if commands and os.path.exists(commands):
            with open(commands) as f:
                described = json.load(f)
            if described.get("runtime") != self.runtime:
                raise RuntimeError(f"{commands} is for runtime {described.get('runtime')!r}, not {self.runtime!r}")
            create = next(c["argv"] for c in described["commands"] if c["step"] == "create")
            words = list(create[:create.index("create")])
            out, i = [words[0]], 1
            while i < len(words):
                if words[i] == "--root":
                    i += 2
                    continue
                if words[i].startswith("--root="):
                    i += 1
                    continue
                out.append(words[i])
                i += 1
            return [out[0], "--root", root] + out[1:]
        return [self.binary, "--root", root, *self.flags]

    def run_argv(self, root, bundle, cid):
        return self.prefix(root, bundle) + ["run", "--bundle", bundle, cid]

    def delete_argv(self, root, cid, bundle=None):
        return self.prefix(root, bundle) + ["delete", "--force", cid]

    def kill_argv(self, root, cid, sig="KILL", bundle=None):
        return self.prefix(root, bundle) + ["kill", cid, sig]

    def list_argv(self, root):
        return self.prefix(root) + ["list", "--quiet"]

    def containers(self, root):
        """Container ids in one --root: from `list` and from the directory (a
        half-created container may not list)."""
        ids = set()
        if not os.path.isdir(root):
            return ids
        r = subprocess.run(self.list_argv(root), capture_output=True, text=True)
        ids |= {x for x in r.stdout.split() if x}
        for n in os.listdir(root):
            if self.gvisor:
                cid = self.container_of(n)
                if cid:
                    ids.add(cid)
            elif os.path.isdir(os.path.join(root, n)):
                ids.add(n)
        return ids

    def force_delete(self, root, cid, bundle=None):
        subprocess.run(self.kill_argv(root, cid, bundle=bundle), capture_output=True)
        subprocess.run(self.delete_argv(root, cid, bundle=bundle), capture_output=True)

    def force_delete_all(self, root):
        for cid in self.containers(root):
            self.force_delete(root, cid)

    # ---- host processes ----
    def is_process(self, argv):
        """argv (a list of bytes) is one of this backend's host processes."""
        return bool(argv) and os.path.basename(argv[0]) in self.process_names

    # ---- TAP ----
    def not_applicable(self, tap, name, reason):
        """A named line for an assertion that does not apply here, with why:
        `ok N - NAME # SKIP not applicable on BACKEND: REASON`."""
        tap.n += 1
        print(f"ok {tap.n} - {name} # SKIP not applicable on {self.name}: {reason}", flush=True)


_backend = []


def backend():
    """The backend this test file runs on (SP_BACKEND, set by tests/meson.build).

    Not selected by SP_BACKENDS (a comma list; unset: every backend this build
    has), or its runtime binary missing from RUNTIME_SEARCH_PATH: the whole
    file is a SKIP with the reason, except under CI=true, where either is a
    failure (Bail out!), since CI must run every backend."""
    if _backend:
        return _backend[0]
    name = os.environ.get("SP_BACKEND")
    if not name:
        bail_out("SP_BACKEND is not set; run this test through meson (tests/meson.build sets it)")
    built = [b for b in os.environ.get("SP_BUILD_BACKENDS", name).split(",") if b]
    if name not in BACKENDS:
        bail_out(f"SP_BACKEND={name} is not a backend sp_harness.py knows ({', '.join(sorted(BACKENDS))})")
    selected_env = os.environ.get("SP_BACKENDS")
    selected = built if selected_env is None else [b.strip() for b in selected_env.split(",") if b.strip()]
    unknown = [b for b in selected if b not in built]
    if unknown:
        bail_out(f"SP_BACKENDS names {', '.join(unknown)}, which this build does not have "
                 f"(it has {', '.join(built)})")
    # SP_BACKEND_FIXED: a file that starts no sandbox runs once, whatever
    # SP_BACKENDS selects (tests/meson.build).
    if name not in selected and os.environ.get("SP_BACKEND_FIXED") != "1":
        if ci():
            bail_out(f"backend {name} not selected by SP_BACKENDS={selected_env}: under CI=true every backend "
                     "must run")
        skip_all(f"backend {name} not selected by SP_BACKENDS")
    binary_name = BACKENDS[name]["binary"]
    path = find_runtime(binary_name)
    if path is None:
        why = (f"backend {name}: its runtime binary `{binary_name}` is not installed in {RUNTIME_SEARCH_PATH} "
               "(scripts/install-deps --test installs it)")
        if ci():
            bail_out(why + "; under CI=true a missing runtime is a failure, not a skip")
        skip_all(why)
    _backend.append(Backend(name, path))
    return _backend[0]
