"""The sbx test double (tests/doubles/sbx/sbx) against its own promises:
every mode's version, help and refusals, the VM state (`ls -q`, create,
stop, rm), the invocation log, and a real workload under runc through
`sbx exec`: a probe in a bundle-like directory below a root-only one, run as
65534 in a user namespace, that reads and writes the shared paths, sees only
`lo`, and exits with its own status.  The config.json beside the shared
paths carries poison where the double must take a value from argv instead
(user, cwd, env, command, root), so a value leaking through fails.

Needs root and runc, and the build's cached rootfs (SP_ROOTFS_*, as meson
passes them): without them a SKIP with the reason, a failure under CI=true."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, bail_out, cached_rootfs, ci, skip_all, unmount_under  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE = os.path.join(HERE, "..", "doubles", "sbx", "sbx")
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SBX_ENV = {"PATH": SEARCH_PATH, "HOME": "/root", "LC_ALL": "C"}   # what the sbx backend gives sbx
HOST_ROOT = 2147000000   # the sandbox's root on the host; HOST_ROOT + 1 is its 65534
FIVE_FLAGS = ("--network", "--pids-limit", "--disk-limit", "--ulimit-fsize", "--mount-target")
PROBE_CMD = ["python3", "-I", "-S", "-B", "/probe/probe.py"]

PROBE = r'''
import json, os, resource, sys
mode = sys.argv[1] if len(sys.argv) > 1 else "report"
if mode == "exit3":
    sys.exit(3)
if mode == "sleep":
    import time
    time.sleep(120)
if mode == "write":
    with open("/probe/repo/written-inside", "w") as f:
        f.write("from inside\n")
    sys.exit(0)
if mode == "stdin":
    sys.stdout.write(sys.stdin.read().upper())
    sys.exit(0)
with open("/probe/repo/hello.txt") as f:
    repo = f.read()
with open("/proc/net/dev") as f:
    ifaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
options = {}
with open("/proc/self/mountinfo") as f:
    for line in f:
        fields = line.split()
        options[fields[4]] = fields[5].split(",")
try:
    open("/etc/probe-was-here", "w")
    root_writable = True
except OSError:
    root_writable = False
tmp = os.statvfs("/tmp")
report = {"result": "YES", "uid": os.getuid(), "gid": os.getgid(), "repo": repo, "ifaces": ifaces,
          "cwd": os.getcwd(), "env": dict(os.environ), "argv": sys.argv[1:], "root_writable": root_writable,
          "fsize": resource.getrlimit(resource.RLIMIT_FSIZE), "tmp_bytes": tmp.f_blocks * tmp.f_frsize,
          "mount_options": {p: options.get(p) for p in ("/probe/repo", "/probe/out", "/probe/probe.py")},
          "hostname": os.uname().nodename}
with open("/probe/out", "w") as f:
    f.write(json.dumps(report))
print("stdout reached the caller")
print("stderr reached the caller", file=sys.stderr)
'''


def preflight():
    """Skips (fails under CI=true) when this machine cannot run the test."""
    def cannot(reason):
        if ci():
            bail_out(reason)
        skip_all(reason)

    if os.geteuid() != 0:
        cannot("needs root: the double runs runc with user namespaces and bind mounts")
    runc = shutil.which("runc", path=SEARCH_PATH)
    if not runc:
        cannot("`runc` is not installed (scripts/install-deps --test installs it)")
    missing = [v for v in ("SP_ROOTFS_BUILDER", "SP_ROOTFS_LOCK", "SP_ROOTFS_CACHE") if not os.environ.get(v)]
    if missing:
        cannot(f"{', '.join(missing)} unset: run this test through meson (it needs the build's cached rootfs)")
    cached = cached_rootfs()
    if not cached:
        cannot("no cached rootfs for this build")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                ids = [line.split()[1:] for line in f if line.startswith(("Uid:", "Gid:"))]
        except OSError:
            continue
        if any(int(i) in (HOST_ROOT, HOST_ROOT + 1) for row in ids for i in row):
            cannot(f"host process {pid} runs as {HOST_ROOT} or {HOST_ROOT + 1}, the test's mapped ids")
    return runc, cached


RUNC, CACHED = preflight()
ROOTFS = os.path.join(CACHED, "root")
with open(os.path.join(CACHED, "digest")) as f:
    TEMPLATE = "sealed-probe/rootfs@" + f.read().strip()

tap = Tap()
calls = []   # every argv the test gave the double, in order: the log must hold exactly these
secret = tempfile.mkdtemp(prefix="sp-sbx-self-bundle-")       # root-only, as the proxy's bundles are
install = tempfile.mkdtemp(prefix="sp-sbx-self-install-")     # the double and its double.json
statetop = tempfile.mkdtemp(prefix="sp-sbx-self-state-")
os.chmod(statetop, 0o711)   # the mapped root walks down to state/vms/<NAME>/
STATE = os.path.join(statetop, "state")
LOG = os.path.join(install, "log.jsonl")
SBX = os.path.join(install, "sbx")
CGROUP = f"/sp-sbx-selftest-{os.getpid()}"
hanging = None


def configure(mode, **extra):
    doc = {"mode": mode, "log": LOG, "state": STATE, "templates": {TEMPLATE: ROOTFS}, "runc": RUNC, **extra}
    with open(os.path.join(install, "double.json"), "w") as f:
        json.dump(doc, f)


def sbx(*args, stdin=b""):
    calls.append(list(args))
    r = subprocess.run([SBX, *args], input=stdin, capture_output=True, env=SBX_ENV, timeout=60)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def names():
    return sbx("ls", "-q")[1].splitlines()


def runc_list():
    r = subprocess.run([RUNC, "--root", os.path.join(STATE, "runc"), "list", "-q"], capture_output=True, text=True)
    return r.stdout.split()


def mounts_under(top):
    top = os.path.realpath(top)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == top or p.startswith(top + "/")]


def wait_running(name, seconds=20):
    """runc's status of the VM's container once it runs (or the last one seen)."""
    status = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = subprocess.run([RUNC, "--root", os.path.join(STATE, "runc"), "state", name], capture_output=True,
                           text=True)
        status = json.loads(r.stdout)["status"] if r.returncode == 0 else None
        if status == "running":
            break
        time.sleep(0.1)
    return status


def out_answer():
    with open(os.path.join(secret, "out")) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text}


def bundle_config(name):
    with open(os.path.join(STATE, "vms", name, "bundle", "config.json")) as f:
        return json.load(f)


def make_bundle():
    """What the proxy leaves beside the shared paths: config.json (with
    poison in every field the double must take from argv), repo/, probe.py
    and out, below a root-only directory."""
    probe_id = HOST_ROOT + 1
    repo = os.path.join(secret, "repo")
    os.mkdir(repo, 0o700)
    with open(os.path.join(repo, "hello.txt"), "w") as f:
        f.write("hello from the host\n")
    for path in (repo, os.path.join(repo, "hello.txt")):
        os.chown(path, probe_id, probe_id)
    os.chmod(os.path.join(repo, "hello.txt"), 0o600)
    with open(os.path.join(secret, "probe.py"), "w") as f:
        f.write(PROBE)
    os.chmod(os.path.join(secret, "probe.py"), 0o444)
    out = os.path.join(secret, "out")
    open(out, "w").close()
    os.chown(out, probe_id, probe_id)
    os.chmod(out, 0o600)
    nothing = {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
    bind = {"type": "bind", "options": ["bind", "rw"]}
    config = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/false"],
                    "env": ["POISON=config.json"], "cwd": "/proc", "capabilities": nothing,
                    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 256, "soft": 256},
                                {"type": "RLIMIT_FSIZE", "hard": 1 << 26, "soft": 1 << 26}],
                    "noNewPrivileges": True, "oomScoreAdj": 1000},
        "root": {"path": "/nonexistent-poison", "readonly": True},
        "hostname": "probe",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "noexec", "strictatime", "mode=755", "size=64k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=16m", "nr_inodes=4096"]},
            # the proxy's own binds: the double replaces them with the VM's
            dict(bind, destination="/probe/repo", source=repo),
            dict(bind, destination="/probe/out", source=out),
            dict(bind, destination="/probe/probe.py", source=os.path.join(secret, "probe.py")),
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network", "user", "cgroup")],
            "uidMappings": [{"containerID": 0, "hostID": HOST_ROOT, "size": 1},
                            {"containerID": 65534, "hostID": probe_id, "size": 1}],
            "gidMappings": [{"containerID": 0, "hostID": HOST_ROOT, "size": 1},
                            {"containerID": 65534, "hostID": probe_id, "size": 1}],
            "resources": {"devices": [{"allow": False, "access": "rwm"}], "pids": {"limit": 1}},
            "cgroupsPath": CGROUP,
            "maskedPaths": ["/proc/kcore"],
            "readonlyPaths": ["/proc/sys"],
            "rootfsPropagation": "private",
        },
    }
    with open(os.path.join(secret, "config.json"), "w") as f:
        json.dump(config, f)
    os.chmod(os.path.join(secret, "config.json"), 0o444)


def create(name, *flags):
    return sbx("create", "--name", name, "--template", TEMPLATE, *flags, "shell", "--",
               os.path.join(secret, "repo"), os.path.join(secret, "out"), os.path.join(secret, "probe.py") + ":ro")


TARGETS = ("--mount-target", "/probe/repo", "--mount-target", "/probe/out", "--mount-target", "/probe/probe.py")
LIMITS = ("--network", "none", "--cpus", "1", "--memory", "256m", "--pids-limit", "64", "--disk-limit", "8m",
          "--ulimit-fsize", "1m", "--quiet")
EXEC_AS_PROBE = ("--user", "65534:65534", "--workdir", "/probe/repo", "--env", "PATH=/usr/bin",
                 "--env", "LANG=C.UTF-8", "--env", "HOME=/tmp")


def test_versions_and_help():
    for mode, version in (("capable", "0.0.0-sealed-probe-double"), ("incapable", "0.37.1"),
                          ("unaudited", "0.38.0"), ("hostile-ls", "0.0.0-sealed-probe-double"),
                          ("unauthenticated", "0.0.0-sealed-probe-double")):
        configure(mode)
        rc, out, err = sbx("version")
        tap.ok(rc == 0 and out == f"Client:\n Version: {version}\n Built: double\n",
               f"{mode}: `sbx version` says {version}", (rc, out, err))
    configure("incapable", version="9.9.9")
    tap.ok(sbx("version")[1] == "Client:\n Version: 9.9.9\n Built: double\n",
           "double.json's `version` overrides the mode's")

    configure("capable")
    rc, out, _ = sbx("create", "--help")
    tap.ok(rc == 0 and all(f"      {flag} " in out for flag in FIVE_FLAGS) and "-t, --template string" in out,
           "capable: create --help lists the five flags the backend needs", out)
    tap.ok("      --pids-limit int" in out and "Maximum number of tasks in the sandbox" in out,
           "capable: create --help lists a flag cobra's way", out)
    configure("incapable")
    rc, out, _ = sbx("create", "--help")
    tap.ok(rc == 0 and not any(flag in out for flag in FIVE_FLAGS) and "--branch" in out and "--kit" in out,
           "incapable: create --help lacks the five flags and has --branch and --kit", out)
    rc, _, err = create("nope", "--network", "none")
    tap.ok(rc == 1 and "Error: unknown flag: --network" in err, "incapable: --network is an unknown flag", err)
    for mode in ("capable", "incapable"):
        configure(mode)
        rc, out, _ = sbx("exec", "--help")
        tap.ok(rc == 0 and all(f in out for f in ("-u, --user", "-w, --workdir", "-e, --env", "-d, --detach",
                                                  "-i, --interactive", "-t, --tty", "--privileged")),
               f"{mode}: exec --help lists exec's flags", out)
    configure("capable")
    rc, out, _ = sbx("--help")
    tap.ok(rc == 0 and "TEST DOUBLE" in out and "create" in out, "`sbx --help` names the commands", out)
    rc, _, err = sbx("frobnicate")
    tap.ok(rc == 1 and err.startswith("Error: unknown command"), "an unknown command fails", err)


def test_unauthenticated():
    configure("unauthenticated")
    rc, out, err = sbx("ls", "-q")
    tap.ok(rc == 1 and out == "" and err == "Error: not signed in: run 'sbx login'\n",
           "unauthenticated: ls exits 1, not signed in", (rc, out, err))
    rc, _, err = create("unauth", *TARGETS)
    tap.ok(rc == 1 and "not signed in" in err, "unauthenticated: create exits 1, not signed in", err)
    rc, out, _ = sbx("create", "--help")
    tap.ok(rc == 0 and "--name" in out, "unauthenticated: help still works", out)


def test_create_refusals():
    configure("capable")
    rc, _, err = sbx("create", "--name", "badtpl", "--template", "sealed-probe/rootfs@sha256:" + "0" * 64,
                     "shell", "--", os.path.join(secret, "repo"))
    tap.ok(rc == 1 and err == f"Error: template sealed-probe/rootfs@sha256:{'0' * 64} not found\n",
           "create with an unknown template fails, naming it", err)
    cases = [
        ("a name starting with a dot", ("create", "--name=.hidden", "-t", TEMPLATE, "shell", "--", secret)),
        ("a name starting with a dash", ("create", "--name=-rf", "-t", TEMPLATE, "shell", "--", secret)),
        ("a name with a slash", ("create", "--name=a/b", "-t", TEMPLATE, "shell", "--", secret)),
        ("a missing PATH", ("create", "--name", "x1", "-t", TEMPLATE, "shell", "--", secret + "/nonexistent")),
        ("a relative PATH", ("create", "--name", "x2", "-t", TEMPLATE, "shell", "--", "repo")),
        ("a target count that differs", ("create", "--name", "x3", "-t", TEMPLATE, "--mount-target", "/a",
                                         "shell", "--", secret, secret + "/repo")),
        ("a bad size", ("create", "--name", "x4", "-t", TEMPLATE, "--memory", "12q", "shell", "--", secret)),
        ("no agent", ("create", "--name", "x5", "-t", TEMPLATE, "--", secret)),
        ("an unknown flag", ("create", "--name", "x6", "-t", TEMPLATE, "--frob=1", "shell", "--", secret)),
        ("--privileged", ("exec", "--privileged", "whatever", "--", "true")),
    ]
    for what, args in cases:
        rc, _, err = sbx(*args)
        tap.ok(rc == 1 and err.startswith("Error: "), f"refused: {what}", (rc, err))
    tap.ok(names() == [], "no refused create left a VM behind", names())
    rc, _, err = sbx("exec", "ghost", "--", "true")
    tap.ok(rc == 1 and err == "Error: sandbox ghost not found\n", "exec of a missing VM fails", err)
    rc, _, err = sbx("stop", "ghost")
    tap.ok(rc == 1 and err == "Error: sandbox ghost not found\n", "stop of a missing VM fails", err)


def test_workload():
    configure("capable")
    rc, out, err = create("vm1", *TARGETS, *LIMITS)
    tap.ok(rc == 0 and out == "" and err == "", "create --quiet of a capable VM: exit 0, silent", (rc, out, err))
    with open(os.path.join(STATE, "vms", "vm1.json")) as f:
        vm = json.load(f)
    tap.ok(vm["status"] == "created" and vm["rootfs"] == ROOTFS and vm["pids"] == 64 and vm["memory"] == 256 << 20
           and vm["disk"] == 8 << 20 and vm["fsize"] == 1 << 20 and vm["network"] == "none"
           and vm["mounts"][2] == {"source": os.path.join(secret, "probe.py"), "target": "/probe/probe.py",
                                   "ro": True},
           "the VM's record holds the template's rootfs, the limits and the mounts", vm)
    rc, _, err = create("vm1", *TARGETS)
    tap.ok(rc == 1 and "already exists" in err, "a second VM of the same name is refused", err)
    modes = {p: oct(os.stat(os.path.join(STATE, *p)).st_mode & 0o777) for p in ((), ("vms",), ("vms", "vm1"))}
    tap.ok(set(modes.values()) == {"0o711"} and os.stat(os.path.join(STATE, "runc")).st_mode & 0o777 == 0o700,
           "state, state/vms and the VM dir are 0711; runc's root is 0700", modes)

    rc, out, err = sbx("exec", *EXEC_AS_PROBE, "vm1", "--", *PROBE_CMD, "report")
    answer = out_answer()
    tap.ok(rc == 0 and answer.get("result") == "YES", "exec runs the probe under runc: the host `out` holds YES",
           (rc, out, err, answer))
    tap.ok(answer.get("uid") == 65534 and answer.get("gid") == 65534, "the probe runs as 65534:65534 (--user)",
           answer)
    tap.ok(answer.get("repo") == "hello from the host\n", "the probe reads the host repo's file", answer)
    tap.ok(answer.get("ifaces") == ["lo"], "--network none: the probe sees only lo", answer)
    tap.ok(answer.get("cwd") == "/probe/repo" and answer.get("argv") == ["report"],
           "--workdir and the command come from argv, not config.json", answer)
    tap.ok(answer.get("env") == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/tmp"},
           "the environment is exactly the --env list", answer)
    tap.ok(answer.get("root_writable") is False and answer.get("hostname") == "probe",
           "config.json's confinement holds: read-only root, its hostname", answer)
    tap.ok(answer.get("fsize") == [1 << 20, 1 << 20] and answer.get("tmp_bytes") == 8 << 20,
           "--ulimit-fsize is RLIMIT_FSIZE and --disk-limit the /tmp tmpfs size", answer)
    opts = answer.get("mount_options") or {}
    tap.ok(all(o and {"nosuid", "nodev", "noexec"} <= set(o) for o in opts.values())
           and "ro" in (opts.get("/probe/probe.py") or []) and "rw" in (opts.get("/probe/repo") or []),
           "the shared paths are nosuid, nodev, noexec; probe.py read-only, repo writable", opts)
    tap.ok("stdout reached the caller" in out and "stderr reached the caller" in err,
           "the probe's stdout and stderr reach exec's caller", (out, err))
    spec = bundle_config("vm1")
    linux = spec["linux"]
    tap.ok(linux["resources"].get("memory") == {"limit": 256 << 20, "swap": 256 << 20}
           and linux["resources"].get("cpu") == {"quota": 100000, "period": 100000}
           and linux["resources"].get("pids") == {"limit": 64}
           and linux["resources"].get("devices") == [{"allow": False, "access": "rwm"}]
           and linux.get("cgroupsPath") == CGROUP,
           "the runc bundle's resources come from argv, the device rules and cgroup from config.json", linux)
    tap.ok(spec["root"]["path"] == os.path.join(STATE, "vms", "vm1", "rootfs")
           and not any(m.get("source", "").startswith(secret) for m in spec["mounts"]),
           "runc sees the rootfs and the shared paths only through the VM dir", spec)

    rc, out, err = sbx("exec", *EXEC_AS_PROBE, "vm1", *PROBE_CMD, "exit3")
    tap.ok(rc == 3, "exec (without --) exits with the probe's status: 3", (rc, err))
    rc, out, err = sbx("exec", "-i", *EXEC_AS_PROBE, "vm1", "--", *PROBE_CMD, "stdin", stdin=b"ping\n")
    tap.ok(rc == 0 and out == "PING\n", "exec relays stdin to the probe", (rc, out, err))
    rc, _, err = sbx("exec", *EXEC_AS_PROBE, "vm1", "--", *PROBE_CMD, "write")
    written = os.path.join(secret, "repo", "written-inside")
    st = os.stat(written) if os.path.exists(written) else None
    tap.ok(rc == 0 and st is not None and st.st_uid == HOST_ROOT + 1,
           "a file the probe writes into /probe/repo appears in the host repo, owned by the mapped 65534",
           (rc, err, st))
    with open(os.path.join(STATE, "vms", "vm1.json")) as f:
        vm = json.load(f)
    tap.ok(vm["status"] == "created" and vm["execs"] == 4, "after its execs the VM is back to created", vm)

    # A probe that sleeps, stopped from outside: runc's 128+9 is exec's status.
    args = ["exec", *EXEC_AS_PROBE, "vm1", "--", *PROBE_CMD, "sleep"]
    calls.append(args)
    sleeper = subprocess.Popen([SBX, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=SBX_ENV)
    status = wait_running("vm1")
    with open(os.path.join(STATE, "vms", "vm1.json")) as f:
        vm = json.load(f)
    tap.ok(status == "running" and vm["status"] == "running" and mounts_under(statetop) == [],
           "while exec runs: runc's container runs, the VM is running, its binds are not in the host's namespace",
           (status, vm["status"], mounts_under(statetop)))
    rc, _, err = sbx("rm", "vm1")
    tap.ok(rc == 1 and err == "Error: sandbox vm1 is running\n", "rm refuses a VM while its exec runs", err)
    rc, _, err = sbx("stop", "vm1")
    try:
        sleeper.wait(timeout=30)
    except subprocess.TimeoutExpired:
        sleeper.kill()
        sleeper.wait()
    tap.ok(rc == 0 and sleeper.returncode == 137, "stop during an exec kills its command: exec exits 137 (128+9)",
           (rc, err, sleeper.returncode, sleeper.stderr.read()))
    sleeper.stdout.close()
    sleeper.stderr.close()
    with open(os.path.join(STATE, "vms", "vm1.json")) as f:
        vm = json.load(f)
    tap.ok(vm["status"] == "stopped" and vm["execs"] == 5, "...and the VM is stopped", vm)
    tap.ok(runc_list() == [] and mounts_under(statetop) == [],
           "no runc container and no mount is left after the execs", (runc_list(), mounts_under(statetop)))

    # Without --network none the VM is on the host's network (here: the test's).
    rc, _, err = create("vm2", *TARGETS, "--quiet")
    rc2, out, err2 = sbx("exec", *EXEC_AS_PROBE, "vm2", "--", *PROBE_CMD, "report")
    with open("/proc/net/dev") as f:
        host_ifaces = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    tap.ok(rc == 0 and rc2 == 0 and out_answer().get("ifaces") == host_ifaces,
           "without --network none the probe sees the host's interfaces", (rc, err, rc2, err2, out_answer()))
    tap.ok(not any(ns["type"] == "network" for ns in bundle_config("vm2")["linux"]["namespaces"])
           and "memory" not in bundle_config("vm2")["linux"].get("resources", {}),
           "...its bundle has no network namespace, and no memory limit without --memory")

    tap.ok(names() == ["vm1", "vm2"], "ls -q lists the created VMs, sorted", names())
    configure("hostile-ls")
    tap.ok(names() == sorted(["vm1", "vm2", "--all", "-rf", " spaced name"]),
           "hostile-ls: ls -q adds --all, -rf and ' spaced name'", names())

    configure("capable")
    rc, _, err = sbx("stop", "vm1", "vm2")
    rc2, _, err2 = sbx("rm", "vm1", "vm2")
    tap.ok(rc == 0 and rc2 == 0 and names() == [], "stop then rm: the VMs are gone from ls -q", (err, err2, names()))
    tap.ok(runc_list() == [] and mounts_under(statetop) == [] and os.listdir(os.path.join(STATE, "vms")) == [],
           "...with no runc container, no mount and no file left", (runc_list(), mounts_under(statetop)))
    tap.ok(os.path.exists(os.path.join(secret, "repo", "hello.txt")), "...and the shared repo is untouched")


def test_unstoppable():
    configure("capable")
    rc, _, err = create("vm3", *TARGETS, *LIMITS)
    rc2, _, err2 = sbx("exec", *EXEC_AS_PROBE, "vm3", "--", *PROBE_CMD, "exit3")
    configure("unstoppable")
    rc3, _, err3 = sbx("stop", "vm3")
    tap.ok(rc == 0 and rc2 == 3 and rc3 == 1 and err3 == "Error: sandbox vm3 did not stop\n",
           "unstoppable: stop exits 1, did not stop", (err, err2, err3))
    tap.ok(names() == ["vm3"], "unstoppable: the VM still lists", names())
    rc, _, err = sbx("rm", "vm3")
    tap.ok(rc == 1 and err == "Error: sandbox vm3 is running\n" and names() == ["vm3"],
           "unstoppable: rm refuses a VM that ran an exec", err)
    configure("capable")
    sbx("stop", "vm3")
    rc, _, err = sbx("rm", "vm3")
    tap.ok(rc == 0 and names() == [], "capable again: stop and rm remove it", err)


def test_hanging_create():
    global hanging
    configure("hanging-create")
    args = ["create", "--name", "hang", "--template", TEMPLATE, "shell", "--", secret]
    calls.append(args)
    hanging = subprocess.Popen([SBX, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=SBX_ENV)
    time.sleep(2)
    tap.ok(hanging.poll() is None, "hanging-create: create has not returned after 2 s")
    hanging.kill()
    hanging.wait()
    hanging = None
    configure("capable")
    tap.ok(names() == [], "hanging-create: it created nothing", names())


def test_log():
    with open(LOG) as f:
        lines = [json.loads(line) for line in f]
    tap.ok([line["argv"] for line in lines] == calls, "the log has one line per invocation, with its argv",
           (len(lines), len(calls)))
    tap.ok(all(line["env"] == SBX_ENV and isinstance(line["pid"], int) and isinstance(line["time"], float)
               for line in lines), "every log line has the exact environment, a pid and a time")


def cleanup():
    if hanging is not None:
        hanging.kill()
        hanging.wait()
    runc_root = os.path.join(STATE, "runc")
    if os.path.isdir(runc_root):
        for name in runc_list():
            subprocess.run([RUNC, "--root", runc_root, "delete", "--force", name], capture_output=True)
    for top in (statetop, secret, install):
        unmount_under(top)
        shutil.rmtree(top, ignore_errors=True)


try:
    shutil.copy(DOUBLE, SBX)
    shutil.copy(os.path.join(os.path.dirname(DOUBLE), "sbx_double.py"), os.path.dirname(SBX))
    os.chmod(SBX, 0o755)
    make_bundle()
    tap.ok(os.stat(DOUBLE).st_mode & 0o777 == 0o755, "the double is mode 0755")
    test_versions_and_help()
    test_unauthenticated()
    test_create_refusals()
    test_workload()
    test_unstoppable()
    test_hanging_create()
    test_log()
finally:
    cleanup()
tap.finish()
