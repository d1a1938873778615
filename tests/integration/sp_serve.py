"""Shared plumbing for the `sealed-probe-proxy serve` integration tests
(test_serve_*.py): fixture clones, configs, staging into fresh state
directories, a serve process that is always stopped, the real client, a raw
v1 frame sender (docs/protocol.md, written here independently of
protocol.c), audit-log readers and leak checks, all on the backend the test
runs on (sp_harness.backend()).  Standard library only."""

import contextlib
import ctypes
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

from sp_harness import backend, cached_rootfs, env_path, remove_bundle, unmount_under

PROXY = env_path("SP_PROXY")
CLIENT = os.environ.get("SP_CLIENT") or os.path.join(os.path.dirname(PROXY), "sealed-probe")
B = backend()

ERROR_LINE = '{"result":"ERROR"}\n'
ERROR_FRAME = b"SPRB\x01\x02\x00\x00\x00\x01\x00"
# The same in wire protocol v2 (docs/protocol.md): status byte 0, no value.
ERROR_FRAME_V2 = b"SPRB\x02\x02\x00\x00\x00\x01\x00"
OUTCOMES = ("YES", "NO", "UNKNOWN")
AUDIT_KEYS = ["id", "run", "received", "peer_uid", "peer_gid", "peer_pid", "started", "finished", "repo", "outcomes", "answer_schema", "script_sha256", "seed_commit",
              "seed_digest", "seed_omitted_submodules", "snapshot", "sandbox", "debited", "budget_remaining", "result", "status", "cause",
              "reason", "launched",
              "exit", "signal", "oom", "timed_out", "wall_ms", "cpu_ms", "peak_memory_bytes",
              "release", "release_ms", "release_overflow", "bits", "content_bits", "timing_bits", "repo_bits"]
RELEASE_MODES = {"bucketed", "fixed", "immediate"}
AUDIT_STATUSES = {"admitted", "answered", "refused", "probe", "timed_out", "runtime", "environment", "internal",
                  "cancelled"}
# The causes serve records (docs/audit.md, "cause"), as values set where
# they happen.
AUDIT_CAUSES = {"none", "frame", "unknown_repository", "bad_request", "queue_full", "queue_wait", "too_many_unread",
                "shutdown", "stopped", "client_gone", "halted", "no_seed", "sealed", "seed_gone", "budget_spent",
                "bit_budget_spent", "run_bit_budget_spent", "ledger_write", "audit_write", "environment", "workspace", "bundle", "snapshot",
                "runtime", "timeout", "probe_signal", "probe_exit", "probe_output", "cleanup", "release_overflow"}
RUN_ID = re.compile(r"^[0-9a-f]{12}$")
RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def answer(outcome):
    return '{"result":"%s"}\n' % outcome


class Work:
    """One temp directory per test file, and everything made under it: state
    directories (unstaged at the end), network namespaces, veths.  close()
    removes all of it, and is safe to call after any failure."""

    def __init__(self, prefix):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.dir, 0o711)
        self.states = []
        self.netns = []
        self.links = []
        self.counter = 0
        self.git_env = {"PATH": "/usr/bin:/bin", "HOME": self.dir, "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
        self._rootfs = None

    @property
    def rootfs(self):
        if self._rootfs is None:
            self._rootfs = cached_rootfs()
        return self._rootfs

    def path(self, name):
        self.counter += 1
        return os.path.join(self.dir, f"{name}-{self.counter}")

    def git(self, repo, *args):
        return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                              env=self.git_env).stdout.strip()

    def make_clone(self, name, files, symlinks=None):
        """A committed git repository holding files {rel: bytes} and symlinks
        {rel: target}, cloned with --no-hardlinks so that stage accepts it."""
        src = os.path.join(self.dir, "src", name)
        os.makedirs(src)
        self.git(src, "init", "-q", "-b", "main")
        for rel, data in files.items():
            full = os.path.join(src, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        for rel, target in (symlinks or {}).items():
            full = os.path.join(src, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            os.symlink(target, full)
        self.git(src, "add", "-A")
        self.git(src, "commit", "-q", "-m", "fixture")
        dst = os.path.join(self.dir, "clones", name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", src, dst], check=True, capture_output=True,
                       env=self.git_env)
        return dst

    def write_config(self, repos, **extra):
        path = self.path("config") + ".json"
        block = {"enabled": True, "privateRepos": list(repos), "runtime": B.runtime}
        block.update(extra)
        with open(path, "w") as f:
            json.dump({"sealedProbes": block}, f)
        return path

    def new_state(self):
        path = self.path("state")
        self.states.append(path)
        return path

    def stage(self, state, config, clones):
        argv = [PROXY, "stage", "--config", config, "--state", state]
        for repo, path in clones:
            argv += ["--clone", f"{repo}={path}"]
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                              env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")})

    def staged_state(self, config, clones):
        """A fresh state directory with every clone staged; raises on failure."""
        state = self.new_state()
        r = self.stage(state, config, clones)
        if r.returncode != 0:
            raise RuntimeError(f"stage failed: {r.stderr.strip()}")
        return state

    def add_netns(self, name):
        self.netns.append(name)

    def add_link(self, name):
        self.links.append(name)

    def close(self):
        for name in self.links:
            subprocess.run(["ip", "link", "del", name], capture_output=True)
        for name in self.netns:
            subprocess.run(["ip", "netns", "pids", name], capture_output=True)
            pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        for s in self.states:
            if os.path.isdir(s):
                subprocess.run([PROXY, "unstage", "--state", s], capture_output=True, stdin=subprocess.DEVNULL)
                B.force_delete_state(s)
        for s in self.states:
            for line in mounts_under(s, "/proc/self/mountinfo")[::-1]:
                subprocess.run(["umount", "-l", line], capture_output=True)
        unmount_under(self.dir)  # dry-run bundles
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir])


def staged(state):
    with open(os.path.join(state, "staged.json")) as f:
        return json.load(f)


def seed_record(state, repo):
    return next(s for s in staged(state)["seeds"] if s["repo"] == repo)


def seed_dir(state, repo):
    record = staged(state)
    return os.path.join(state, "seeds", record["run"], str(seed_record(state, repo)["index"]))


def tree_fingerprint(top):
    """Every entry's relative path, type, mode, owner, and content sha256 (or
    link target): equal fingerprints mean an unchanged tree."""
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if os.path.islink(p):
                what = "link:" + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            else:
                what = "dir"
            out.append((os.path.relpath(p, top), st.st_mode, st.st_uid, st.st_gid, what))
    return sorted(out)


def dry_run_bundle_ok(work, state, config, repo):
    """`bundle --dry-run --state` re-verifies the seed's digest before it
    snapshots it: success means the seed still matches staged.json."""
    script = work.path("dry") + ".py"
    with open(script, "w") as f:
        f.write("print(1)\n")
    out = work.path("bundle")
    r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", config, "--repo", repo, "--script", script,
                        "--out", out, "--rootfs", work.rootfs, "--state", state, *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    remove_bundle(out)
    subprocess.run(["rm", "-rf", script])
    return r


# ---- the serve process -------------------------------------------------------

class ServeFailed(Exception):
    pass


class Serve:
    """One `sealed-probe-proxy serve`.  start() waits for the ready file
    (bounded) or for the process to exit; stop() sends SIGTERM and waits
    (bounded), then SIGKILLs.  Output goes to files, so that a test can read
    serve's stdout and stderr after it ended."""

    def __init__(self, work, config, state, snapshot=None, concurrency=None, queue=None, queue_wait=None,
                 scratch_size=None, binary=None, rootfs=None, socket_group=None, env=None, extra=(),
                 socket_in_new_dir=True, socket_path=None, ready_path=None, wrap=(), probe_id_base=None):
        self.work = work
        self.config = config
        self.state = state
        self.dir = tempfile.mkdtemp(prefix="sp-srv-")  # short: sun_path holds 107 bytes
        os.chmod(self.dir, 0o755)
        self.sockdir = os.path.join(self.dir, "sock") if socket_in_new_dir else self.dir
        self.socket = socket_path or os.path.join(self.sockdir, "probe.sock")
        self.ready_file = ready_path or os.path.join(self.dir, "ready")
        self.stdout_path = os.path.join(self.dir, "stdout")
        self.stderr_path = os.path.join(self.dir, "stderr")
        # A range of its own, or one given (a restart reusing its predecessor's).
        self.probe_id_base = probe_id_base if probe_id_base is not None else int(probe_ids())
        # wrap: a command that execs the rest (unshare, say), so the pid stays serve's.
        # binary: the runtime binary, given with the backend's option (--runc, --runsc);
        # for docker the daemon's socket (--docker-socket), by default the tests' own.
        argv = list(wrap) + [PROXY, "serve", "--config", config, "--state", state,
                "--rootfs", rootfs or work.rootfs, "--socket", self.socket, "--ready-file", self.ready_file,
                "--probe-ids", str(self.probe_id_base)]
        for flag, value in (("--snapshot", snapshot), ("--concurrency", concurrency), ("--queue", queue),
                            ("--queue-wait", queue_wait), ("--scratch-size", scratch_size),
                            (B.option, binary if binary is not None else B.option_default),
                            ("--socket-group", socket_group)):
            if value is not None:
                argv += [flag, str(value)]
        # Immediate release, unless the test names a mode: the suite's
        # probes would otherwise each wait for their bucket (test_release.py
        # is where the release modes are tested, on every backend).
        release = [] if "--release" in extra else ["--release", "immediate"]
        if "--pool" not in extra and pool_size() is not None:
            release += ["--pool", str(pool_size())]
        self.argv = (argv + list(extra) + release + [a for a in B.extra_args if "--sbx-template" not in extra]
                     + ([] if "--run-dir" in extra else ["--run-dir", B.run_dir]))
        self.env = env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        self.proc = None
        self.run = None
        self.returncode = None
        self.ready_seconds = None

    def start(self, ready_timeout=60):
        roots = os.path.join(self.state, B.state_subdir)
        runs_before = set(os.listdir(roots)) if os.path.isdir(roots) else set()
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     env=self.env, cwd=self.dir, umask=serve_umask(),
                                     preexec_fn=self.signals_at_start)
        deadline = t0 + ready_timeout
        while time.monotonic() < deadline:
            # Ready means this process's pid in the file: a stale one (a
            # kill -9 leaves it) names another.
            if self.ready_content() == f"{self.proc.pid}\n":
                self.ready_seconds = time.monotonic() - t0
                break
            if self.proc.poll() is not None:
                self.returncode = self.proc.returncode
                return False
            time.sleep(0.05)
        else:
            return False
        new = set(os.listdir(roots)) - runs_before if os.path.isdir(roots) else set()
        if len(new) == 1:
            self.run = new.pop()
        return True

    # serve keeps SIGHUP, SIGINT and SIGQUIT ignored when they were at its
    # start (nohup; a background job of a script, as a CI runner may start
    # the suite): every serve of the suite starts with them at their
    # defaults, as from a terminal, unless a test says otherwise.
    ignored_at_start = ()

    def signals_at_start(self):
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN if sig in self.ignored_at_start else signal.SIG_DFL)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Returns serve's exit status (None if it had to be SIGKILLed)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.returncode = None
                self._close_files()
                return None
        self.returncode = self.proc.returncode
        self._close_files()
        return self.returncode

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.returncode = self.proc.returncode
        self._close_files()

    def _close_files(self):
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f and not f.closed:
                f.close()

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def ready_content(self):
        try:
            with open(self.ready_file) as f:
                return f.read()
        except OSError:
            return None

    def cleanup(self):
        """Stop (SIGTERM, then SIGKILL) and remove the temp dir; never raises."""
        with contextlib.suppress(Exception):
            if self.alive():
                self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- talking to it ----
    def client(self, script, repo, outcomes=OUTCOMES, timeout=120, cwd=None, env_extra=None, schema=None):
        """Runs the real client, with outcomes or, when schema is given, that
        answer schema's text inline; returns the CompletedProcess (bytes)."""
        env = {"SEALED_PROBE_SOCKET": self.socket, "SEALED_PROBE_TIMEOUT": str(timeout)}
        env.update(env_extra or {})
        argv = [CLIENT, "--repo", repo]
        if schema is not None:
            argv += ["--answer-schema-json", schema]
        else:
            for o in outcomes:
                argv += ["--outcome", o]
        data = script.encode() if isinstance(script, str) else script
        return subprocess.run(argv, input=data, capture_output=True, env=env, timeout=timeout + 30,
                              cwd=cwd or self.dir)

    def probe(self, script, repo, outcomes=OUTCOMES, **kw):
        """The client's stdout, as text."""
        return self.client(script, repo, outcomes, **kw).stdout.decode("utf-8", "replace")

    def raw(self, data, shutdown=True, timeout=60):
        return send_raw(self.socket, data, shutdown=shutdown, timeout=timeout)


@contextlib.contextmanager
def serving(work, config, state, **kw):
    """Starts serve and always stops it; raises ServeFailed when it does not
    become ready (with its stderr)."""
    srv = Serve(work, config, state, **kw)
    try:
        if not srv.start():
            srv.stop()
            raise ServeFailed(f"serve did not become ready (exit {srv.returncode}): {srv.stderr().strip()[-800:]}")
        yield srv
    finally:
        srv.cleanup()


# ---- the wire protocol v1, independently of protocol.c ----------------------

def field(tag, value):
    return struct.pack(">BI", tag, len(value)) + value


def frame(body, magic=b"SPRB", version=1, kind=1, length=None):
    return magic + struct.pack(">BBI", version, kind, len(body) if length is None else length) + body


def request_frame(repo, outcomes, script):
    enc = (lambda v: v.encode() if isinstance(v, str) else v)
    body = field(1, enc(repo)) + b"".join(field(2, enc(o)) for o in outcomes) + field(3, enc(script))
    return frame(body)


def send_raw(path, data, shutdown=True, timeout=60, limit=64):
    """Connects, writes data, half-closes, reads at most limit bytes until
    EOF.  Returns the bytes read (b"" on a reset)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    got = b""
    try:
        s.connect(path)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
            if shutdown:
                s.shutdown(socket.SHUT_WR)
        while len(got) < limit:
            chunk = s.recv(limit - len(got))
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return got


# ---- the audit log -----------------------------------------------------------

def audit_path(state):
    return os.path.join(state, "audit", "audit.jsonl")


def audit_raw(state):
    try:
        with open(audit_path(state), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def audit_lines(state, run=None, admissions=False):
    """Every audit record (parsed, key order kept), optionally of one run.
    Admission records (status "admitted", written before a launch) are left
    out unless asked for, so that there is one record per request."""
    out = []
    for line in audit_raw(state).decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line, object_pairs_hook=lambda pairs: dict(pairs))
        except ValueError:
            rec = {"__unparsable__": line}
        if (run is None or rec.get("run") == run) and (admissions or rec.get("status") != "admitted"):
            out.append(rec)
    return out


def record_of_script(state, script):
    """The newest result record of the request that sent script, or None."""
    tag = sha256_tag(script)
    found = [r for r in audit_lines(state) if r["script_sha256"] == tag]
    return found[-1] if found else None


def admissions_of_script(state, script):
    """The admission records of the requests that sent script."""
    tag = sha256_tag(script)
    return [r for r in audit_lines(state, admissions=True) if r["status"] == "admitted" and r["script_sha256"] == tag]


def audit_key_problems(rec):
    """What is wrong with one record's shape, by the documented key list and
    types; [] when it is well-formed."""
    problems = []
    if list(rec) != AUDIT_KEYS:
        problems.append(f"keys {list(rec)}")
        return problems
    if not RUN_ID.match(str(rec["run"])) or not re.match(r"^%s-[1-9][0-9]*$" % re.escape(str(rec["run"])),
                                                          str(rec["id"])):
        problems.append(f"id/run {rec['id']!r} {rec['run']!r}")
    admitted = rec["status"] == "admitted"
    for k in ("received", "finished"):
        if admitted and k == "finished":
            if rec[k] is not None:
                problems.append(f"admitted with finished {rec[k]!r}")
        elif not isinstance(rec[k], str) or not RFC3339_MS.match(rec[k]):
            problems.append(f"{k} {rec[k]!r}")
    # Every record of the suite's serves comes from a client on the socket,
    # whose credentials the kernel always gives (SO_PEERCRED).
    if any(type(rec[k]) is not int or rec[k] < 0 for k in ("peer_uid", "peer_gid", "peer_pid")):
        problems.append(f"peer {rec['peer_uid']!r}/{rec['peer_gid']!r}/{rec['peer_pid']!r}")
    if rec["started"] is not None and not (isinstance(rec["started"], str) and RFC3339_MS.match(rec["started"])):
        problems.append(f"started {rec['started']!r}")
    if rec["status"] not in AUDIT_STATUSES:
        problems.append(f"status {rec['status']!r}")
    omitted = rec["seed_omitted_submodules"]
    if omitted is not None and (type(omitted) is not int or omitted < 0 or rec["seed_commit"] is None):
        problems.append(f"seed_omitted_submodules {omitted!r} with seed_commit {rec['seed_commit']!r}")
    if not isinstance(rec["debited"], bool) or not isinstance(rec["launched"], bool):
        problems.append("debited/launched not bool")
    if admitted != (rec["cause"] is None) or (not admitted and rec["cause"] not in AUDIT_CAUSES):
        problems.append(f"status {rec['status']} with cause {rec['cause']!r}")
    elif (rec["status"] == "answered") != (rec["cause"] == "none"):
        problems.append(f"status {rec['status']} with cause {rec['cause']!r}")
    if rec["status"] == "answered" and rec["reason"] is not None:
        problems.append(f"answered with a reason {rec['reason']!r}")
    if admitted and (rec["result"] is not None or rec["launched"] or not rec["debited"] or rec["reason"] is not None):
        problems.append(f"admitted with result {rec['result']!r}, launched {rec['launched']!r}, "
                        f"debited {rec['debited']!r}, reason {rec['reason']!r}")
    if rec["status"] not in ("answered", "admitted") and rec["result"] != "ERROR":
        problems.append(f"status {rec['status']} with result {rec['result']!r}")
    if not rec["launched"]:
        for k in ("exit", "signal", "oom", "timed_out", "wall_ms", "cpu_ms", "peak_memory_bytes"):
            if rec[k] is not None:
                problems.append(f"not launched but {k}={rec[k]!r}")
    # When it left, and what it could disclose (docs/audit.md).
    if rec["release"] not in RELEASE_MODES or not isinstance(rec["release_overflow"], bool):
        problems.append(f"release {rec['release']!r} overflow {rec['release_overflow']!r}")
    if rec["release_ms"] is not None and (rec["release"] == "immediate" or admitted
                                          or not isinstance(rec["release_ms"], int) or rec["release_ms"] < 0):
        problems.append(f"release_ms {rec['release_ms']!r} in mode {rec['release']}")
    if rec["debited"]:
        timing = rec["timing_bits"]
        if not isinstance(rec["bits"], (int, float)) or not isinstance(rec["repo_bits"], (int, float)) \
                or not isinstance(rec["content_bits"], (int, float)) or rec["content_bits"] < 1 \
                or (timing != "unbounded" if rec["release"] == "immediate" else not isinstance(timing, (int, float))):
            problems.append(f"debited with bits {rec['bits']!r} timing {timing!r} repo {rec['repo_bits']!r}")
    elif (rec["bits"], rec["content_bits"], rec["timing_bits"], rec["repo_bits"]) != (None, None, None, None):
        problems.append(f"not debited but bits {rec['bits']!r}")
    return problems


def audit_id_inv(rec):
    return int(str(rec["id"]).rsplit("-", 1)[1])


def sha256_tag(data):
    return "sha256:" + hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


# ---- leak checks -------------------------------------------------------------

def unescape_mountinfo(p):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p)


def mounts_under(prefix, mountinfo="/proc/self/mountinfo"):
    """Mount points at or below prefix in a mountinfo file."""
    prefix = prefix.rstrip("/")
    out = []
    try:
        with open(mountinfo) as f:
            for line in f:
                mp = unescape_mountinfo(line.split()[4])
                if mp == prefix or mp.startswith(prefix + "/"):
                    out.append(mp)
    except OSError:
        pass
    return out


def containers(root):
    """Container ids in one --root of the backend (B.containers)."""
    return B.containers(root)


def cgroup_dirs(run):
    return sorted(glob.glob(f"/sys/fs/cgroup/*/sealed-probe/{run}-*") +
                  glob.glob(f"/sys/fs/cgroup/sealed-probe/{run}-*") +
                  glob.glob(f"/sys/fs/cgroup/*/*/sealed-probe/{run}-*"))


def processes_in_run_cgroups(run, zombies=False, exclude=()):
    """Live processes (not zombies, unless asked) whose cgroup is one of run's
    (but those named in exclude: <run>-<name> cgroup names)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                text = f.read()
            if f"sealed-probe/{run}-" not in text:
                continue
            # A pool sandbox's own cgroup, or one below it (docker puts its
            # container's cgroup under the bundle's).
            if exclude and all(any(line.endswith(f"sealed-probe/{x}") or f"sealed-probe/{x}/" in line
                                   for x in exclude)
                               for line in text.splitlines() if f"sealed-probe/{run}-" in line):
                continue
            with open(f"/proc/{pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if zombies or st != "Z":
            pids.append(int(pid))
    return pids


def runtime_processes(state):
    """The backend's host processes (runc: runc, runc:[2:INIT]; runsc: runsc,
    runsc-gofer, runsc-sandbox) whose argv names this state directory; for
    docker the shims of its containers (B.host_processes)."""
    return B.host_processes(state)


def work_dir(state):
    """Where serve keeps the workspaces of the state directory state:
    RUN_DIR/work/<device>-<inode> of it, in hex (src/serve/preflight.c), with
    RUN_DIR the test's own --run-dir (B.run_dir);
    for docker STATE/docker-work, in the host's mount namespace (B.work_dir)."""
    return B.work_dir(state)


# Every serve a test starts gets a probe id range of its own: serves run side
# by side in the suite, and each refuses a range another one's probes hold.
_probe_id_serial = [0]


def probe_ids():
    _probe_id_serial[0] += 1
    return str(2_000_000_000 + ((os.getpid() % 20000) * 32 + _probe_id_serial[0] % 32) * 64)


def probe_processes(base, count):
    """{pid: (uid, cmdline)} of the host processes whose uid is in [base,
    base + count): a serve's probes, by their host ids (docs/runtimes.md)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(ln.split()[1]) for ln in f if ln.startswith("Uid:"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, StopIteration, ValueError):
            continue
        if base <= uid < base + count:
            found[int(pid)] = (uid, cmdline)
    return found


def process_ids(pid):
    """{"Uid": [real, effective, saved, fs], "Gid": [...]} of a host process."""
    with open(f"/proc/{pid}/status") as f:
        return {ln.split(":")[0]: [int(x) for x in ln.split()[1:]] for ln in f if ln.startswith(("Uid:", "Gid:"))}


def gvisor_sandboxes(state):
    """Under gVisor, each running sandbox of this state directory as two host
    processes (docs/runtimes.md): {bundle: {"sandbox": pid, "gofer": pid}},
    paired by the bundle directory both name in their argv."""
    found = {}
    for pid, _ in runtime_processes(state):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        kind = {b"runsc-sandbox": "sandbox", b"runsc-gofer": "gofer"}.get(os.path.basename(argv[0]))
        bundle = None
        for i, a in enumerate(argv):
            if a == b"--bundle" and i + 1 < len(argv):
                bundle = argv[i + 1]
            elif a.startswith(b"--bundle="):
                bundle = a[len(b"--bundle="):]
        if kind and bundle:
            found.setdefault(bundle.decode("utf-8", "replace"), {})[kind] = pid
    return found


# A sandbox serve made ahead of its request (--pool; docs/operations.md,
# "Sandboxes created ahead") is named p<N>: its workspace, and its container
# sp-<run>-p<N>.
POOL_NAME = re.compile(r"p[0-9]+")


def pool_members(state, run, serve_pid):
    """The names (p<N>) of run's sandboxes waiting in serve's pool: a
    workspace p<N> whose bundle/probe.py is still the empty placeholder,
    read in serve's own mount namespace (/proc/PID/root).  One that got its
    script is not the pool's any more: it is a probe's, running or left."""
    if not (run and serve_pid):
        return set()
    top = f"/proc/{serve_pid}/root" + os.path.join(work_dir(state), run)
    try:
        names = os.listdir(top)
    except OSError:
        return set()
    out = set()
    for n in names:
        if POOL_NAME.fullmatch(n):
            try:
                if os.stat(os.path.join(top, n, "bundle", "probe.py")).st_size == 0:
                    out.add(n)
            except OSError:
                pass
    return out


def probe_workspaces(state, run, serve_pid):
    """The names of run's workspaces that hold a probe's script (a probe's,
    running or left), not those waiting in the pool; sorted."""
    top = f"/proc/{serve_pid}/root" + os.path.join(work_dir(state), run)
    out = []
    with contextlib.suppress(OSError):
        for n in os.listdir(top):
            with contextlib.suppress(OSError):
                if n != "rootfs" and os.stat(os.path.join(top, n, "bundle", "probe.py")).st_size > 0:
                    out.append(n)
    return sorted(out)


def serve_umask():
    """The umask every Serve starts with: SP_TEST_SERVE_UMASK in octal
    (scripts/test runs one build's matrix with 077, the proxy unit's, so
    that nothing serve makes depends on a permissive umask), else the
    test's own (-1: inherited)."""
    v = os.environ.get("SP_TEST_SERVE_UMASK", "")
    if not v:
        return -1
    if not re.fullmatch(r"0?[0-7]{1,3}", v):
        raise ValueError(f"SP_TEST_SERVE_UMASK must be an octal umask such as 077, not {v!r}")
    return int(v, 8)


def pool_size():
    """The --pool every Serve gets: SP_TEST_POOL (scripts/test runs the
    matrix once with the pool on and once with it off), else serve's own
    default (None: no --pool given)."""
    v = os.environ.get("SP_TEST_POOL", "")
    return int(v) if v.isdigit() else None


# The backend creates a sandbox ahead of its request (a `create` op in its
# runtime vtable); sbx starts every sandbox cold.
CREATES_AHEAD = B.creates_ahead


def pool_expected(repos=1):
    """How many sandboxes a serve of this test run keeps waiting, for a
    config of repos repositories: --pool (SP_TEST_POOL, else serve's default
    of 1) per repository, at most 15 in all; 0 on a backend that cannot
    create ahead."""
    per = pool_size()
    per = 1 if per is None else per
    return min(per * repos, 15) if CREATES_AHEAD else 0


def created_containers(state, run):
    """run's containers that wait for their request: created and not
    started, or where the backend starts_ahead, running the interpreter
    that waits for its script (`runc list`'s and `runsc list`'s status
    column; docker's State)."""
    return B.created_containers(state, run)


def wait_pool_full(srv, repos=1, timeout=60):
    """Waits until srv's pool holds pool_expected(repos) sandboxes, each
    created by the runtime (not half-way); their names, or None on a
    timeout."""
    return wait_pool_full_n(srv, pool_expected(repos), timeout)


def wait_pool_full_n(srv, want, timeout=60):
    """wait_pool_full for a pool of exactly want sandboxes (0: returns an
    empty set at once)."""
    if not want:
        return set()

    root = B.run_root(srv.state, srv.run)

    def create_returned(n):
        # runc and runsc report a container created before its create has
        # returned (B.create_returned).
        return B.create_returned(root, f"sp-{srv.run}-{n}")

    def full():
        m = pool_members(srv.state, srv.run, srv.pid)
        done = created_containers(srv.state, srv.run)
        return m if len(m) == want and all(f"sp-{srv.run}-{n}" in done and create_returned(n) for n in m) \
            else None
    return wait_for(full, timeout=timeout)


def leaks(state, run, serve_pid=None, after_exit=False, srv=None, running_run=None, running_pid=None,
          settle=10):
    """leaks_now(), until it finds nothing or settle seconds passed: in
    immediate release a sandbox is removed just after its answer left, and a
    pool refills just after a sandbox was taken."""
    deadline = time.monotonic() + settle
    while True:
        found = leaks_now(state, run, serve_pid, after_exit, srv, running_run, running_pid)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def leaks_now(state, run, serve_pid=None, after_exit=False, srv=None, running_run=None, running_pid=None):
    """Everything of run that is left; [] when nothing is.  While serve runs
    (serve_pid), its own mount namespace is checked for mounts below its
    work directory (work_dir) as well.  after_exit: also the backend's
    STATE/runc/<run> (STATE/runsc/<run>, STATE/docker-work/<run>), the socket
    and the ready file must be gone.  Containers: any of the state directory
    (B.leftover_containers; for docker, by the org.sealed-probe.state label).
    running_run: the run of a serve still running on this state (a restart
    after a kill -9): on docker and sbx (B.workspaces_on_host) its private
    rootfs copy and workspaces are in the host's mount namespace under
    STATE/docker-work/<running_run> (STATE/sbx-work/...), by design, and are
    not run's leftovers (on runc and gvisor they are in that serve's own
    namespace, which this never reads).  The sandboxes waiting in a live
    serve's pool (pool_members: serve_pid's of run, running_pid's of
    running_run) are not leftovers either."""
    pooled = set()
    if not after_exit:
        pooled |= {(run, m) for m in pool_members(state, run, serve_pid)}
    pooled |= {(running_run, m) for m in pool_members(state, running_run, running_pid)}
    pooled_names = {f"{r}-{m}" for r, m in pooled}
    found = B.leftover_containers(state, exclude={f"sp-{n}" for n in pooled_names})
    found += [f"cgroup {d}" for d in cgroup_dirs(run) if os.path.basename(d) not in pooled_names] if run else []
    pids = processes_in_run_cgroups(run, exclude=pooled_names) if run else []
    if pids:
        found.append(f"processes in the run's cgroups: {pids}")
    work_run = os.path.join(work_dir(state), run) if run else None
    # While serve runs, its private copy of the rootfs is mounted at
    # WORK/RUN/rootfs (docs/rootfs.md); after exit nothing may stay.
    private_rootfs = os.path.join(work_run, "rootfs") if work_run and not after_exit else None
    for mi in ["/proc/self/mountinfo"] + ([f"/proc/{serve_pid}/mountinfo"] if serve_pid else []):
        # (one directory for docker: its work directory is STATE/docker-work)
        for base in dict.fromkeys((work_dir(state), os.path.join(state, B.state_subdir))):
            m = [p for p in mounts_under(base, mi) if p != private_rootfs
                 and not any(p == os.path.join(work_dir(state), r, n) or p.startswith(os.path.join(work_dir(state), r, n) + "/")
                             for r, n in pooled)]
            if B.workspaces_on_host and running_run:
                live = os.path.join(work_dir(state), running_run)
                m = [p for p in m if p != live and not p.startswith(live + "/")]
            if m:
                found.append(f"mounts in {mi}: {m}")
    if work_run and os.path.isdir(work_run):
        entries = [e for e in os.listdir(work_run) if os.path.join(work_run, e) != private_rootfs
                   and (run, e) not in pooled]
        if entries or after_exit:
            found.append(f"{work_run} holds {entries}" if entries else f"{work_run} is left")
    if after_exit and run and os.path.exists(B.run_root(state, run)):
        found.append(f"{B.run_root(state, run)} is left")
    if after_exit and srv is not None:
        for p in (srv.socket, srv.ready_file):
            if os.path.lexists(p):
                found.append(f"{p} is left")
    if after_exit:
        # A waiting sandbox of a live serve keeps its runtime's processes
        # (runsc's sandbox and gofer name its bundle).
        # runsc rewrites its argv in place, cut to the length it had, so a
        # long bundle path may lose its end: a process under the live run's
        # --root is that run's, never run's leftover.
        live_root = f"--root={B.run_root(state, running_run)}".encode() if running_run else None
        marks = [f"/{r}/{m}/bundle".encode() for r, m in pooled]
        if B.docker:
            # A waiting container's shim names it by its id (`-id ID`): its
            # interpreter was started ahead.
            from sp_harness import docker_state_containers
            ids = docker_state_containers(state, socket_path=B.socket)
            marks += [ids[f"sp-{r}-{m}"].encode() for r, m in pooled if f"sp-{r}-{m}" in ids]
        procs = [p for p in runtime_processes(state)
                 if not any(mark in p[1] for mark in marks)
                 and not (live_root is not None and live_root + b" " in p[1])]
        if procs:
            found.append(f"{B.binary_name} processes: {procs}")
    return found


def wait_for(pred, timeout=30, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def probe_containers(state, run, serve_pid):
    """run's containers but those waiting in serve's pool: the probes'."""
    pooled = {f"sp-{run}-{m}" for m in pool_members(state, run, serve_pid)}
    return containers(B.run_root(state, run)) - pooled if run else set()


def wait_container(state, run, timeout=30, serve_pid=None):
    """Waits until a probe's container of run exists in the run's --root
    (STATE/runc/<run>, STATE/runsc/<run>), not one waiting in serve_pid's
    pool; its id."""
    def one():
        ids = probe_containers(state, run, serve_pid)
        return sorted(ids)[0] if ids else None
    return wait_for(one, timeout)


# ---- inotify, through libc ---------------------------------------------------

IN_CREATE = 0x100
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


def launch_watch(state, run):
    """An inotify watch on what a launch creates: the run's runtime root,
    the workspaces and the run's workspace directory."""
    ino = Inotify()
    for d in dict.fromkeys((B.run_root(state, run), work_dir(state), os.path.join(work_dir(state), run))):
        if os.path.isdir(d):
            ino.watch(d)
    return ino


def launch_events(state, run, events):
    """Those of a launch_watch's events that a copy or a launch made."""
    return [e for e in events if e[0] == B.run_root(state, run) or (e[0] or "").startswith(work_dir(state))]


class Inotify:
    """IN_CREATE events on a few directories."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.watches = {}

    def watch(self, path, mask=IN_CREATE):
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self.watches[wd] = path

    def events(self):
        """[(dir, name, mask)] read so far (non-blocking)."""
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i + 16 <= len(buf):
                wd, mask, _cookie, length = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + length].rstrip(b"\0").decode("utf-8", "replace")
                out.append((self.watches.get(wd), name, mask))
                i += 16 + length
        return out

    def close(self):
        os.close(self.fd)


# ---- probes ------------------------------------------------------------------

def answer_script(outcome):
    return f'import json\nwith open("/probe/out", "w") as f:\n    json.dump({{"result": {outcome!r}}}, f)\n'


FINDER = r'''
import json, os, stat, sys
# hex, so that this script's own bytes (/probe/probe.py) hold no needle
NEEDLES = [bytes.fromhex(n) for n in NEEDLES_]      # must not be found
CONTROLS = [bytes.fromhex(n) for n in CONTROLS_]    # must be found (the detection works)
SKIP = ("/proc", "/sys", "/dev")
hits, seen_controls = [], set()
def look(path, data):
    if path.startswith("/probe/probe.py"):   # this script: it may spell needles in its extra code
        return
    for n in NEEDLES:
        if n in data:
            hits.append(path)
    for n in CONTROLS:
        if n in data:
            seen_controls.add(n)
def scan(roots, follow=False, max_file=8 << 20):
    for top in roots:
        for dirpath, dirnames, filenames in os.walk(top, followlinks=follow):
            if any(dirpath == s or dirpath.startswith(s + "/") for s in SKIP) and top not in SKIP:
                dirnames[:] = []
                continue
            if dirpath.count("/") > 40:
                dirnames[:] = []
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                look(p + " (name)", p.encode())
                try:
                    st = os.stat(p)   # follows a symlink on purpose
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_size <= max_file:
                    try:
                        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                        try:
                            data = os.read(fd, max_file + 1)
                        finally:
                            os.close(fd)
                    except OSError:
                        continue
                    look(p, data)
EXTRA_
if not all(c in seen_controls for c in CONTROLS):
    result = "BROKEN"
elif hits:
    result = "SEEN"
else:
    result = "NOTSEEN"
with open("/probe/out", "w") as f:
    json.dump({"result": result}, f)
'''
FINDER_OUTCOMES = ("SEEN", "NOTSEEN", "BROKEN")


def finder(needles, controls, roots=("/",), pre="", extra=""):
    """A probe answering SEEN when any needle is in any path or file it can
    reach from roots (symlinks to files read through), NOTSEEN when none is
    but every control is, BROKEN when a control is missing (the detection
    failed, so a NOTSEEN would prove nothing).  pre runs first (it may plant
    controls), extra after the scan (it may add to hits / seen_controls)."""
    hexed = (lambda xs: repr([x.encode().hex() for x in xs]))
    body = FINDER.replace("NEEDLES_", hexed(needles)).replace("CONTROLS_", hexed(controls))
    body = body.replace("EXTRA_", f"scan({list(roots)!r})\n" + extra)
    return pre + body
