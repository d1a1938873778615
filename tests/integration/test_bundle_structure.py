"""Structural tests of `sealed-probe-proxy bundle --dry-run`: every hardening
field of config.json by name, the files it references, the runtime command
lines beside it, and proof that nothing from a request reaches any field
(docs/bundle.md).  It runs no sandbox, but each backend gets a bundle of its
own (under gVisor /tmp is a bind of a host tmpfs in the bundle, and the
command lines are runsc's), so it runs on every backend."""

import atexit
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import (BACKENDS, Tap, backend, cached_rootfs, env_path, option_example,  # noqa: E402
                        other_backends, require_root_and, unmount_under)
import sp_sbx  # noqa: E402

PROXY = env_path("SP_PROXY")
B = backend()
require_root_and("unshare")
ROOTFS = cached_rootfs()
with open(os.path.join(ROOTFS, "digest")) as f:
    ROOTFS_DIGEST = f.read().strip()

REPOS = ["acme/widgets", "acme/gadgets", "other/thing"]
MEMORY = 256 << 20
tap = Tap()
work = tempfile.mkdtemp(prefix="sp-bundle-test-")
os.chmod(work, 0o711)  # the sandbox's user-namespace root walks down to its bundle

# The dry runs without --state name the default state directory, which the
# docker and sbx backends key their containers by (its device and inode):
# it must exist.  A fresh machine has none until something stages, so the
# test makes it when it is missing, and removes what it made at the end,
# whatever ran before it.
DEFAULT_STATE = "/var/lib/sealed-probe/state"  # SP_DEFAULT_STATE (meson.build)
made_for_the_test = []
for d in ("/var/lib/sealed-probe", DEFAULT_STATE):
    if not os.path.isdir(d):
        os.mkdir(d, 0o700)
        made_for_the_test.append(d)


@atexit.register
def remove_what_the_test_made():
    for made in reversed(made_for_the_test):
        try:
            os.rmdir(made)  # only if still empty: something may have staged into it meanwhile
        except OSError:
            pass


def write_config(name, block):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        json.dump({"unrelatedHostSetting": "CANARY-CONFIG-7f3a", "sealedProbes": block}, f)
    return path


CONFIG = write_config("config.json", {"enabled": True, "privateRepos": REPOS, "runtime": B.runtime,
                                      "memoryLimit": "256m"})


def dry_run(out, script=b"print(1)\n", repo="acme/widgets", config=CONFIG, extra=(), env=None, wrap=()):
    script_path = os.path.join(work, "script-" + os.path.basename(out))
    with open(script_path, "wb") as f:
        f.write(script)
    argv = list(wrap) + [PROXY, "bundle", "--dry-run", "--config", config, "--repo", repo,
                         "--script", script_path, "--out", out, "--rootfs", ROOTFS] + list(extra) \
        + B.proxy_args(extra)
    return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=60, env=env)


def load(out):
    with open(os.path.join(out, "config.json")) as f:
        return json.load(f)


# ---- one baseline bundle, every field by name -------------------------------
base_dir = os.path.join(work, "base")
r = dry_run(base_dir, script=b"print('hello')\n")
if not tap.ok(r.returncode == 0 and r.stdout == (os.path.realpath(base_dir) + "\n").encode() and r.stderr == b"",
              "dry-run succeeds and prints only the bundle path", r.stderr.decode(errors="replace")):
    tap.finish()
c = load(base_dir)
p = c["process"]
lx = c["linux"]
res = lx["resources"]

tap.ok(set(c) == {"ociVersion", "process", "root", "hostname", "domainname", "mounts", "annotations", "linux"},
       "top level holds exactly ociVersion process root hostname domainname mounts annotations linux (no hooks)",
       sorted(c))
tap.ok(c["ociVersion"] == "1.0.2", "ociVersion is 1.0.2")
BASE_REAL = os.path.realpath(base_dir)
tap.ok(c["root"] == {"path": os.path.join(BASE_REAL, "rootfs", "root"), "readonly": True},
       "root is the bundle's own copy of the rootfs, read-only", c["root"])
with open(os.path.join(base_dir, "rootfs", "digest")) as f, open(os.path.join(ROOTFS, "digest")) as g:
    tap.ok(f.read() == g.read(), "the bundle's rootfs copy records the verified rootfs's digest")
with open("/proc/self/mountinfo") as f:
    bundle_fs = [ln.split() for ln in f if ln.split()[4] == BASE_REAL]
tap.ok(len(bundle_fs) == 1 and bundle_fs[0][3] == "/" and "tmpfs" in bundle_fs[0],
       "the bundle directory is a tmpfs of its own, so a sandbox run from it names no host path", bundle_fs)
tap.ok(c["hostname"] == "probe", "hostname is fixed")
tap.ok(c["domainname"] == "(none)", "domainname is fixed to the kernel's default", c.get("domainname"))
tap.ok(p["args"] == ["/usr/bin/python3", "-I", "-S", "-B", "/probe/probe.py"],
       "process.args is python3 -I -S -B /probe/probe.py", p["args"])
tap.ok(p["cwd"] == "/probe/repo", "process.cwd is /probe/repo")
PROBE_ROOT_ID, PROBE_ID = 2_100_000_000, 2_100_000_001  # slot 0 of the default --probe-ids range
if not B.user_namespace:
    # No user namespace under Docker: the probe runs as its slot's host probe
    # id directly (docs/runtimes.md, "The probe's identity").
    tap.ok(p["user"] == {"uid": PROBE_ID, "gid": PROBE_ID, "additionalGids": []},
           f"docker: process.user is slot 0's host probe id {PROBE_ID}:{PROBE_ID} with no additional groups",
           p["user"])
else:
    tap.ok(p["user"] == {"uid": 65534, "gid": 65534, "additionalGids": []},
           "process.user is 65534:65534 with no additional groups", p["user"])
tap.ok(p["env"] == ["PATH=/usr/bin", "LANG=C.UTF-8", "HOME=/tmp"], "process.env is the fixed minimal set", p["env"])
tap.ok(p["terminal"] is False, "process.terminal is false")
tap.ok(p["noNewPrivileges"] is True, "process.noNewPrivileges is true")
for capset in ("bounding", "effective", "inheritable", "permitted", "ambient"):
    tap.ok(p["capabilities"].get(capset) == [], f"process.capabilities.{capset} is empty")
tap.ok(set(p["capabilities"]) == {"bounding", "effective", "inheritable", "permitted", "ambient"},
       "process.capabilities names all five sets and nothing else")
rl = {x["type"]: x for x in p["rlimits"]}
tap.ok(len(rl) == len(p["rlimits"]) == 4, "process.rlimits holds exactly four limits", p["rlimits"])
# Under gvisor the sentry counts the probe's tasks itself: RLIMIT_NPROC holds
# the 64 that runc's pids cgroup holds, and the host pids cgroup the whole
# sandbox (docs/runtimes.md).
NPROC, HOST_PIDS = (64, 1024) if B.runs_on_sentry else (1024, 64)
for name, value in (("RLIMIT_CORE", 0), ("RLIMIT_FSIZE", 64 << 20), ("RLIMIT_NOFILE", 256), ("RLIMIT_NPROC", NPROC)):
    tap.ok(rl.get(name, {}).get("soft") == value and rl.get(name, {}).get("hard") == value,
           f"{name} is {value} (soft and hard)", rl.get(name))
tap.ok(p.get("oomScoreAdj") == 1000, "process.oomScoreAdj makes the probe the OOM killer's first choice")
tap.ok("apparmorProfile" not in p and "selinuxLabel" not in p and "consoleSize" not in p,
       "process has no LSM label or console settings to loosen")

ns = lx["namespaces"]
if not B.user_namespace:
    tap.ok(sorted(n["type"] for n in ns) == sorted(["pid", "network", "ipc", "uts", "mount", "cgroup"]),
           "docker: linux.namespaces: pid network ipc uts mount cgroup, no user namespace", ns)
else:
    tap.ok(sorted(n["type"] for n in ns) == sorted(["pid", "network", "ipc", "uts", "mount", "cgroup", "user"]),
           "linux.namespaces: pid network ipc uts mount cgroup user", ns)
tap.ok(all(set(n) == {"type"} for n in ns), "no namespace joins an existing one (no path)", ns)
MAPS = [{"containerID": 0, "hostID": PROBE_ROOT_ID, "size": 1}, {"containerID": 65534, "hostID": PROBE_ID, "size": 1}]
if not B.user_namespace:
    B.not_applicable(tap, "user-namespace mappings: only root and the probe, each onto a host id of the probe range",
                     "Docker has no per-container user namespace (userns-remap is daemon-wide), so the bundle has "
                     "none and the probe runs as its host probe id directly (process.user, checked above)")
    tap.ok("uidMappings" not in lx and "gidMappings" not in lx,
           "docker: no uidMappings or gidMappings at all", (lx.get("uidMappings"), lx.get("gidMappings")))
else:
    tap.ok(lx.get("uidMappings") == MAPS and lx.get("gidMappings") == MAPS,
           "user-namespace mappings: only root and the probe, each onto a host id of the probe range",
           (lx.get("uidMappings"), lx.get("gidMappings")))
tap.ok(res["memory"] == {"limit": MEMORY, "swap": MEMORY}, "memory limit is the config's, swap equal to it",
       res["memory"])
tap.ok(res["pids"] == {"limit": HOST_PIDS}, f"pids limit is {HOST_PIDS}", res["pids"])
tap.ok(res["cpu"] == {"quota": 100000, "period": 100000}, "cpu quota is one CPU", res["cpu"])
tap.ok(res["devices"] == [{"allow": False, "access": "rwm"}], "device cgroup denies everything", res["devices"])
tap.ok(lx["cgroupsPath"].startswith("/sealed-probe/"), "cgroupsPath is under /sealed-probe/", lx["cgroupsPath"])
# Host-wide state (docs/threat-model.md): /sys and /proc/sys whole, the
# names some kernels list, and every top-level entry of the host's /proc but
# the probe's own processes and the links into them.
PROC_ALLOWED = {"self", "thread-self", "mounts", "net"}
ALWAYS_MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                 "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/loadavg",
                 "/proc/uptime", "/proc/stat", "/proc/meminfo", "/proc/vmstat", "/proc/zoneinfo", "/proc/buddyinfo",
                 "/proc/pressure", "/proc/interrupts", "/proc/softirqs", "/proc/diskstats", "/proc/partitions",
                 "/proc/swaps", "/proc/cmdline", "/proc/config.gz", "/proc/kallsyms", "/proc/modules",
                 "/proc/key-users", "/proc/iomem", "/proc/ioports", "/proc/sys", "/sys"]
host_proc = {"/proc/" + n for n in os.listdir("/proc") if not n.isdigit() and n not in PROC_ALLOWED}
tap.ok(set(lx["maskedPaths"]) == set(ALWAYS_MASKED) | host_proc,
       "maskedPaths are /sys, /proc/sys, the names some kernels list, and every other top-level /proc entry "
       "but self, thread-self, mounts and net", sorted(set(lx["maskedPaths"]) ^ (set(ALWAYS_MASKED) | host_proc)))
tap.ok(lx["maskedPaths"] == sorted(lx["maskedPaths"]), "maskedPaths are sorted", lx["maskedPaths"][:5])
tap.ok(len(set(lx["maskedPaths"])) == len(lx["maskedPaths"]), "maskedPaths has no repeats", lx["maskedPaths"])
tap.ok(sorted(lx["readonlyPaths"]) == sorted(["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                              "/proc/sysrq-trigger"]),
       "readonlyPaths are runc's defaults", lx["readonlyPaths"])
tap.ok(lx["rootfsPropagation"] == "private", "rootfsPropagation is private")
LINUX_KEYS = {"namespaces", "uidMappings", "gidMappings", "resources", "cgroupsPath", "maskedPaths",
              "readonlyPaths", "rootfsPropagation", "seccomp"}
if not B.user_namespace:
    tap.ok(set(lx) == LINUX_KEYS - {"uidMappings", "gidMappings"},
           "docker: linux holds nothing else (no mappings, no devices, no sysctl)", sorted(lx))
else:
    tap.ok(set(lx) == LINUX_KEYS, "linux holds nothing else (no devices, no sysctl)", sorted(lx))

sc = lx["seccomp"]
tap.ok(sc["defaultAction"] == "SCMP_ACT_ERRNO", "seccomp default action denies", sc.get("defaultAction"))
tap.ok("SCMP_ARCH_X86_64" in sc["architectures"], "seccomp covers x86_64")
allowed = {n for rule in sc["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for n in rule["names"]}
for name in ("ptrace", "mount", "unshare", "setns", "bpf", "io_uring_setup", "keyctl", "clone3", "userfaultfd"):
    if name == "clone3" and B.runs_on_sentry:
        # runsc ignores errnoRet (every ERRNO rule answers EPERM), so the
        # ENOSYS rule for clone3 would break pthread_create; the gvisor
        # bundle lets clone3 reach the sentry, which answers ENOSYS itself
        # (docs/seccomp.md, "Under gVisor"), and serve's canary checks that.
        B.not_applicable(tap, f"seccomp does not allow {name}",
                         "runsc ignores errnoRet, so the bundle allows clone3 and the sentry answers ENOSYS itself "
                         "(docs/seccomp.md); checked next")
        runc_form = os.path.join(work, "runc-form")
        rr = dry_run(runc_form, config=write_config("runc-form.json", {"enabled": True, "privateRepos": REPOS,
                                                                        "runtime": "runc", "memoryLimit": "256m"}))
        theirs = load(runc_form)["linux"]["seccomp"] if rr.returncode == 0 else {}
        differ = [(a, b) for a, b in zip(sc["syscalls"], theirs.get("syscalls", [])) if a != b]
        tap.ok(rr.returncode == 0 and len(sc["syscalls"]) == len(theirs["syscalls"])
               and {k: v for k, v in sc.items() if k != "syscalls"} == {k: v for k, v in theirs.items()
                                                                        if k != "syscalls"}
               and differ == [({"names": ["clone3"], "action": "SCMP_ACT_ALLOW"},
                               {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})],
               "gvisor: the seccomp profile is runc's rule for rule, but for clone3: allowed instead of ENOSYS",
               differ or rr.stderr.decode(errors="replace"))
        continue
    tap.ok(name not in allowed, f"seccomp does not allow {name}")
socket_rules = [r for r in sc["syscalls"] if "socket" in r["names"]]
tap.ok(len(socket_rules) == 1 and socket_rules[0].get("args") == [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}],
       "seccomp allows socket only for AF_UNIX", socket_rules)

ann = c["annotations"]
LABELS = {"org.sealed-probe.run", "org.sealed-probe.invocation", "org.sealed-probe.rootfs.digest",
          "org.sealed-probe.version"}
if B.gvisor:
    # /probe/repo alone is the sandbox's own to cache (docs/runtimes.md, "The
    # repository's mount is exclusive"); test_gvisor_mounts.py runs it.
    HINT = "dev.gvisor.spec.mount.repo."
    repo_source = next((m["source"] for m in c["mounts"] if m["destination"] == "/probe/repo"), None)
    tap.ok(set(ann) == LABELS | {HINT + "share", HINT + "type", HINT + "source"}
           and {k: ann[k] for k in ann if k.startswith(HINT)}
           == {HINT + "share": "container", HINT + "type": "bind", HINT + "source": repo_source},
           "gvisor: annotations are the run labels and the mount hint that gives /probe/repo alone to the sandbox",
           ann)
else:
    tap.ok(set(ann) == LABELS, "annotations are the run labels", ann)
tap.ok(ann["org.sealed-probe.rootfs.digest"] == ROOTFS_DIGEST, "the rootfs digest annotation is the verified one")
tap.ok(ann["org.sealed-probe.run"].startswith("dry-"), "a dry run's run id says so", ann["org.sealed-probe.run"])

bundle = os.path.realpath(base_dir)
mounts = {m["destination"]: m for m in c["mounts"]}
COVERS = ["/proc/sys", "/dev/net", "/dev/pts", "/dev/shm"]
tap.ok(len(mounts) == len(c["mounts"]) == 7 + (len(COVERS) if B.runs_on_sentry else 0), "seven mounts (gvisor: and its "
       "four covers), no destination twice", [m["destination"] for m in c["mounts"]])
tap.ok(mounts["/proc"]["type"] == "proc", "/proc is a fresh proc")
tap.ok(mounts["/dev"]["type"] == "tmpfs" and "nosuid" in mounts["/dev"]["options"], "/dev is a minimal tmpfs")
if B.runs_on_sentry:
    # runsc 2022 ignores maskedPaths: empty read-only tmpfs mounts cover
    # what they would hide (docs/runtimes.md, "gVisor's named gaps").
    for dest in ["/sys"] + COVERS:
        m = mounts.get(dest, {})
        tap.ok(m.get("type") == "tmpfs" and {"ro", "nosuid", "nodev", "noexec"} <= set(m.get("options", [])),
               f"gvisor: {dest} is an empty read-only tmpfs", m)
else:
    tap.ok(mounts["/sys"]["type"] == "sysfs" and "ro" in mounts["/sys"]["options"], "/sys is read-only")
tmp = mounts["/tmp"]
if B.runs_on_sentry:
    # gVisor's own tmpfs ignores nr_inodes: /tmp is a bind of a host tmpfs
    # the proxy mounts in the bundle (docs/runtimes.md, "Mounts").
    tap.ok(tmp["type"] == "bind" and tmp["source"] == os.path.join(bundle, "tmp")
           and {"bind", "rw", "noexec", "nosuid", "nodev"} <= set(tmp["options"]),
           "gvisor: /tmp is a noexec nosuid nodev bind of the bundle's tmp", tmp)
    with open("/proc/self/mountinfo") as f:
        tmp_fs = [ln.split() for ln in f if ln.split()[4] == os.path.join(bundle, "tmp")]
    tmp_opts = set(tmp_fs[0][5].split(",")) | set(tmp_fs[0][-1].split(",")) if len(tmp_fs) == 1 else set()
    tmp_mode = stat.S_IMODE(os.stat(os.path.join(bundle, "tmp")).st_mode)
    tap.ok(len(tmp_fs) == 1 and "tmpfs" in tmp_fs[0] and {"nosuid", "nodev", "noexec", "size=16384k",
                                                           "nr_inodes=4096"} <= tmp_opts and tmp_mode == 0o1777,
           "gvisor: the bundle's tmp is a host tmpfs of its own: noexec nosuid nodev, 16m, 4096 inodes, mode 1777",
           (tmp_fs, oct(tmp_mode)))
else:
    tap.ok(tmp["type"] == "tmpfs" and {"noexec", "nosuid", "nodev", "size=16m"} <= set(tmp["options"]),
           "/tmp is a small noexec nosuid nodev tmpfs", tmp)
for dest, src, mode in (("/probe/repo", "repo", "rw"), ("/probe/probe.py", "probe.py", "ro"),
                        ("/probe/out", "out", "rw")):
    m = mounts[dest]
    tap.ok(m["type"] == "bind" and m["source"] == os.path.join(bundle, src)
           and {"bind", mode, "nosuid", "nodev", "noexec"} <= set(m["options"]),
           f"{dest} is a {mode} bind of the bundle's {src}", m)
binds = [m for m in c["mounts"] if "bind" in m["options"] or m["type"] == "bind"]
tap.ok(all(m["source"].startswith(bundle + "/") for m in binds),
       "every bind source is inside this bundle (no host path, socket or other seed)", binds)

names = sorted(os.listdir(base_dir))
expected_names = ["config.json", "out", "probe.py", "repo", "rootfs", "runtime-commands.json"]
expected_names += ["tmp"] if B.runs_on_sentry else []
tap.ok(names == expected_names, f"the bundle holds {' '.join(expected_names)}", names)
with open(os.path.join(base_dir, "runtime-commands.json")) as f:
    commands = json.load(f)
if B.runtime_is_daemon:
    # Docker has no command line: runtime-commands.json holds the Engine API
    # requests serve would send (docs/runtimes.md, "Dry run").
    ARGV_NA = ("docker has no runtime command line: runtime-commands.json holds the Engine API requests serve "
               "would send, checked under names of their own")
    B.not_applicable(tap, "runtime-commands.json names the binary's create, start, kill and delete, each with its "
                     "--root", ARGV_NA)
    B.not_applicable(tap, "every line carries exactly the binary's global flags between --root and the verb", ARGV_NA)
    reqs = commands.get("requests") or []
    steps = [q.get("step") for q in reqs]
    IMAGE = "sealed-probe/rootfs:" + ROOTFS_DIGEST.split(":", 1)[-1][:12]
    tap.ok(set(commands) == {"runtime", "image", "requests"} and commands["runtime"] == "docker"
           and commands["image"] == IMAGE,
           f"docker: runtime-commands.json is {{runtime: docker, image: {IMAGE}, requests}} and nothing else",
           {k: v for k, v in commands.items() if k != "requests"})
    tap.ok(steps == ["image", "create", "attach", "start", "wait (under the timeout)", "kill (on timeout or stop)",
                     "inspect", "remove"],
           "docker: the requests are image, create, attach, start, wait (under the timeout), kill (on timeout or "
           "stop), inspect, remove, in that order", steps)
    tap.ok(all(set(q) <= {"step", "method", "path", "body", "upgrade", "stdin"} and {"step", "method", "path"} <= set(q)
               and (("body" in q) == (q.get("step") == "create"))
               and (("stdin" in q) == ("upgrade" in q) == (q.get("step") == "attach")) for q in reqs),
           "docker: each request is {step, method, path}; only create carries a body, only attach an upgrade and "
           "when its connection (the stdin) closes", reqs)
    tap.ok([q.get("method") for q in reqs] == ["GET", "POST", "POST", "POST", "POST", "POST", "GET", "DELETE"],
           "docker: the methods are GET, POST, POST, POST, POST, POST, GET, DELETE", [q.get("method") for q in reqs])
    tap.ok(reqs and all(str(q.get("path", "")).startswith("/v1.41/") for q in reqs),
           "docker: every path is under the pinned API version, /v1.41", [q.get("path") for q in reqs])
    byname = dict(zip(steps, reqs))
    run = ann["org.sealed-probe.run"]
    container = [str(byname.get(k, {}).get("path", "")).split("/")[3:4]
                 for k in ("attach", "start", "wait (under the timeout)", "kill (on timeout or stop)", "inspect")]
    cref = container[0][0] if container[0] else None
    tap.ok(byname.get("image", {}).get("path") == f"/v1.41/images/{IMAGE}/json"
           and byname.get("create", {}).get("path") == f"/v1.41/containers/create?name=sp-{run}-0"
           and cref == f"sp-{run}-0" and all(c == [cref] for c in container)
           and byname.get("attach", {}).get("path") == f"/v1.41/containers/{cref}/attach?stream=1&stdin=1"
           and byname.get("start", {}).get("path") == f"/v1.41/containers/{cref}/start"
           and byname.get("wait (under the timeout)", {}).get("path") == f"/v1.41/containers/{cref}/wait"
           and byname.get("kill (on timeout or stop)", {}).get("path") == f"/v1.41/containers/{cref}/kill?signal=KILL"
           and byname.get("inspect", {}).get("path") == f"/v1.41/containers/{cref}/json"
           and byname.get("remove", {}).get("path") == f"/v1.41/containers/{cref}?force=1&v=1",
           f"docker: the image is looked up by its tag, the container is created as sp-{run}-0 (the dry run's "
           "container), and attach, start, wait, kill with SIGKILL, inspect and a forced remove all name it",
           [q.get("path") for q in reqs])
    body = byname.get("create", {}).get("body") or {}
    hc = body.get("HostConfig") or {}
    # The command is the fixed wrapper (docs/runtimes.md): python3 -I -S -B -c
    # CODE, then the count of the bundle's env, its env, its args; the
    # wrapper points fds 1 and 2 at /dev/null and execs the args with that
    # env; fd 0 stays the stdin the attach holds open.
    cmd, n = body.get("Cmd") or [], len(p["env"])
    tap.ok(body.get("Image") == IMAGE and cmd[:5] == ["/usr/bin/python3", "-I", "-S", "-B", "-c"]
           and "os.execve" in cmd[5] and "/dev/null" in cmd[5] and cmd[6:7] == [str(n)]
           and cmd[7:7 + n] == p["env"] and cmd[7 + n:] == p["args"] and body.get("Entrypoint") == []
           and body.get("WorkingDir") == p["cwd"] and body.get("Env") == p["env"]
           and body.get("User") == f"{PROBE_ID}:{PROBE_ID}",
           "docker: the create body runs the wrapper, which execs the bundle's args with exactly its env, in its "
           "cwd (no entrypoint) on the image, as the host probe id",
           {k: body.get(k) for k in ("Image", "Cmd", "Entrypoint", "WorkingDir", "Env", "User")})
    dev = ",".join(mounts["/dev"]["options"])
    tap.ok(hc.get("Tmpfs") == {"/tmp": ",".join(mounts["/tmp"]["options"]), "/dev": dev + ",dev",
                               "/sys/fs/cgroup": "ro,nosuid,nodev,noexec,mode=555,size=4k,nr_inodes=16"}
           and hc.get("IpcMode") == "none",
           "docker: HostConfig.Tmpfs has the bundle's /tmp and /dev (with dev: Docker adds nodev), so Docker "
           "mounts nothing of its own under /dev, an empty read-only /sys/fs/cgroup, and IpcMode is none",
           (hc.get("Tmpfs"), hc.get("IpcMode")))
    tap.ok(hc.get("NetworkMode") == "none" and body.get("NetworkDisabled") is True,
           "docker: HostConfig.NetworkMode is none and the network is disabled",
           (hc.get("NetworkMode"), body.get("NetworkDisabled")))
    tap.ok(hc.get("ReadonlyRootfs") is True, "docker: HostConfig.ReadonlyRootfs is true", hc.get("ReadonlyRootfs"))
    tap.ok(hc.get("CapDrop") == ["ALL"] and not hc.get("CapAdd") and hc.get("Privileged") is False,
           "docker: HostConfig.CapDrop is ALL, no CapAdd, and Privileged is false",
           (hc.get("CapDrop"), hc.get("CapAdd"), hc.get("Privileged")))
    tap.ok(hc.get("CgroupParent") == lx["cgroupsPath"] and lx["cgroupsPath"] == f"/sealed-probe/{run}-0",
           "docker: HostConfig.CgroupParent is the bundle's cgroupsPath, /sealed-probe/<run>-<inv> (the container's "
           "own cgroup below it)", (hc.get("CgroupParent"), lx["cgroupsPath"]))
    tap.ok(hc.get("PidsLimit") == HOST_PIDS, f"docker: HostConfig.PidsLimit is {HOST_PIDS}", hc.get("PidsLimit"))
    tap.ok(hc.get("Memory") == MEMORY and hc.get("MemorySwap") == MEMORY,
           "docker: HostConfig.Memory is the config's limit and MemorySwap equals it (no swap)",
           (hc.get("Memory"), hc.get("MemorySwap")))
    tap.ok(hc.get("Runtime") == "runc", "docker: HostConfig.Runtime is runc, stated", hc.get("Runtime"))
    tap.ok(hc.get("LogConfig") == {"Type": "none"},
           "docker: HostConfig.LogConfig is none: nothing the probe prints is kept on the daemon's disk",
           hc.get("LogConfig"))
    tap.ok(not body.get("Tty") and body.get("OpenStdin") is True and body.get("StdinOnce") is True
           and not any(body.get(k) for k in ("AttachStdin", "AttachStdout", "AttachStderr"))
           and "for i in (1,2):os.dup2" in cmd[5],
           "docker: no TTY, nothing attached at create; a stdin open for one attach, whose end the probe reads "
           "(the wrapper leaves fd 0)", body)
    tap.ok(sorted((m.get("Type"), m.get("Source"), m.get("Target"), m.get("ReadOnly")) for m in hc.get("Mounts") or [])
           == sorted([("bind", os.path.join(bundle, "repo"), "/probe/repo", False),
                      ("bind", os.path.join(bundle, "probe.py"), "/probe/probe.py", False),
                      ("bind", os.path.join(bundle, "out"), "/probe/out", False)])
           and not hc.get("Binds") and not body.get("Volumes"),
           "docker: the only mounts are binds of this bundle's repo, probe.py and out, all read-write (a read-only "
           "one loses nosuid, nodev and noexec; serve seals probe.py read-only at start)", hc.get("Mounts"))
    tap.ok(all(k in (body.get("Labels") or {}) and body["Labels"][k] == v for k, v in ann.items()),
           "docker: the container's labels carry the bundle's annotations", body.get("Labels"))
    with open(os.path.join(base_dir, "runtime-commands.json"), "rb") as f:
        described = f.read()
    sock = B.socket.encode()
    tap.ok(sock not in described and os.path.realpath(B.socket).encode() not in described
           and b"docker.sock" not in described and b"/var/run/docker" not in described,
           "docker: no Docker socket path anywhere in runtime-commands.json (given --docker-socket, it names none)",
           [w for w in (sock, b"docker.sock") if w in described])
    bundle_bytes = b""
    for dirpath, dirnames, filenames in os.walk(base_dir):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) != os.path.join(base_dir, "rootfs")]
        for fn in filenames:
            with open(os.path.join(dirpath, fn), "rb") as f:
                bundle_bytes += f.read()
    tap.ok(sock not in bundle_bytes and b"docker.sock" not in bundle_bytes,
           "docker: no file of the bundle (outside the rootfs copy) names the Docker socket")
elif B.sbx:
    # sbx is a CLI without --root or global flags: runtime-commands.json
    # holds the environment and the argv of create, exec, stop, rm and ls
    # serve would exec (docs/runtimes.md, "Dry run"), each checked below.
    ARGV_NA = ("sbx has no --root or global flags: runtime-commands.json holds its create, exec, stop, rm and ls "
               "argv, each checked word for word under names of their own")
    B.not_applicable(tap, "runtime-commands.json names the binary's create, start, kill and delete, each with its "
                     "--root", ARGV_NA)
    B.not_applicable(tap, "every line carries exactly the binary's global flags between --root and the verb", ARGV_NA)
    SBX_STEPS = ["create", "exec", "stop", "rm", "ls (confirms the VM is gone)"]
    cmds = commands.get("commands") or []
    steps = [q.get("step") for q in cmds]
    home = pwd.getpwuid(os.geteuid()).pw_dir
    tap.ok(set(commands) == {"runtime", "environment", "commands"} and commands["runtime"] == "sbx"
           and commands["environment"] == ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                           f"HOME={home}", "LC_ALL=C"],
           "sbx: runtime-commands.json is {runtime: sbx, environment, commands}, the environment exactly PATH (the "
           "runtime search path), HOME (the proxy account's, root's) and LC_ALL=C",
           {k: v for k, v in commands.items() if k != "commands"})
    tap.ok(steps == SBX_STEPS and all(set(q) == {"step", "argv"} for q in cmds),
           "sbx: the commands are create, exec, stop, rm and ls (confirms the VM is gone), in that order, each "
           "{step, argv}", cmds)
    tap.ok(cmds and all(q["argv"][0] == B.double.path for q in cmds),
           "sbx: every command's argv[0] is the --sbx binary", [q["argv"][:1] for q in cmds])
    argv = {q.get("step"): q.get("argv") or [] for q in cmds}
    # Without --state the VM's name ends in the key of the default state
    # directory, SP_DEFAULT_STATE (meson.build).
    VM = f"sp-{ann['org.sealed-probe.run']}-0.{sp_sbx.state_key(DEFAULT_STATE)}"
    create = argv.get("create", [])

    def flag(words, name):
        return [words[i + 1] for i, w in enumerate(words[:-1]) if w == name]

    tap.ok(create[1:3] == ["create", "shell"] and flag(create, "--name") == [VM]
           and flag(create, "--template") == [B.double.template] and "--network=none" in create
           and not [w for w in create if w.startswith("--network") and w != "--network=none"]
           and create.count("--quiet") == 1,
           "sbx: create shell names the dry-run VM sp-<run>-0.<state key> (the default state directory's), the "
           "template, --network=none and --quiet", (VM, create))
    fsize = rl.get("RLIMIT_FSIZE", {}).get("hard")
    tmp_size = [o[len("size="):] for o in tmp.get("options", []) if o.startswith("size=")]
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    disk = int(tmp_size[0][:-1]) * units[tmp_size[0][-1]] if tmp_size and tmp_size[0][-1] in units else \
        (int(tmp_size[0]) if tmp_size else None)
    quota, period = res["cpu"]["quota"], res["cpu"]["period"]
    cpus = f"{quota // period}" if quota % period == 0 else f"{quota * 1000 // period / 1000:.3f}"
    limits = {"--memory": str(res["memory"]["limit"]), "--pids-limit": str(res["pids"]["limit"]), "--cpus": cpus,
              "--ulimit-fsize": str(fsize), "--disk-limit": str(disk)}
    tap.ok(all(flag(create, k) == [v] for k, v in limits.items()),
           "sbx: create's limits are config.json's: --memory the memory limit, --pids-limit the pids limit, --cpus "
           "the cpu quota over its period, --ulimit-fsize RLIMIT_FSIZE, --disk-limit /tmp's size",
           (limits, create))
    sep = create.index("--") if "--" in create else len(create)
    tap.ok(flag(create[:sep], "--mount-target") == ["/probe/repo", "/probe/probe.py", "/probe/out"]
           and create[sep:] == ["--", os.path.join(bundle, "repo"), os.path.join(bundle, "probe.py") + ":ro",
                                os.path.join(bundle, "out")],
           "sbx: create's --mount-target's are /probe/repo, /probe/probe.py, /probe/out, and after -- this "
           "bundle's repo, probe.py:ro and out, in that order", create)
    tap.ok(create == [B.double.path, "create", "shell", "--name", VM, "--template", B.double.template,
                      "--network=none", "--cpus", cpus, "--memory", limits["--memory"], "--pids-limit",
                      limits["--pids-limit"], "--disk-limit", limits["--disk-limit"], "--ulimit-fsize",
                      limits["--ulimit-fsize"], "--quiet", "--mount-target", "/probe/repo", "--mount-target",
                      "/probe/probe.py", "--mount-target", "/probe/out", "--", os.path.join(bundle, "repo"),
                      os.path.join(bundle, "probe.py") + ":ro", os.path.join(bundle, "out")],
           "sbx: the create line holds those words and nothing else, in the documented order", create)
    ex = argv.get("exec", [])
    want_exec = [B.double.path, "exec", "--user", "65534:65534", "--workdir", p["cwd"]]
    for e in p["env"]:
        want_exec += ["--env", e]
    want_exec += [VM, "--"] + p["args"]
    tap.ok(p["cwd"] == "/probe/repo" and ex == want_exec,
           "sbx: exec is --user 65534:65534 --workdir /probe/repo, one --env per process.env entry, the VM, --, "
           "then exactly process.args", f"want {want_exec}\ngot  {ex}")
    tap.ok(argv.get("stop") == [B.double.path, "stop", VM] and argv.get("rm") == [B.double.path, "rm", VM]
           and argv.get("ls (confirms the VM is gone)") == [B.double.path, "ls", "-q"],
           "sbx: stop and rm name only the VM; the last step is ls -q", cmds[2:])
else:
    steps = [c["step"] for c in commands["commands"]]
    # runc's start is the read of the init's exec fifo, not a command
    # (docs/runtimes.md, "One run"); runsc's is `runsc start`.  runc's
    # removal is no command either: serve removes the reaped container's
    # cgroup and state directory itself, `delete` being its fallback.
    fifo = [c for c in commands["commands"] if "exec_fifo" in c]
    lines = [c for c in commands["commands"] if "argv" in c]
    root_of = lines[0]["argv"][2] if lines and len(lines[0]["argv"]) > 3 else ""
    want_steps = ["create", "start", "kill (on timeout or stop)"] + (["remove"] if B.name == "runc" else []) + ["delete"]
    tap.ok(commands["runtime"] == B.runtime and steps == want_steps
           and all(c["argv"][1] == "--root" and os.path.basename(c["argv"][0]) == B.binary_name for c in lines)
           and (len(lines) == 3 and [c["step"] for c in fifo] == ["start"]
                and fifo[0]["exec_fifo"] == os.path.join(root_of, lines[0]["argv"][-1], "exec.fifo")
                if B.name == "runc" else len(lines) == 4 and not fifo),
           f"runtime-commands.json names {B.binary_name}'s create, start, kill and delete, each with its --root "
           "(runc's start: the init's exec fifo there)", commands)
    if B.name == "runc":
        remove = next((c for c in commands["commands"] if c["step"] == "remove"), {})
        tap.ok(remove == {"step": "remove", "cgroup": lx["cgroupsPath"],
                          "state": os.path.join(root_of, lines[0]["argv"][-1])},
               "runc: the remove step names the bundle's cgroupsPath and the container's directory in its --root",
               remove)
    verbs = {"create": "create", "start": "start", "kill (on timeout or stop)": "kill", "delete": "delete"}
    tap.ok(all(c["argv"][3:3 + len(B.flags)] == list(B.flags) and c["argv"][3 + len(B.flags)] == verbs.get(c["step"])
               for c in lines),
           f"every line carries exactly {B.binary_name}'s global flags ({' '.join(B.flags) or 'none'}) between --root "
           "and the verb", commands)
    forbidden = ("--allow-flag-override", "--debug", "--debug-log", "--strace", "--profile")
    tap.ok(not [a for c in lines for a in c["argv"] if a.split("=", 1)[0] in forbidden],
           "no line carries a flag-override, debug, strace or profile flag", commands)
    tap.ok(commands["commands"][0]["argv"][-5:-1] == ["--bundle", base_dir, "--pid-file",
                                                      commands["commands"][0]["argv"][-2]]
           and commands["commands"][0]["argv"][-1].startswith("sp-dry-"),
           "the create line names this bundle and a dry-run container id", commands["commands"][0]["argv"])


def owner_mode(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), stat.S_IFMT(st.st_mode)


tap.ok(owner_mode(os.path.join(base_dir, "repo")) == (PROBE_ID, PROBE_ID, 0o700, stat.S_IFDIR)
       and os.listdir(os.path.join(base_dir, "repo")) == [], "repo/ is an empty 0700 directory of the probe's host id")
tap.ok(owner_mode(os.path.join(base_dir, "out")) == (PROBE_ID, PROBE_ID, 0o600, stat.S_IFREG)
       and os.path.getsize(os.path.join(base_dir, "out")) == 0, "out is an empty 0600 file of the probe's host id")
tap.ok(owner_mode(os.path.join(base_dir, "probe.py")) == (0, 0, 0o444, stat.S_IFREG),
       "probe.py is root's and read-only")
with open(os.path.join(base_dir, "probe.py"), "rb") as f:
    tap.ok(f.read() == b"print('hello')\n", "probe.py holds exactly the script's bytes")
tap.ok(owner_mode(os.path.join(base_dir, "config.json"))[:3] == (0, 0, 0o444), "config.json is root's and read-only")


# ---- nothing from a request reaches config.json or runtime-commands.json ----
def normalized(out):
    """config.json and runtime-commands.json with the two values the proxy
    chooses per bundle (its directory and its run id) replaced by
    placeholders."""
    text = open(os.path.join(out, "config.json")).read()
    run = json.loads(text)["annotations"]["org.sealed-probe.run"]
    text += "\n" + open(os.path.join(out, "runtime-commands.json")).read()
    return text.replace(os.path.realpath(out), "@BUNDLE@").replace(run, "@RUN@")


baseline = normalized(base_dir)
smuggles = {
    "json_fragment_args": b'", "args": ["/bin/sh", "-c", "id"], "privileged": true, "x": "\n',
    "launch_controls_as_comments": b"# --privileged --net=host --cap-add=ALL -v /:/host\nimport os\n",
    "oci_document": json.dumps({"ociVersion": "1.0.2", "process": {"user": {"uid": 0}},
                                "linux": {"namespaces": []}}).encode(),
    "nul_and_control_bytes": b"print(1)\x00\x01\x1b[2J\r\n\"'\\",
    "largest_script": b"#" * (64 * 1024 - 1) + b"\n",
    "path_like": b"../../../../etc/passwd\n/var/run/docker.sock\n",
}
for name, script in smuggles.items():
    out = os.path.join(work, "smuggle-" + name)
    r = dry_run(out, script=script)
    ok = r.returncode == 0 and normalized(out) == baseline
    with open(os.path.join(out, "probe.py"), "rb") if r.returncode == 0 else open(os.devnull, "rb") as f:
        ok = ok and f.read() == script
    tap.ok(ok, f"a script carrying {name} changes only probe.py's bytes (not config.json, not "
           "runtime-commands.json)", r.stderr.decode(errors="replace"))
for repo in REPOS[1:]:
    out = os.path.join(work, "repo-" + repo.replace("/", "-"))
    r = dry_run(out, script=b"print('hello')\n", repo=repo)
    tap.ok(r.returncode == 0 and normalized(out) == baseline and repo not in normalized(out),
           f"choosing repository {repo} changes nothing in config.json or runtime-commands.json",
           r.stderr.decode(errors="replace"))

# ---- no network, no credentials ---------------------------------------------
out = os.path.join(work, "offline")
secret = "ghp_CANARYc4n4ryC4N4RYcanary0000000000"
r = dry_run(out, script=b"print('hello')\n", wrap=["unshare", "--net", "env", "-i", f"GH_TOKEN={secret}",
                                                  f"GITHUB_TOKEN={secret}", "PATH=/usr/bin:/bin"])
tap.ok(r.returncode == 0 and normalized(out) == baseline,
       "dry-run works with no network at all (a fresh network namespace) and an empty environment",
       r.stderr.decode(errors="replace"))
leaks = []
for dirpath, dirnames, filenames in os.walk(out):
    for fn in filenames:
        with open(os.path.join(dirpath, fn), "rb") as f:
            data = f.read()
        for canary in (secret.encode(), b"CANARY-CONFIG-7f3a"):
            if canary in data:
                leaks.append((fn, canary))
tap.ok(not leaks and secret.encode() not in r.stdout + r.stderr,
       "canary: no token from the environment and no unrelated config value appears in the bundle or output", leaks)

# ---- bad input: a clear error naming the field, and nothing left behind -----
big = b"#" * (64 * 1024 + 1)
disabled = write_config("disabled.json", {"enabled": False, "privateRepos": REPOS})
cases = [
    ("repo_not_allowed", dict(repo="acme/secret"), 1, b"--repo"),
    ("repo_not_normalized", dict(repo="Acme/Widgets"), 1, b"--repo"),
    ("empty_script", dict(script=b""), 1, b"--script"),
    ("oversized_script", dict(script=big), 1, b"--script"),
    ("disabled_config", dict(config=disabled), 1, b"sealedProbes.enabled"),
    ("unknown_option", dict(extra=["--privileged"]), 2, b"--privileged"),
    ("probe_ids_below_the_floor", dict(extra=["--probe-ids", "65534"]), 2, b"--probe-ids"),
    ("probe_ids_past_the_ceiling", dict(extra=["--probe-ids", "2147483647"]), 2, b"--probe-ids"),
    ("probe_ids_not_a_number", dict(extra=["--probe-ids", "0x10000"]), 2, b"--probe-ids"),
]
# Another backend's binary option with this backend's config: refused, naming it.
for other in other_backends(B.name):
    option = BACKENDS[other]["option"]
    cases.append((f"{option.lstrip('-')}_option_of_backend_{other}",
                  dict(extra=[option, option_example(other)]), 1, option.encode()))
for name, kwargs, status, field in cases:
    out = os.path.join(work, "bad-" + name)
    r = dry_run(out, **kwargs)
    tap.ok(r.returncode == status and field in r.stderr and r.stdout == b"" and not os.path.exists(out),
           f"{name}: exit {status}, the error names {field.decode()}, no directory is created",
           f"exit {r.returncode}: {r.stderr.decode(errors='replace')}")
hidden = os.path.join(work, "private-dir")
os.mkdir(hidden, 0o700)
r = dry_run(os.path.join(hidden, "bundle"))
tap.ok(r.returncode == 1 and b"not searchable by others" in r.stderr and hidden.encode() in r.stderr
       and os.listdir(hidden) == [],
       "an --out below a directory others cannot search is refused, naming it (the sandbox's root could not "
       "reach the bundle), and leaves nothing", r.stderr.decode(errors="replace"))
r = dry_run(os.path.join(work, "other-range"), extra=["--probe-ids", "1000000000"])
if not B.user_namespace:
    moved = load(os.path.join(work, "other-range")) if r.returncode == 0 else {}
    with open(os.path.join(work, "other-range", "runtime-commands.json")) if r.returncode == 0 else \
            open(os.devnull) as f:
        moved_reqs = json.loads(f.read() or "{}").get("requests", [])
    moved_body = next((q.get("body") or {} for q in moved_reqs if q.get("step") == "create"), {})
    tap.ok(r.returncode == 0 and moved["process"]["user"] == {"uid": 1_000_000_001, "gid": 1_000_000_001,
                                                             "additionalGids": []}
           and moved_body.get("User") == "1000000001:1000000001" and "uidMappings" not in moved["linux"],
           "docker: --probe-ids moves the bundle's identity (process.user and the create's User) to slot 0's probe "
           "id of the range it names", r.stderr.decode(errors="replace") or (moved.get("process", {}).get("user"),
                                                                             moved_body.get("User")))
else:
    tap.ok(r.returncode == 0 and load(os.path.join(work, "other-range"))["linux"]["uidMappings"]
           == [{"containerID": 0, "hostID": 1_000_000_000, "size": 1},
               {"containerID": 65534, "hostID": 1_000_000_001, "size": 1}],
           "--probe-ids moves the bundle's identity to slot 0 of the range it names",
           r.stderr.decode(errors="replace"))
r = subprocess.run([PROXY, "bundle", "--config", CONFIG, "--repo", "acme/widgets", "--script", "/dev/null",
                    "--out", os.path.join(work, "no-dry-run"), *B.proxy_args()], capture_output=True,
                   stdin=subprocess.DEVNULL)
tap.ok(r.returncode == 2 and b"--dry-run" in r.stderr and not os.path.exists(os.path.join(work, "no-dry-run")),
       "without --dry-run the verb refuses (exit 2) and starts nothing", r.stderr.decode(errors="replace"))
r = dry_run(base_dir)
tap.ok(r.returncode == 1 and b"exists" in r.stderr and normalized(base_dir) == baseline
       and open(os.path.join(base_dir, "probe.py"), "rb").read() == b"print('hello')\n",
       "an existing --out is refused and left untouched", r.stderr.decode(errors="replace"))

# ---- a tampered rootfs is a hard error --------------------------------------
tampered = os.path.join(work, "tampered-rootfs")
shutil.copytree(ROOTFS, tampered, symlinks=True)
target = os.path.join(tampered, "root", "usr", "lib", "python3.11", "os.py")
os.chmod(target, 0o644)
with open(target, "ab") as f:
    f.write(b"\n# tampered\n")
os.chmod(target, 0o444)
out = os.path.join(work, "from-tampered")
r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", CONFIG, "--repo", "acme/widgets", "--script",
                    os.path.join(base_dir, "probe.py"), "--out", out, "--rootfs", tampered, *B.proxy_args()],
                   capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
tap.ok(r.returncode == 1 and b"--rootfs" in r.stderr and ROOTFS_DIGEST.encode() in r.stderr
       and not os.path.exists(out),
       "a rootfs whose content no longer matches its digest is refused, naming the digest, before any bundle",
       r.stderr.decode(errors="replace"))


# ---- bundle --remove: a dry-run bundle goes, anything else stays -------------

def mounts_at_or_under(path):
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


def remove(target, *more):
    return subprocess.run([PROXY, "bundle", "--remove", target, *more], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


gone = os.path.join(work, "to-remove")
r = dry_run(gone)
made = r.returncode == 0 and mounts_at_or_under(gone)
r = remove(gone) if made else r
tap.ok(made and r.returncode == 0 and r.stdout == "" and r.stderr == "" and not os.path.lexists(gone)
       and not mounts_at_or_under(gone),
       "bundle --remove unmounts a dry-run bundle (its tmpfs and all below it) and removes its directory, "
       "silently", (r.returncode, r.stderr))

# Look-alikes: each is refused, named, and left exactly as it was.
plain = os.path.join(work, "plain-dir")
os.makedirs(os.path.join(plain, "rootfs"))
for name in ("config.json", "runtime-commands.json"):
    with open(os.path.join(plain, name), "w") as f:
        f.write("{}")
empty_fs = os.path.join(work, "empty-tmpfs")
os.mkdir(empty_fs)
subprocess.run(["mount", "-t", "tmpfs", "sp-not-a-bundle", empty_fs], check=True)
real = os.path.join(work, "kept-bundle")
link = os.path.join(work, "link-to-bundle")
kept = dry_run(real).returncode == 0
os.symlink(real, link)
for target, why in ((plain, "a directory with a bundle's files but no tmpfs of its own"),
                    (empty_fs, "a tmpfs that holds no bundle"),
                    (link, "a symbolic link to a bundle"),
                    (os.path.join(work, "no-such-dir"), "a path that does not exist")):
    before = sorted(os.listdir(target)) if os.path.isdir(target) else None
    mounted = mounts_at_or_under(os.path.realpath(target))
    r = remove(target)
    tap.ok(r.returncode == 1 and "--remove" in r.stderr and target in r.stderr
           and (sorted(os.listdir(target)) if os.path.isdir(target) else None) == before
           and mounts_at_or_under(os.path.realpath(target)) == mounted,
           f"bundle --remove refuses {why}, naming it, and leaves it as it was", r.stderr)
tap.ok(kept and os.path.isfile(os.path.join(real, "config.json")),
       "the bundle the refused link pointed at is still there")
r = remove(real, "--out", plain)
tap.ok(r.returncode == 2 and "--remove takes no other option" in r.stderr and os.path.isdir(real),
       "bundle --remove with another option is a usage error that removes nothing", r.stderr)
tap.ok(remove(real).returncode == 0 and not os.path.lexists(real), "and the bundle itself then goes")

unmount_under(work)
subprocess.run(["chmod", "-R", "u+w", work])
shutil.rmtree(work, ignore_errors=True)
tap.finish()
