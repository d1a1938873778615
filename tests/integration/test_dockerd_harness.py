"""The project's own dockerd (scripts/dockerd) and the docker half of the
harness (sp_harness.py), before any docker backend exists: the daemon that
scripts/test starts answers on SP_DOCKER_SOCKET with API 1.41 or newer, runc
and seccomp, and no bridge network; the harness's label queries, force-deletes
and its replay of a dry-run bundle's requests (the docker `runc run`) work
against it; `scripts/dockerd stop` stops it, what it started and its mounts,
and no other process named dockerd or containerd-shim; `start` brings it back,
idempotently, also after a kill -9.  It only ever talks to SP_DOCKER_SOCKET,
never to /var/run/docker.sock.

Not in the backend matrix: registered once (tests/meson.build), alone (it
restarts the daemon).  SP_DOCKER_SOCKET unset: SKIP, a failure under CI=true."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sp_harness as H  # noqa: E402
from sp_harness import Tap  # noqa: E402

if os.geteuid() != 0:
    H.skip_all("needs root: scripts/dockerd runs the project's dockerd as root (CI runs as root)")
SOCK = H.docker_socket()
if SOCK is None:
    why = ("SP_DOCKER_SOCKET is not set: scripts/test starts the project's dockerd (scripts/dockerd start) "
           f"and sets it to {H.PROJECT_DOCKER_SOCKET}")
    if H.ci():
        H.bail_out(why + "; under CI=true that is a failure")
    H.skip_all(why)
if os.path.realpath(SOCK) in {os.path.realpath(p) for p in H.SYSTEM_DOCKER_SOCKETS}:
    H.bail_out(f"SP_DOCKER_SOCKET={SOCK} is a system Docker daemon's socket; the tests use the project's own")
SCRIPT = H.env_path("SP_DOCKERD_SCRIPT")
RUN_DIR = "/run/sealed-probe-test"
EXEC_ROOT = f"{RUN_DIR}/docker-exec"
DATA_ROOT = "/var/lib/sealed-probe-test/docker"
PIDFILE = f"{RUN_DIR}/docker.pid"

tap = Tap()
B = H.DockerBackend(SOCK)
work = tempfile.mkdtemp(prefix="sp-dockerd-")
os.chmod(work, 0o711)
decoys = []


def api(method, path, body=None):
    return H.docker_api(method, path, body, socket_path=SOCK)


def dockerd(verb):
    return subprocess.run([SCRIPT, verb], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180)


def uid_processes(uid):
    """pids of the host processes whose real uid is uid."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                if next(int(ln.split()[1]) for ln in f if ln.startswith("Uid:")) == uid:
                    out.append(int(pid))
        except (OSError, StopIteration, ValueError):
            continue
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def our_pid():
    try:
        with open(PIDFILE) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def mounts_below(*tops):
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if any(point == t or point.startswith(t + "/") for t in tops):
                found.append(point)
    return found


# ---- a rootfs image and bundles of requests, as a docker dry run describes them
ROOTFS = H.cached_rootfs()
with open(os.path.join(ROOTFS, "digest")) as f:
    DIGEST = f.read().strip()
IMAGE = f"sealed-probe-test/rootfs:{DIGEST.split(':', 1)[1][:12]}"
PROBE_UID = 2_000_000_000 + (os.getpid() % 100000) * 64


def make_bundle(name, script, uid=PROBE_UID, steps=("create", "start", "wait", "kill", "remove")):
    """A directory shaped like a docker dry-run bundle: probe.py, out (the
    probe's), rootfs/ (a link to the built rootfs: root/ and digest) and
    runtime-commands.json, whose requests run python3 /probe/probe.py as uid
    with no network, writing /probe/out."""
    bundle = os.path.join(work, name)
    os.mkdir(bundle, 0o711)
    with open(os.path.join(bundle, "probe.py"), "w") as f:
        f.write(script)
    out = os.path.join(bundle, "out")
    open(out, "w").close()
    os.chown(out, uid, uid)
    os.chmod(out, 0o600)
    os.symlink(ROOTFS, os.path.join(bundle, "rootfs"))
    cname = f"sp-dryrun-{name}"
    body = {"Image": IMAGE, "Cmd": ["/usr/bin/python3", "-I", "/probe/probe.py"], "User": f"{uid}:{uid}",
            "Env": [], "WorkingDir": "/", "NetworkDisabled": True,
            "Labels": {"org.sealed-probe.run": "dryrun", "org.sealed-probe.invocation": "1",
                       "org.sealed-probe.test": "dockerd-harness"},
            "HostConfig": {"NetworkMode": "none", "ReadonlyRootfs": True,
                           "Binds": [f"{bundle}/probe.py:/probe/probe.py:ro", f"{out}:/probe/out:rw"],
                           "LogConfig": {"Type": "json-file", "Config": {}}}}
    described = {
        "create": {"step": "create", "method": "POST", "path": f"/v1.41/containers/create?name={cname}",
                   "body": body},
        "start": {"step": "start", "method": "POST", "path": f"/v1.41/containers/{cname}/start"},
        "wait": {"step": "wait", "method": "POST", "path": f"/v1.41/containers/{cname}/wait"},
        "wait-first": {"step": "wait", "method": "POST",
                       "path": f"/v1.41/containers/{cname}/wait?condition=next-exit"},
        "kill": {"step": "kill (on timeout or stop)", "method": "POST",
                 "path": f"/v1.41/containers/{cname}/kill?signal=KILL"},
        "remove": {"step": "remove", "method": "DELETE", "path": f"/v1.41/containers/{cname}?force=true"},
    }
    with open(os.path.join(bundle, "runtime-commands.json"), "w") as f:
        json.dump({"runtime": "docker", "requests": [described[s] for s in steps]}, f)
    return bundle


def read_out(bundle):
    with open(os.path.join(bundle, "out")) as f:
        return f.read()


# The interfaces from the network namespace's own list (/sys is masked).
ANSWER = ('import json, os\nnet = sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:])\n'
          'with open("/probe/out", "w") as f:\n'
          '    json.dump({"result": "YES", "uid": os.getuid(), "net": net}, f)\n')

def main():
    # ---- the daemon -----------------------------------------------------------
    why = H.docker_ping(SOCK)
    if not tap.ok(why is None, f"the project's dockerd answers /_ping with OK at SP_DOCKER_SOCKET ({SOCK})", why):
        return
    status, version = api("GET", "/version")
    api_version = tuple(int(x) for x in str((version or {}).get("ApiVersion", "0.0")).split("."))
    tap.ok(status == 200 and api_version >= (1, 41), "/version: ApiVersion is 1.41 or newer", version)
    status, info = api("GET", "/info")
    info = info if isinstance(info, dict) else {}
    tap.ok(status == 200 and "runc" in (info.get("Runtimes") or {}), "/info lists the runtime runc",
           info.get("Runtimes"))
    tap.ok(any(str(o).startswith("name=seccomp") for o in info.get("SecurityOptions") or []),
           "/info lists seccomp among SecurityOptions", info.get("SecurityOptions"))
    status, networks = api("GET", "/networks")
    names = sorted(n.get("Name") for n in networks) if isinstance(networks, list) else networks
    tap.ok(status == 200 and isinstance(names, list) and "bridge" not in names and "none" in names,
           "no bridge network (--bridge none): containers can only have none or host", names)
    tap.ok(info.get("DockerRootDir") == DATA_ROOT, f"its data root is the project's ({DATA_ROOT})",
           info.get("DockerRootDir"))
    # The harness refuses a system daemon's socket outright.
    try:
        H.docker_api("GET", "/_ping", socket_path="/var/run/docker.sock")
        refused = None
    except H.DockerError as e:
        refused = str(e)
    tap.ok(refused is not None and "system Docker" in refused,
           "docker_api refuses /var/run/docker.sock without connecting to it", refused)

    # ---- the harness's label queries and force-deletes ------------------------
    state = os.path.join(work, "state")
    os.mkdir(state, 0o700)
    run_root = B.run_root(state, "0123456789ab")
    os.makedirs(run_root)
    taken = B.occupy(run_root, "sp-0123456789ab-7")
    left = B.leftover_containers(state)
    tap.ok(B.containers(run_root) == {"sp-0123456789ab-7"} and len(left) == 1
           and H.docker_state_key(state) in left[0],
           "a container labelled with the state's key and run is found by containers() and leftover_containers()",
           (B.containers(run_root), left))
    r = api("POST", "/containers/create?name=sp-0123456789ab-7", {"Image": "sealed-probe-test/empty:1", "Cmd": ["/x"]})
    tap.ok(r[0] == 409, "occupy(): creating the same name again is refused (409), as serve's create would be", r)
    B.release(taken)
    tap.ok(B.containers(run_root) == set() and not os.path.lexists(taken),
           "release() removes the container and its marker", B.containers(run_root))
    B.occupy(run_root, "sp-0123456789ab-8")
    B.force_delete_state(state)
    tap.ok(B.leftover_containers(state) == [], "force_delete_state() removes every container of the state",
           B.leftover_containers(state))
    other = os.path.join(work, "other-state")
    os.makedirs(B.run_root(other, "0123456789ab"))
    B.occupy(B.run_root(other, "0123456789ab"), f"sp-other-{os.getpid()}")
    B.force_delete_state(state)
    tap.ok(B.leftover_containers(state) == [] and len(B.leftover_containers(other)) == 1,
           "control: another state directory's container is neither reported nor removed",
           B.leftover_containers(other))
    B.force_delete_state(other)

    # ---- the replay of a dry-run bundle's requests (the docker `runc run`) ----
    with contextlib.suppress(H.DockerError):
        H.docker_remove(f"sp-replay-{os.getpid()}", SOCK)
    bundle = make_bundle("answer", ANSWER)
    cid = f"sp-replay-{os.getpid()}"
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=600, env={"PATH": "/usr/bin:/bin"})
    try:
        out = json.loads(read_out(bundle))
    except ValueError:
        out = {}
    tap.ok(run.returncode == 0 and out.get("result") == "YES",
           "run_argv replays create, start, wait and remove: the probe writes /probe/out and exits 0",
           f"exit {run.returncode}: {run.stderr} out {out}")
    tap.ok(out.get("uid") == PROBE_UID and out.get("net") == ["lo"],
           "the replayed body is the daemon's: User ID:ID as given, no network but lo", out)
    status, image = api("GET", f"/images/{IMAGE}/json")
    tap.ok(status == 200 and image["Config"]["Labels"].get("org.sealed-probe.rootfs.digest") == DIGEST,
           "a missing image is imported from the bundle's rootfs, labelled with its digest", image)
    tap.ok(api("GET", f"/containers/{cid}/json")[0] == 404 and api("GET", "/containers/sp-dryrun-answer/json")[0]
           == 404, "the container (named by the test, not the dry run) is removed after the wait", cid)

    bundle = make_bundle("exit3", 'import sys\nprint("to stderr", file=sys.stderr)\nsys.exit(3)\n')
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=600)
    tap.ok(run.returncode == 3 and "to stderr" in run.stderr,
           "the replay exits with the probe's exit status (3) and relays its stderr", (run.returncode, run.stderr))

    bundle = make_bundle("waitfirst", ANSWER, steps=("create", "wait-first", "start", "remove"))
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=600)
    tap.ok(run.returncode == 0 and '"YES"' in read_out(bundle),
           "a wait described before the start (condition next-exit) is in place first", run.stderr)

    bundle = make_bundle("badstart", ANSWER)
    with open(os.path.join(bundle, "runtime-commands.json")) as f:
        doc = json.load(f)
    doc["requests"][0]["body"]["Cmd"] = ["/nonexistent"]
    with open(os.path.join(bundle, "runtime-commands.json"), "w") as f:
        json.dump(doc, f)
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    tap.ok(run.returncode == 125 and "start" in run.stderr and api("GET", f"/containers/{cid}/json")[0] == 404,
           "a failing start: exit 125 naming the step, and the container is still removed",
           (run.returncode, run.stderr))

    # A sleeper, for kill_argv and delete_argv.
    bundle = make_bundle("sleeper", "import time\ntime.sleep(600)\n", steps=("create", "start"))
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    running = api("GET", f"/containers/{cid}/json")
    killed = subprocess.run(B.kill_argv(None, cid), capture_output=True, text=True)
    stopped = H.docker_api("POST", f"/containers/{cid}/wait", socket_path=SOCK, timeout=60)
    deleted = subprocess.run(B.delete_argv(None, cid), capture_output=True, text=True)
    tap.ok(running[0] == 200 and running[1]["State"]["Running"] and killed.returncode == 0
           and stopped[1].get("StatusCode") == 137 and deleted.returncode == 0
           and api("GET", f"/containers/{cid}/json")[0] == 404,
           "kill_argv kills a running container (137) and delete_argv removes it",
           (running[0], killed.stderr, stopped, deleted.stderr))

    # ---- stop and start ----------------------------------------------------------
    if os.path.realpath(SOCK) != os.path.realpath(H.PROJECT_DOCKER_SOCKET):
        for name in ("stop", "start", "start_after_kill9"):
            tap.n += 1
            print(f"ok {tap.n} - scripts/dockerd {name} # SKIP SP_DOCKER_SOCKET={SOCK} is not scripts/dockerd's "
                  f"socket ({H.PROJECT_DOCKER_SOCKET})", flush=True)
        return

    # Decoys: processes named dockerd and containerd-shim-runc-v2 whose
    # argv names the system's socket and even ours: stop must leave them be.
    for argv0, args in (("dockerd", ["-H", "unix:///var/run/docker.sock", "--pidfile", PIDFILE,
                                     "-H", f"unix://{SOCK}"]),
                        ("containerd-shim-runc-v2", ["-namespace", "moby", "-id", "decoy", "-address",
                                                     f"{RUN_DIR}/containerd/containerd.sock"])):
        decoys.append(subprocess.Popen([argv0, "-c", "import time; time.sleep(900)", *args],
                                       executable="/usr/bin/python3", stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    # A probe running when the daemon stops.
    sleeper_uid = PROBE_UID + 1
    bundle = make_bundle("sleeper-stop", "import time\ntime.sleep(600)\n", uid=sleeper_uid,
                         steps=("create", "start"))
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    before = uid_processes(sleeper_uid)
    old_pid = our_pid()
    r = dockerd("stop")
    after = [p for p in uid_processes(sleeper_uid) if alive(p)]
    left_mounts = mounts_below(EXEC_ROOT, DATA_ROOT, f"{RUN_DIR}/containerd")
    tap.ok(r.returncode == 0 and before and not after and H.docker_ping(SOCK) is not None
           and old_pid is not None and not alive(old_pid) and not os.path.exists(PIDFILE) and not left_mounts,
           "scripts/dockerd stop: the daemon and a running probe are gone, the socket does not answer, no mount is "
           "left under its roots", f"exit {r.returncode} {r.stdout} {r.stderr} probe before {before} after {after} "
                                   f"dockerd {old_pid} mounts {left_mounts}")
    tap.ok(all(d.poll() is None for d in decoys),
           "scripts/dockerd stop leaves other processes named dockerd and containerd-shim-runc-v2 alone",
           [d.poll() for d in decoys])
    st = dockerd("status")
    tap.ok(st.returncode == 1 and "not running" in st.stdout, "scripts/dockerd status: not running, exit 1",
           st.stdout + st.stderr)

    r = dockerd("start")
    pid = our_pid()
    again = dockerd("start")
    st = dockerd("status")
    tap.ok(r.returncode == 0 and H.docker_ping(SOCK) is None and pid and alive(pid)
           and again.returncode == 0 and "already running" in again.stdout and our_pid() == pid
           and st.returncode == 0 and "API 1." in st.stdout,
           "scripts/dockerd start brings it back; a second start is idempotent; status says running",
           f"{r.stdout} {r.stderr} / {again.stdout} {again.stderr} / {st.stdout}")

    # kill -9 with a probe running: the next start cleans up and starts clean.
    bundle = make_bundle("sleeper-kill9", "import time\ntime.sleep(600)\n", uid=sleeper_uid,
                         steps=("create", "start"))
    run = subprocess.run(B.run_argv(None, bundle, cid), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    before = uid_processes(sleeper_uid)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    r = dockerd("start")
    status, listed = api("GET", "/containers/json?all=1")
    after = [p for p in uid_processes(sleeper_uid) if alive(p)]
    tap.ok(before and r.returncode == 0 and H.docker_ping(SOCK) is None and status == 200 and listed == []
           and not after and our_pid() != pid,
           "after a kill -9 with a probe running, start stops what was left and starts a daemon holding no "
           "container", f"{r.stdout} {r.stderr} containers {listed} probe before {before} after {after}")
    tap.ok(all(d.poll() is None for d in decoys), "the decoys are still alive after the restart",
           [d.poll() for d in decoys])


try:
    main()
finally:
    for d in decoys:
        with contextlib.suppress(OSError):
            d.kill()
            d.wait()
    with contextlib.suppress(Exception):
        for c in H.docker_containers({"org.sealed-probe.test": "dockerd-harness"}, SOCK):
            H.docker_remove(c["Id"], SOCK)
        H.docker_remove(f"sp-replay-{os.getpid()}", SOCK)
    subprocess.run(["rm", "-rf", "--one-file-system", work])
tap.finish()
