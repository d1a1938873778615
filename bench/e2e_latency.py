#!/usr/bin/python3
"""End-to-end probe latency through `sealed-probe-proxy serve`, against the
plain run of the same bundle by the runtime itself.  A benchmark, never a
test: it prints numbers and judges nothing by exit status.
docs/performance.md records what it measured.

For each runtime (--runtimes: runc, gvisor, docker) and each fixture
repository size (small files in a git repository, generated
deterministically), it stages the repository, then times a trivial probe
(writes {"result":"YES"}, never reads the repository):

  baseline  `RUNTIME GLOBAL-FLAGS run --bundle B ID` of a `bundle --dry-run
            --state` bundle made with the same config: the seed is copied into
            repo/ once, beforehand, so each run pays only the sandbox.  The
            binary and its global flags are the dry run's
            runtime-commands.json (the argv before the `create` verb), with
            a --root of the baseline's own: the baseline runs what serve runs
            (runc: namespaces, cgroup, mounts, seccomp, CPython; gvisor: the
            same under runsc --network=none --oci-seccomp --platform=P, with
            its sentry and gofer).
            docker: `docker run --rm` through the docker CLI, of the image
            serve imported, with the flags that give the dry run's create
            body (runtime-commands.json, requests[1].body): the same limits,
            mounts (the dry-run bundle's repo/, probe.py, out), user, seccomp
            profile (written to a file for --security-opt seccomp=FILE) and
            command.  Before timing, one `docker create` of those flags is
            inspected against the body, and every field that differs is
            printed (the CLI has no flag for MaskedPaths, ReadonlyPaths and
            NetworkDisabled, and a foreground `docker run` attaches stdout
            and stderr; the org.sealed-probe.state label is left off so that
            serve's orphan sweep never sees a baseline container).
  overlay   the client `sealed-probe` against `serve --snapshot overlay`,
            its config's "runtime" the runtime's.
  copy      the client against `serve --snapshot copy`.

Rounds are interleaved (one run of each runtime, variant and size per round,
in a shuffled order, seeded), so slow drift of a shared machine hits every
pair alike and no pair always runs right after the same other.  Each serve
gets its own state directory (one proxy per state directory) and its own
probe id range (--probe-ids BASE, then BASE + 1000, ...; each dry-run bundle
too), so that it runs beside other proxies and tests.  From each serve's
audit log it also reads the proxy-side time (finished - received) and the
runtime's own `wall_ms` (from `start` to the sandbox's exit), to split the
client-observed latency into: the sandbox after `start`, the proxy's work
around it (workspace, bundle, snapshot, `create`, `delete`, cleanup), and
client + socket.

--runtimes defaults to runc alone: gvisor needs runsc installed and takes
several times longer per run; docker needs a dockerd (--docker-socket) and
the docker CLI.  The targets printed: runc and gvisor, the serve issue's,
overlay at most 1.3x its own runtime's baseline (medians); docker, overlay
at most 0.8x the `docker run --rm` of the CLI (the proxy talks to the Engine
API itself, and should beat the CLI it replaces).

usage (as root, after scripts/quickstart or with --rootfs):
  bench/e2e_latency.py [--runs 30] [--warmup 3] [--sizes 100,10000]
                       [--modes overlay,copy] [--runtimes runc[,gvisor][,docker]]
                       [--runsc PATH] [--gvisor-platform ptrace]
                       [--docker-socket /var/run/docker.sock] [--docker PATH]
                       [--probe-ids 2102000000] [--build build] [--seed 1]
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
# Overlay's median at most this times its runtime's baseline median: runc
# and gvisor, the serve issue's 1.3x; docker, 0.8x the `docker run --rm` of
# the CLI.
TARGET_RATIO = {"runc": 1.3, "gvisor": 1.3, "docker": 0.8}
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
    """One serve with a socket and ready file of its own; name labels its
    stderr file, serve_args are the bench's own options (timing_channel.py
    uses it too)."""

    def __init__(self, proxy, config, state, rootfs, name, serve_args, probe_ids, runtime_args, work):
        self.dir = tempfile.mkdtemp(prefix="sp-e2e-", dir="/tmp")  # short: sun_path
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "probe.sock")
        self.ready = os.path.join(self.dir, "ready")
        self.stderr_path = os.path.join(work, f"serve-{name}.stderr")
        # Each proxy its own probe id range (docs/runtimes.md): they run side
        # by side, and beside other engineers' proxies and tests.
        # probe_ids None: none given (a serve older than --probe-ids).
        self.argv = [proxy, "serve", "--config", config, "--state", state, "--rootfs", rootfs,
                     "--socket", self.socket, "--ready-file", self.ready,
                     *(["--probe-ids", str(probe_ids)] if probe_ids is not None else []), *serve_args] + runtime_args
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
            # Held answers leave at once on SIGTERM (src/serve/releaser.c).
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log(f"serve {self.proc.pid} ignored SIGTERM for 60 s; killing it")
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def ask(client, socket_path, repo, probe=PROBE):
    t0 = time.perf_counter()
    r = subprocess.run([client, "--repo", repo] + [a for o in OUTCOMES for a in ("--outcome", o)],
                       input=probe.encode(), capture_output=True,
                       env={"PATH": PATH, "SEALED_PROBE_SOCKET": socket_path})
    dt = time.perf_counter() - t0
    return dt, r.stdout.decode(errors="replace").strip()


def runtime_prefix(bundle, root):
    """The binary and global flags serve would exec for this dry-run bundle
    (runtime-commands.json: the argv of `create` before its verb), with
    --root replaced by the baseline's own."""
    with open(os.path.join(bundle, "runtime-commands.json")) as f:
        desc = json.load(f)
    create = next(c["argv"] for c in desc["commands"] if c["step"] == "create")
    prefix, i = [create[0]], 1
    while i < len(create) and create[i].startswith("-"):
        if create[i] == "--root":
            prefix += ["--root", root]
            i += 2
            continue
        prefix.append(create[i])
        i += 1
    if i >= len(create) or create[i] != "create" or "--root" not in prefix:
        raise RuntimeError(f"{bundle}/runtime-commands.json: no `BINARY --root R FLAGS... create` in {create}")
    return desc["runtime"], prefix


def set_probe(bundle, probe):
    """The bundle's probe.py rewritten in place (the runtimes bind-mount
    the file itself) with this script, and its out emptied, its owner
    kept: only this run's answer counts."""
    if probe is not None:
        with open(os.path.join(bundle, "probe.py"), "r+") as f:
            f.truncate()
            f.write(probe)
    with open(os.path.join(bundle, "out"), "r+") as f:
        f.truncate()


def run_baseline(prefix, bundle, cid, probe=None):
    """One `run` of the dry-run bundle: probe None keeps the script it has."""
    out = os.path.join(bundle, "out")
    set_probe(bundle, probe)
    t0 = time.perf_counter()
    r = subprocess.run(prefix + ["run", "--bundle", bundle, cid], stdin=subprocess.DEVNULL, capture_output=True,
                       env={"PATH": PATH})
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        subprocess.run(prefix + ["delete", "--force", cid], capture_output=True, env={"PATH": PATH})
        raise RuntimeError(f"{' '.join(prefix)} run failed ({r.returncode}): "
                           f"{r.stderr.decode(errors='replace').strip()[-2000:]}")
    with open(out) as f:
        if json.load(f) != {"result": "YES"}:
            raise RuntimeError("the baseline probe did not answer YES")
    return dt


# ---- docker ------------------------------------------------------------------

# The create body's fields the CLI has no flag for: the daemon's default
# stands.  NetworkDisabled is the one that costs time: without it, dockerd
# sets up a libnetwork sandbox even for `--network none` and adds a prestart
# hook that re-executes dockerd (libnetwork-setkey) at every start
# (docs/performance.md, "Under Docker").
DOCKER_NO_FLAG = ("NetworkDisabled", "HostConfig.MaskedPaths", "HostConfig.ReadonlyPaths")
DOCKER_STATE_LABEL = "org.sealed-probe.state"


def docker_create_body(bundle):
    with open(os.path.join(bundle, "runtime-commands.json")) as f:
        desc = json.load(f)
    if desc.get("runtime") != "docker":
        raise RuntimeError(f"{bundle}/runtime-commands.json: runtime `{desc.get('runtime')}`, not `docker`")
    create = desc["requests"][1]
    if create.get("step") != "create" or "body" not in create:
        raise RuntimeError(f"{bundle}/runtime-commands.json: requests[1] is not the create with its body")
    return desc["image"], create["body"]


def docker_cli_flags(body, seccomp_file):
    """`docker run` flags that give the create body: every field is mapped
    or named in DOCKER_NO_FLAG; an unknown field or value is an error, so
    that the baseline never silently runs something other than serve.
    Returns (flags, image, cmd).  Writes the seccomp profile to
    seccomp_file."""
    def want(cond, what):
        if not cond:
            raise RuntimeError(f"docker baseline: the create body's {what} has no CLI flag here")

    top = dict(body)
    hc = dict(top.pop("HostConfig"))
    flags = []
    image = top.pop("Image")
    cmd = top.pop("Cmd")
    want(top.pop("Entrypoint") == [], "Entrypoint")
    flags += ["--entrypoint="]
    flags += ["--workdir", top.pop("WorkingDir")]
    for e in top.pop("Env"):
        flags += ["--env", e]
    flags += ["--user", top.pop("User"), "--hostname", top.pop("Hostname"), "--domainname", top.pop("Domainname")]
    want(top.pop("NetworkDisabled") is True, "NetworkDisabled")  # DOCKER_NO_FLAG: --network none below
    for k in ("AttachStdin", "AttachStdout", "AttachStderr", "Tty"):
        # `docker run` in the foreground attaches stdout and stderr (the
        # probe writes neither): that is how the CLI waits.
        want(top.pop(k) is False, k)
    # serve attaches the container's stdin and closes it before a cold
    # start (the probe reads an empty pipe at its end): `--interactive` with
    # the CLI's own stdin /dev/null does the same.
    want(top.pop("OpenStdin") is True and top.pop("StdinOnce") is True, "OpenStdin and StdinOnce")
    flags += ["--interactive"]
    for k, v in top.pop("Labels").items():
        if k != DOCKER_STATE_LABEL:
            flags += ["--label", f"{k}={v}"]
    want(not top, f"{sorted(top)}")

    want(hc.pop("NetworkMode") == "none", "NetworkMode")
    flags += ["--network", "none"]
    want(hc.pop("ReadonlyRootfs") is True, "ReadonlyRootfs")
    flags += ["--read-only"]
    for c in hc.pop("CapDrop"):
        flags += ["--cap-drop", c]
    flags += ["--runtime", hc.pop("Runtime"), "--ipc", hc.pop("IpcMode"), "--cgroupns", hc.pop("CgroupnsMode")]
    log_config = hc.pop("LogConfig")
    want(list(log_config) == ["Type"], "LogConfig")
    flags += ["--log-driver", log_config["Type"]]
    want(hc.pop("Privileged") is False, "Privileged")
    flags += ["--oom-score-adj", str(hc.pop("OomScoreAdj"))]
    for u in hc.pop("Ulimits"):
        flags += ["--ulimit", f"{u['Name']}={u['Soft']}:{u['Hard']}"]
    flags += ["--memory", f"{hc.pop('Memory')}b", "--memory-swap", f"{hc.pop('MemorySwap')}b"]
    nano = hc.pop("NanoCpus")
    flags += ["--cpus", f"{nano // 1_000_000_000}.{nano % 1_000_000_000:09d}".rstrip("0").rstrip(".")]
    flags += ["--pids-limit", str(hc.pop("PidsLimit")), "--cgroup-parent", hc.pop("CgroupParent")]
    hc.pop("MaskedPaths")  # DOCKER_NO_FLAG
    hc.pop("ReadonlyPaths")  # DOCKER_NO_FLAG
    for opt in hc.pop("SecurityOpt"):
        if opt.startswith("seccomp="):
            with open(seccomp_file, "w") as f:
                f.write(opt[len("seccomp="):])
            flags += ["--security-opt", f"seccomp={seccomp_file}"]
        else:
            want(opt.startswith("no-new-privileges"), f"SecurityOpt `{opt[:40]}`")
            flags += ["--security-opt", opt]
    for dest, opts in hc.pop("Tmpfs").items():
        flags += ["--tmpfs", f"{dest}:{opts}"]
    for m in hc.pop("Mounts"):
        want(set(m) == {"Type", "Source", "Target", "ReadOnly"} and m["Type"] == "bind", "Mounts[]")
        for part in (m["Source"], m["Target"]):
            want("," not in part and "=" not in part, "a mount path with , or =")
        flags += ["--mount", f"type=bind,source={m['Source']},target={m['Target']}"
                  + (",readonly" if m["ReadOnly"] else "")]
    want(not hc, f"HostConfig {sorted(hc)}")
    # Never a pull: the image is the rootfs serve imported.
    flags += ["--pull", "never"]
    return flags, image, cmd


def docker_json_covers(want, have):
    """The backend's docker_json_equal: every member of want in have, equal;
    a false that have leaves out is false."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return False
        return all(docker_json_covers(v, have.get(k)) or (v is False and k not in have) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(
            docker_json_covers(a, b) for a, b in zip(want, have))
    return want == have and type(want) is type(have)


def docker_compare(cli, env, flags, image, cmd, body, name):
    """`docker create` of the baseline's flags, inspected against the body
    field by field (the fields serve's backend checks after its first
    create).  Returns the fields that differ, each with the daemon's value."""
    r = subprocess.run([cli, "create", "--rm", "--name", name] + flags + [image] + cmd, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"docker create of the baseline's flags failed: {r.stderr.strip()[-1000:]}")
    try:
        r2 = subprocess.run([cli, "inspect", name], capture_output=True, text=True, env=env, check=True)
        got = json.loads(r2.stdout)[0]
    finally:
        subprocess.run([cli, "rm", "-f", name], capture_output=True, env=env)
    diffs = {}
    for key, want in body.items():
        if key == "HostConfig":
            for k, w in want.items():
                if not docker_json_covers(w, got["HostConfig"].get(k)):
                    diffs[f"HostConfig.{k}"] = got["HostConfig"].get(k)
            continue
        have = got["Config"].get(key)
        if key == "Labels":
            want = {k: v for k, v in want.items() if k != DOCKER_STATE_LABEL}
        if key == "Entrypoint" and want == [] and have is None:
            continue  # `--entrypoint=`: none, as []
        if key == "Env" and isinstance(have, list) and sorted(want) == sorted(have):
            continue  # the CLI (28) sends --env in an order of its own; the daemon keeps what it gets
        if not docker_json_covers(want, have) and not (want is False and have is None):
            diffs[key] = have
    return diffs


def run_docker_baseline(cli, env, flags, image, cmd, bundle, name, probe=None):
    out = os.path.join(bundle, "out")
    set_probe(bundle, probe)
    t0 = time.perf_counter()
    r = subprocess.run([cli, "run", "--rm", "--name", name] + flags + [image] + cmd, stdin=subprocess.DEVNULL,
                       capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        subprocess.run([cli, "rm", "-f", name], capture_output=True, env=env)
        raise RuntimeError(f"docker run failed ({r.returncode}): {r.stderr.decode(errors='replace').strip()[-2000:]}")
    with open(out) as f:
        if json.load(f) != {"result": "YES"}:
            raise RuntimeError("the docker baseline probe did not answer YES")
    return dt


def parse_ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def audit_records(state):
    path = os.path.join(state, "audit", "audit.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- the harness: what bench/e2e_latency.py and bench/realistic.py share -------

RUNTIMES = ("runc", "gvisor", "docker")
PROBE_ID_STRIDE = 1000  # between the ranges of two serves (or dry-run bundles); a range is 34 ids


def version_line(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env={"PATH": PATH})
        return r.stdout.splitlines()[0] if r.stdout else None
    except OSError:
        return None


def add_harness_arguments(ap, probe_ids):
    """The options Harness reads."""
    ap.add_argument("--runsc", metavar="PATH", help="runsc binary for gvisor (default: serve's own search)")
    ap.add_argument("--gvisor-platform", default="ptrace", help="gVisor platform (default ptrace)")
    ap.add_argument("--docker-socket", metavar="PATH", default="/var/run/docker.sock",
                    help="the dockerd socket for docker: serve's --docker-socket and the CLI's DOCKER_HOST "
                         "(default /var/run/docker.sock)")
    ap.add_argument("--docker", metavar="PATH", help="the docker CLI for docker's baseline (default: from PATH)")
    ap.add_argument("--probe-ids", type=int, default=probe_ids,
                    help=f"first probe id range; each serve and dry-run bundle gets the next, "
                         f"{PROBE_ID_STRIDE} apart (default {probe_ids})")
    ap.add_argument("--build", default="build", help="the meson build directory")
    ap.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs")
    ap.add_argument("--seed", type=int, default=1, help="seed of the per-round shuffle (default 1)")
    ap.add_argument("--json", metavar="FILE", help="also write every sample and summary here")
    ap.add_argument("--keep-work", action="store_true", help="leave the work directory (debugging)")


class Harness:
    """What a benchmark run sets up, and close() takes down: its work
    directory (fixture clones, configs), state directories (each staged, and
    unstaged, by the proxy given), serves, dry-run bundles (tmpfs mounts),
    the baselines' runtime roots and docker containers.  tag names the
    program in messages and the baseline's container names."""

    def __init__(self, args, runtimes, tag):
        self.tag = tag
        if os.geteuid() != 0:
            sys.exit(f"{tag}: needs root (runtimes, mounts, staging)")
        for rt in runtimes:
            if rt not in RUNTIMES:
                sys.exit(f"{tag}: --runtimes: `{rt}` is not one of {', '.join(RUNTIMES)}")
        self.runtimes = runtimes
        self.proxy = os.path.abspath(os.path.join(args.build, "src", "sealed-probe-proxy"))
        self.client = os.path.abspath(os.path.join(args.build, "src", "sealed-probe"))
        self.rootfs = os.path.abspath(args.rootfs)
        for p in (self.proxy, self.client):
            if not os.access(p, os.X_OK):
                sys.exit(f"{tag}: {p} is missing: build first")
        # The options serve and bundle --dry-run take for each runtime.
        self.runtime_args = {"runc": [], "gvisor": ["--gvisor-platform", args.gvisor_platform],
                             "docker": ["--docker-socket", os.path.abspath(args.docker_socket)]}
        if args.runsc:
            self.runtime_args["gvisor"] += ["--runsc", os.path.abspath(args.runsc)]
        self.docker_cli = None
        if "docker" in runtimes:
            self.docker_cli = os.path.abspath(args.docker) if args.docker else shutil.which("docker", path=PATH)
            if self.docker_cli is None or not os.access(self.docker_cli, os.X_OK):
                sys.exit(f"{tag}: docker: no docker CLI (--docker PATH)")
            if not os.path.exists(args.docker_socket):
                sys.exit(f"{tag}: docker: {args.docker_socket} does not exist (--docker-socket)")
        self.next_ids = args.probe_ids
        self.keep_work = args.keep_work
        self.machine = {"kernel": platform.release(), "cpus": os.cpu_count(),
                        "runc": version_line(["runc", "--version"])}
        if "gvisor" in runtimes:
            self.machine["runsc"] = version_line([args.runsc or "runsc", "--version"])
            self.machine["gvisor_platform"] = args.gvisor_platform
        self.states, self.serves, self.bundles, self.prefixes, self.dockers = [], {}, {}, {}, {}
        self.probe_ids_used, self.stage_s, self.unavailable = {}, {}, {}
        self.counter = 0
        self.work = tempfile.mkdtemp(prefix=f"sp-{tag}-work-")
        os.chmod(self.work, 0o711)
        self.git_env = {"PATH": PATH, "HOME": self.work, **GIT_ENV_EXTRA}
        # The CLI's own environment: the daemon of --docker-socket, an empty
        # configuration directory of its own (no user config, no context).
        self.docker_env = {"PATH": PATH, "HOME": self.work, "DOCKER_CONFIG": os.path.join(self.work, "docker-config"),
                           "DOCKER_HOST": "unix://" + os.path.abspath(args.docker_socket)}
        if "docker" in runtimes:
            os.makedirs(self.docker_env["DOCKER_CONFIG"])
            r = subprocess.run([self.docker_cli, "version", "--format", "dockerd {{.Server.Version}} (API "
                                "{{.Server.APIVersion}}), docker CLI {{.Client.Version}}"],
                               capture_output=True, text=True, env=self.docker_env)
            if r.returncode != 0:
                shutil.rmtree(self.work)
                sys.exit(f"{tag}: docker: the daemon at {args.docker_socket} does not answer: {r.stderr.strip()}")
            self.machine["docker"] = r.stdout.strip()

    def take_ids(self, key):
        """The next probe id range, recorded under key."""
        base = self.next_ids
        self.next_ids += PROBE_ID_STRIDE
        self.probe_ids_used[key] = base
        return base

    def fixtures(self, sizes):
        """{size: repository name} and the [(name, clone)] to stage."""
        repos = {n: f"bench/r{n}" for n in sizes}
        clones = []
        for n in sizes:
            log(f"fixture: {n} files")
            t0 = time.monotonic()
            clones.append((repos[n], make_clone(self.work, f"r{n}", n, self.git_env)))
            log(f"  made in {time.monotonic() - t0:.1f} s")
        return repos, clones

    def config(self, name, rt, repos):
        path = os.path.join(self.work, f"config-{name}.json")
        with open(path, "w") as f:
            json.dump({"sealedProbes": {"enabled": True, "privateRepos": list(repos), "runtime": rt,
                                        "maxInvocations": 100000}}, f)
        return path

    def stage(self, key, config, clones, proxy=None):
        """A state directory of its own for key, staged (and, in close(),
        unstaged) by proxy, this build's by default."""
        proxy = proxy or self.proxy
        st = os.path.join(self.work, f"state-{key.replace('/', '-')}")
        self.states.append((proxy, st))
        log(f"stage {key}")
        self.stage_s[key] = stage(proxy, config, st, clones)
        log(f"  staged in {self.stage_s[key]:.1f} s")
        return st

    def make_baseline(self, rt, key, config, repo, script, state):
        """A `bundle --dry-run` bundle of repo and script, made with config
        from the seeds in state (its repo/ a copy of the seed), and what
        runs it: the runtime's binary and global flags, or the docker CLI's
        flags.  Returns the baseline's command line, to print."""
        b = os.path.join(self.work, f"bundle-{key.replace('/', '-')}")
        ids = self.take_ids(f"{key}/baseline")
        r = subprocess.run([self.proxy, "bundle", "--dry-run", "--config", config, "--repo", repo,
                            "--script", script, "--out", b, "--rootfs", self.rootfs, "--state", state,
                            "--probe-ids", str(ids)] + self.runtime_args[rt],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, env={"PATH": PATH})
        if r.returncode != 0:
            raise RuntimeError(f"bundle --dry-run ({key}) failed: {r.stderr.strip()}")
        self.bundles[key] = b
        if rt == "docker":
            image, body = docker_create_body(b)
            flags, image2, cmd = docker_cli_flags(body, os.path.join(self.work, f"seccomp-{key.replace('/', '-')}.json"))
            if image2 != image:
                raise RuntimeError(f"{b}/runtime-commands.json: image `{image}`, create body `{image2}`")
            self.dockers[key] = (flags, image, cmd, body)
            return f"docker run --rm --name ID {' '.join(flags)} {image} {' '.join(cmd)}"
        described, self.prefixes[key] = runtime_prefix(b, os.path.join(self.work, f"root-{rt}"))
        if described != rt:
            raise RuntimeError(f"{b}/runtime-commands.json: runtime `{described}`, not `{rt}`")
        return f"{' '.join(self.prefixes[key])} run --bundle B ID"

    def check_docker_baseline(self, key):
        """Docker's baseline runs the image serve imported (use_rootfs):
        after a docker serve is ready, it is there.  One `docker create` of
        the baseline's flags, inspected against the create body, names what
        differs.  Returns the differences, or None (and says why in
        unavailable) when the image is not there."""
        flags, image, cmd, body = self.dockers[key]
        r = subprocess.run([self.docker_cli, "image", "inspect", image], capture_output=True, text=True,
                           env=self.docker_env)
        if r.returncode != 0:
            self.unavailable[f"{key}/baseline"] = (f"image {image} is not in the daemon (no docker serve became "
                                                   f"ready to import it)")
            log(f"  {key}/baseline: {self.unavailable[f'{key}/baseline']}")
            return None
        diffs = docker_compare(self.docker_cli, self.docker_env, flags, image, cmd, body,
                               f"{self.tag}-{os.getpid()}-cmp-{key.replace('/', '-')}")
        expected = set(DOCKER_NO_FLAG) | {"AttachStdout", "AttachStderr"}
        log(f"  docker baseline ({key}) differs from the create body in: "
            f"{', '.join(sorted(diffs)) or 'nothing'} (no CLI flag for {', '.join(DOCKER_NO_FLAG)}; "
            f"a foreground `docker run` attaches stdout and stderr)")
        if set(diffs) - expected:
            log(f"  docker baseline: UNEXPECTED differences: "
                f"{json.dumps({k: diffs[k] for k in sorted(set(diffs) - expected)})[:2000]}")
        return diffs

    def run_baseline(self, key, probe=None):
        """One timed run of key's baseline, in seconds; probe None keeps the
        bundle's script, else it replaces it first (untimed)."""
        self.counter += 1
        cid = f"{self.tag}-{os.getpid()}-{self.counter}"
        if key in self.dockers:
            flags, image, cmd, _ = self.dockers[key]
            return run_docker_baseline(self.docker_cli, self.docker_env, flags, image, cmd, self.bundles[key],
                                       cid, probe)
        return run_baseline(self.prefixes[key], self.bundles[key], cid, probe)

    def start_serve(self, key, rt, config, state, serve_args, repo, proxy=None, client=None, rootfs=None,
                    probe_ids=True):
        """A serve for key on state, asked once (repo, the trivial probe)
        before it counts as up.  Returns it, or None with the reason in
        unavailable.  probe_ids False: no --probe-ids (an older serve)."""
        ids = self.take_ids(key) if probe_ids else None
        s = Serve(proxy or self.proxy, config, state, rootfs or self.rootfs, key.replace("/", "-"), serve_args,
                  ids, self.runtime_args[rt], self.work)
        log(f"serve {key}: {' '.join(serve_args)}" + (f" --probe-ids {ids}" if ids is not None else ""))
        if not s.start():
            self.unavailable[key] = f"serve did not become ready: {s.stderr()[-500:]}"
            log(f"  {key}: {self.unavailable[key]}")
            s.stop()
            return None
        log(f"  ready in {s.ready_s:.2f} s (pid {s.proc.pid})")
        _, out = ask(client or self.client, s.socket, repo)
        if out != ANSWER:
            reasons = [r.get("reason") for r in audit_records(state)]
            self.unavailable[key] = f"answered {out}; audit reason: {reasons[-1] if reasons else None}"
            log(f"  {key}: {self.unavailable[key]}")
            s.stop()
            return None
        self.serves[key] = s
        return s

    def stop_serve(self, key):
        s = self.serves.pop(key, None)
        if s is not None:
            s.stop()

    def close(self):
        for s in self.serves.values():
            s.stop()
        self.serves = {}
        for proxy, st in self.states:
            if os.path.isdir(st):
                r = subprocess.run([proxy, "unstage", "--state", st], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, env={"PATH": PATH})
                if r.returncode != 0:
                    log(f"unstage {st}: {r.stderr.strip()}")
        roots = {}
        for prefix in self.prefixes.values():
            roots[prefix[prefix.index("--root") + 1]] = prefix
        for root, prefix in roots.items():
            if os.path.isdir(root):
                # runc: a directory per container; runsc: ID_sandbox:ID.state and .lock.
                left = {name.split("_sandbox:")[0].split(".")[0] for name in os.listdir(root)}
                for cid in left:
                    subprocess.run(prefix + ["delete", "--force", cid], capture_output=True, env={"PATH": PATH})
        if self.dockers:
            # A baseline container a failed run left (--rm removes the rest).
            r = subprocess.run([self.docker_cli, "ps", "-aq", "--filter", f"name=^{self.tag}-{os.getpid()}-"],
                               capture_output=True, text=True, env=self.docker_env)
            for cid in r.stdout.split():
                subprocess.run([self.docker_cli, "rm", "-f", cid], capture_output=True, env=self.docker_env)
        if self.keep_work:
            log(f"work directory kept: {self.work}")
        else:
            # The dry-run bundles are tmpfs mounts of their own (gvisor's with
            # its /tmp tmpfs below).
            for b in self.bundles.values():
                subprocess.run(["umount", os.path.join(b, "tmp")], capture_output=True)
                subprocess.run(["umount", b], capture_output=True)
            subprocess.run(["rm", "-rf", "--one-file-system", self.work])


# ---- main --------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="timed runs per variant and size (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs per variant and size first (default 3)")
    ap.add_argument("--sizes", default="100,10000", help="fixture sizes in files, comma-separated")
    ap.add_argument("--modes", default="overlay,copy", help="serve snapshot modes to time, comma-separated")
    ap.add_argument("--runtimes", default="runc",
                    help="runtimes to time, comma-separated: runc, gvisor, docker (default runc alone)")
    add_harness_arguments(ap, 2_102_000_000)
    args = ap.parse_args()

    sizes = [int(x) for x in args.sizes.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    runtimes = [r for r in args.runtimes.split(",") if r]
    h = Harness(args, runtimes, "e2e")
    machine = h.machine
    result = {"machine": machine, "runs": args.runs, "warmup": args.warmup, "sizes": sizes, "modes": modes,
              "runtimes": runtimes, "samples_ms": {}, "summary": {}, "audit": {}, "unavailable": h.unavailable,
              "stage_s": h.stage_s, "probe_ids": h.probe_ids_used}
    try:
        repos, clones = h.fixtures(sizes)
        configs = {rt: h.config(rt, rt, [repos[n] for n in sizes]) for rt in runtimes}
        script = os.path.join(h.work, "probe.py")
        with open(script, "w") as f:
            f.write(PROBE)

        # One state directory per serve (one proxy per state); each
        # runtime's baseline bundles read the seeds of its first.
        state_of = {}
        for rt in runtimes:
            for mode in modes or ["baseline"]:
                state_of[(rt, mode)] = h.stage(f"{rt}/{mode}", configs[rt], clones)

        for rt in runtimes:
            base_state = state_of[(rt, (modes or ["baseline"])[0])]
            for n in sizes:
                line = h.make_baseline(rt, f"{rt}/{n}", configs[rt], repos[n], script, base_state)
            log(f"baseline ({rt}): {line}")

        for rt in runtimes:
            for mode in modes:
                # Immediate release: this bench times the work, not the release.
                h.start_serve(f"{rt}/{mode}", rt, configs[rt], state_of[(rt, mode)],
                              ["--snapshot", mode, "--release", "immediate"], repos[sizes[0]])

        docker_ok = "docker" in runtimes
        if docker_ok:
            for n in sizes:
                diffs = h.check_docker_baseline(f"docker/{n}")
                if diffs is None:
                    result["unavailable"]["docker/baseline"] = result["unavailable"].pop(f"docker/{n}/baseline")
                    docker_ok = False
                    break
                result.setdefault("docker_baseline_differs", {})[str(n)] = diffs
        serves = h.serves
        variants = [(rt, v) for rt in runtimes
                    for v in (["baseline"] if rt != "docker" or docker_ok else []) + [m for m in modes
                                                                                    if f"{rt}/{m}" in serves]]
        samples = {(rt, v, n): [] for rt, v in variants for n in sizes}

        def once(rt, v, n):
            if v == "baseline":
                return h.run_baseline(f"{rt}/{n}")
            dt, out = ask(h.client, serves[f"{rt}/{v}"].socket, repos[n])
            if out != ANSWER:
                reasons = [r.get("reason") for r in audit_records(state_of[(rt, v)])]
                raise RuntimeError(f"{rt}/{v}: answered {out}; audit reason: {reasons[-1] if reasons else None}")
            return dt
        # Every (runtime, variant, size) triple runs once per round, in a
        # fresh shuffled order each round: drift of a shared machine hits
        # every one alike, and none always follows the same other (a copy of
        # 10,000 files leaves the kernel work to do after its answer: freeing
        # the tmpfs).
        triples = [(rt, v, n) for n in sizes for rt, v in variants]
        rng = random.Random(args.seed)
        log(f"{args.warmup} warmup + {args.runs} timed rounds of {len(triples)} runs "
            f"({', '.join(f'{rt}/{v}' for rt, v in variants)} x {', '.join(map(str, sizes))} files)")
        for _ in range(args.warmup):
            for t in triples:
                once(*t)
        for k in range(args.runs):
            order = triples[:]
            rng.shuffle(order)
            for t in order:
                samples[t].append(once(*t) * 1000)
            log(f"  round {k + 1}/{args.runs} done")

        # The audit log: the last `runs` answered records per repo are the timed ones.
        for rt, v in variants:
            if v == "baseline":
                continue
            recs = audit_records(state_of[(rt, v)])
            for n in sizes:
                mine = [r for r in recs if r["repo"] == repos[n] and r["status"] == "answered"][-args.runs:]
                wall = [r["wall_ms"] for r in mine]
                proxy_ms = [(parse_ts(r["finished"]) - parse_ts(r["received"])) * 1000 for r in mine]
                queue_ms = [(parse_ts(r["started"]) - parse_ts(r["received"])) * 1000 for r in mine]
                around = [p - w for p, w in zip(proxy_ms, wall)]
                result["audit"][f"{rt}/{v}/{n}"] = {"wall_ms": summary(wall), "proxy_ms": summary(proxy_ms),
                                                    "around_ms": summary(around), "queue_ms": summary(queue_ms),
                                                    "snapshot": sorted({r["snapshot"] for r in mine})}

        for (rt, v, n), ms in samples.items():
            result["samples_ms"][f"{rt}/{v}/{n}"] = ms
            result["summary"][f"{rt}/{v}/{n}"] = summary(ms)

        # ---- the table ----
        versions = ", ".join(x for x in (machine.get("runc"), machine.get("runsc")) if x)
        if "gvisor" in runtimes:
            versions += f" (--platform={args.gvisor_platform})"
        if "docker" in runtimes:
            versions += f", {machine['docker']}"
        print(f"\nend-to-end latency of a trivial probe, {args.runs} runs after {args.warmup} warmups, "
              f"{os.cpu_count()} cpus, {versions}, kernel {platform.release()}")
        print(f"{'runtime':<7} {'files':>6}  {'variant':<9} {'median':>8} {'p90':>8} {'min':>8}  {'ratio':>6}  "
              f"{'proxy':>7} {'wall':>7} {'around':>7} {'client':>7}")
        ratios = {}
        for rt in runtimes:
            for n in sizes:
                b = result["summary"].get(f"{rt}/baseline/{n}")
                base = b["median"] if b else None
                for r2, v in variants:
                    if r2 != rt:
                        continue
                    s = result["summary"][f"{rt}/{v}/{n}"]
                    ratio = s["median"] / base if base else float("nan")
                    if v != "baseline" and base:
                        ratios[f"{rt}/{v}/{n}"] = ratio
                    extra = ""
                    a = result["audit"].get(f"{rt}/{v}/{n}")
                    if a and a["wall_ms"]:
                        pm, wm = a["proxy_ms"]["median"], a["wall_ms"]["median"]
                        extra = f"{pm:6.1f}  {wm:6.1f}  {pm - wm:6.1f}  {s['median'] - pm:6.1f}"
                    print(f"{rt:<7} {n:>6}  {v:<9} {s['median']:8.1f} {s['p90']:8.1f} {s['min']:8.1f}  "
                          f"{ratio:5.2f}x  {extra}")
        result["ratios"] = ratios
        print("(ms; ratio = median / the same runtime's baseline median of the same size; from the audit log,\n"
              " medians: proxy = finished - received, wall = wall_ms (`start` to the sandbox's exit),\n"
              " around = proxy - wall (workspace, bundle, snapshot, `create`, `delete`, cleanup),\n"
              " client = end-to-end - proxy)")
        if "docker" in runtimes:
            print("(docker: baseline = `docker run --rm` through the CLI; wall = the Engine API's /start until\n"
                  " /wait answers; around = the proxy's work plus create, inspect, remove and its confirming\n"
                  " inspect, each an Engine API call)")
        if len(sizes) >= 2:
            lo, hi = sizes[0], sizes[-1]
            for rt, v in variants:
                g = result["summary"][f"{rt}/{v}/{hi}"]["median"] / result["summary"][f"{rt}/{v}/{lo}"]["median"]
                result.setdefault("growth", {})[f"{rt}/{v}"] = g
                print(f"{rt + '/' + v:<16} median at {hi} files / at {lo} files: {g:.2f}x")
        result["target"] = {}
        for rt in runtimes:
            if f"{rt}/overlay" not in serves:
                continue
            for n in sizes:
                if f"{rt}/overlay/{n}" not in ratios:
                    continue
                ratio = ratios[f"{rt}/overlay/{n}"]
                met = ratio <= TARGET_RATIO[rt]
                result["target"][f"{rt}/overlay/{n}"] = met
                what = "the `docker run --rm` of the CLI" if rt == "docker" else "its baseline"
                print(f"target: {rt} overlay at {n} files is {ratio:.2f}x {what}: "
                      f"{'meets' if met else 'MISSES'} the {TARGET_RATIO[rt]}x target")
        for key, why in result["unavailable"].items():
            print(f"{key}: not measured: {why}")
    finally:
        h.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
