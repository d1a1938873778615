"""The docker backend against real Docker daemons (Debian's docker.io), each
started by this test in a temp directory of its own and always stopped:

    dockerd --data-root D/data --exec-root D/exec --host unix://D/docker.sock
            --pidfile D/docker.pid --bridge none --iptables=false --ip-masq=false

1. Path mapping (Docker-in-Docker, runner controllers).  The daemon runs in a
   mount namespace of its own where the proxy's state directory STATE is NOT
   at STATE but at VIEW (/srv/sp-daemon-state-NONCE), and serve's later
   mounts under STATE (each invocation's workspace tmpfs and overlay, kept in
   the host's namespace under STATE/docker-work/RUN/INV) reach the daemon
   there.  The recipe, found by experiment (the host's / is private here, so
   nothing propagates by default):

     host:    mount --rbind STATE STATE            # STATE becomes a mount ...
              mount --make-shared STATE            # ... in a peer group of its own
     daemon:  unshare -m --propagation unchanged sh -c '
                mount --make-rslave /                      # host -> here only, never back
                mount -t tmpfs sp-daemon-view /srv         # VIEW exists only in here
                mkdir VIEW
                mount --rbind STATE VIEW                   # a slave of STATE's peer group
                mount -t tmpfs -o mode=0 sp-daemon-hide STATE  # STATE itself shows nothing
                exec dockerd ...'

   After --make-rslave, the daemon's copy of STATE is a slave of the host's
   STATE (master:N in its mountinfo); a bind of a slave mount is a slave of
   the same master, so VIEW receives every mount serve makes under STATE, and
   its unmounts, while nothing the daemon mounts (VIEW, the hiding tmpfs, its
   own overlays) propagates back to the host.  The test checks the recipe
   held before it relies on it (through nsenter into the daemon's
   namespace): VIEW/staged.json is there, STATE is empty, and the host has no
   VIEW at all.

   Then serve --docker-socket D/docker.sock --docker-state-dir VIEW answers
   real probes (README read: YES; a probe that edits the repository answers
   EDITED, and the next one sees the original), the running container's bind
   sources are all under VIEW/docker-work/RUN and none under STATE; and the
   same serve on the same daemon and state WITHOUT --docker-state-dir fails
   its canary (the daemon cannot find the bind sources) and never becomes
   ready: the option is what makes it work.  Nothing is left in either
   namespace; the shared bind is undone.

2. kill -9 of serve mid-probe (a 30 s sleep), then a restart on the same
   state: the container (found by the API, by the state's label) and the
   workspace mount outlive the kill (recorded in the TAP output); once the
   new serve is ready no container of the old run exists (by label, and by
   id: 404), nothing mounted under STATE/docker-work/OLD_RUN, no such
   directory, no process in the old container's cgroup or with the probe
   ids, and the daemon holds one image, sealed-probe/rootfs:<12 hex>, and no
   layer beyond that image's (the container's writable layer went with it).
   After the new serve stops, nothing of its run is left either.

3. The socket goes nowhere, and the image is local.  A probe searching its
   whole file system (/ but /proc and /sys, plus /proc/*/mountinfo, mounts,
   environ and cmdline, /proc/net/unix, its environment, /run and /var/run)
   for any socket file and for the socket's path answers NONE (FOUND or
   UNKNOWN otherwise; UNKNOWN when its own planted controls, a socket and a
   text file, were not found, so that NONE proves something).  Neither the
   audit log nor serve's stdout or stderr holds the socket's path, nor does
   any mount of the container.  The image the container ran, inspected
   through the API while the probe ran, is sealed-probe/rootfs:<12 hex of the
   digest> with the label org.sealed-probe.rootfs.digest equal to what
   `sealed-probe-rootfs verify` prints for the rootfs, no RepoDigests, and
   the daemon's events show it imported, never pulled.

   On the same serve, the probe gets exactly what runc gives (docs/runtimes.md,
   "The field mapping"), each a probe of its own with a control in it: a probe
   mapping its own script PROT_EXEC is refused EPERM (the control: the same
   file maps PROT_READ, and /usr/bin/python3 maps PROT_EXEC), and it cannot
   open it for writing; /dev/shm, /dev/pts and /dev/mqueue are absent and
   /dev/ptmx cannot be opened (the control: /dev/null opens, a character
   device); /sys/fs/cgroup is empty and /proc/self/mountinfo shows no cgroup
   file system (the control: it shows /); the environment is exactly PATH,
   LANG and HOME (no HOSTNAME); fds 0 to 2 are /dev/null; the groups are the
   probe's gid alone (the gap docs/runtimes.md names); /.dockerenv is the
   named gap: an empty file of root's that the probe cannot write.

Docker only; registered once (tests/meson.build, `docker_backend`).  It
stages with a runc config (SP_BACKEND runc, fixed, as docker_verify) and
serves with a docker one.  Needs root, dockerd, unshare and nsenter: a SKIP
with the reason without them, and a failure under CI=true (sp_harness's
convention for a missing runtime)."""

import contextlib
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import RUNTIME_SEARCH_PATH, Tap, bail_out, ci, require_root_and, skip_all  # noqa: E402

require_root_and("git")


def _find(prog):
    return shutil.which(prog, path=RUNTIME_SEARCH_PATH)


for _prog in ("dockerd", "unshare", "nsenter", "mount", "umount"):
    if _find(_prog) is None:
        why = f"`{_prog}` is not installed in {RUNTIME_SEARCH_PATH} (the docker backend's test needs it)"
        if ci():
            bail_out(why + "; under CI=true a missing runtime is a failure, not a skip")
        skip_all(why)
_selected = os.environ.get("SP_BACKENDS")
if _selected is not None and "docker" not in [b.strip() for b in _selected.split(",")]:
    if ci():
        bail_out(f"backend docker not selected by SP_BACKENDS={_selected}: under CI=true every backend must run")
    skip_all("backend docker not selected by SP_BACKENDS")

import sp_serve as S  # noqa: E402

DOCKERD = _find("dockerd")
API = "/v1.41"
LABEL_STATE = "org.sealed-probe.state"
LABEL_RUN = "org.sealed-probe.run"
LABEL_DIGEST = "org.sealed-probe.rootfs.digest"
PROBE_ID_RANGE = 2 * (16 + 1 + 15)  # SP_PROBE_ID_RANGE (bounds.h): workers, the canary, the pool
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

tap = Tap()
nonce = uuid.uuid4().hex[:10]


def note(*lines):
    for line in lines:
        for part in str(line).splitlines():
            print(f"# {part}", flush=True)


# ---- the Engine API, over the daemon's Unix socket -----------------------------

class Engine:
    def __init__(self, sock):
        self.sock = sock

    def call(self, method, path, timeout=30):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.sock)
        conn = http.client.HTTPConnection("localhost", timeout=timeout)
        conn.sock = s
        try:
            conn.request(method, path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def json(self, path, method="GET"):
        status, body = self.call(method, path)
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, body

    def ping(self):
        try:
            return self.call("GET", "/_ping", timeout=2) == (200, b"OK")
        except OSError:
            return False

    def containers(self, **labels):
        """Every container (running or not) carrying all of labels."""
        flt = urllib.parse.quote(json.dumps({"label": [f"{k}={v}" for k, v in labels.items()]}))
        status, out = self.json(f"{API}/containers/json?all=1&filters={flt}")
        if status != 200:
            raise RuntimeError(f"containers/json: {status} {out!r}")
        return out

    def images(self):
        status, out = self.json(f"{API}/images/json?all=1")
        if status != 200:
            raise RuntimeError(f"images/json: {status} {out!r}")
        return out

    def events(self, since, kind):
        flt = urllib.parse.quote(json.dumps({"type": [kind]}))
        status, body = self.call("GET", f"{API}/events?since={since}&until={int(time.time()) + 1}&filters={flt}",
                                 timeout=30)
        out, text, i = [], body.decode("utf-8", "replace"), 0
        dec = json.JSONDecoder()
        while i < len(text):
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            obj, i = dec.raw_decode(text, i)
            out.append(obj)
        return status, out


def state_key(state):
    st = os.stat(state)
    return f"{st.st_dev:x}-{st.st_ino:x}"


# ---- a dockerd of the test's own -------------------------------------------------

class Dockerd:
    """One dockerd in a temp directory of its own (short: sun_path), started
    either in the host's mount namespace or, with prelude, under `unshare -m`
    after prelude's shell commands (then `exec dockerd`, so the pid is the
    daemon's).  stop() ends it, then whatever it started that is left (its
    containerd and shims, found by this directory in their argv), unmounts
    anything under the directory and removes it."""

    def __init__(self, prelude=None, pin_loginuid=True):
        self.dir = tempfile.mkdtemp(prefix="sp-dd-", dir="/tmp")
        self.sock = os.path.join(self.dir, "docker.sock")
        self.log_path = os.path.join(self.dir, "log")
        argv = [DOCKERD, "--data-root", os.path.join(self.dir, "data"), "--exec-root",
                os.path.join(self.dir, "exec"), "--host", f"unix://{self.sock}", "--pidfile",
                os.path.join(self.dir, "docker.pid"), "--bridge", "none", "--iptables=false", "--ip-masq=false"]
        # A set loginuid, which its containers inherit: serve's canary refuses
        # a daemon whose probes could set one (docs/runtimes.md, "Docker").
        pin = ('if [ "$(cat /proc/self/loginuid)" = 4294967295 ]; then echo 0 >/proc/self/loginuid; fi\n'
               if pin_loginuid else "")
        if prelude:
            argv = [_find("unshare"), "-m", "--propagation", "unchanged", "sh", "-ec",
                    pin + prelude + '\nexec "$@"', "sh"] + argv
        else:
            argv = ["/bin/sh", "-ec", pin + 'exec "$@"', "sh"] + argv
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     env=ENV, start_new_session=True)
        self.api = Engine(self.sock)

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.api.ping():
                return True
            time.sleep(0.2)
        return False

    def log_tail(self, n=1500):
        with contextlib.suppress(OSError):
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        return ""

    def _left(self):
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self.dir.encode() + b"/" in f.read():
                        pids.append(int(pid))
        return pids

    def stop(self):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = self._left()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if left:
                S.wait_for(lambda: not self._left(), timeout=10)
        self.log.close()
        S.unmount_under(self.dir)
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir], capture_output=True)


# ---- probes --------------------------------------------------------------------

README_PROBE = ('import json\n'
                'ok = open("/probe/repo/README.md").read() == "alpha\\n"\n'
                'json.dump({"result": "YES" if ok else "NO"}, open("/probe/out", "w"))\n')
EDIT_PROBE = r'''
import json, os
r = "/probe/repo"
try:
    with open(r + "/README.md", "w") as f:
        f.write("edited\n")
    os.unlink(r + "/src/app.py")
    with open(r + "/NEW", "w") as f:
        f.write("new\n")
    ok = (open(r + "/README.md").read() == "edited\n" and not os.path.exists(r + "/src/app.py")
          and os.path.exists(r + "/NEW"))
    result = "EDITED" if ok else "UNCHANGED"
except OSError:
    result = "FAILED"
json.dump({"result": result}, open("/probe/out", "w"))
'''
EDIT_OUTCOMES = ("EDITED", "UNCHANGED", "FAILED")
ORIGINAL_PROBE = r'''
import json, os
r = "/probe/repo"
ok = (open(r + "/README.md").read() == "alpha\n" and open(r + "/src/app.py").read() == "print('hi')\n"
      and not os.path.exists(r + "/NEW"))
json.dump({"result": "ORIGINAL" if ok else "DIRTY"}, open("/probe/out", "w"))
'''
ORIGINAL_OUTCOMES = ("ORIGINAL", "DIRTY", "UNKNOWN")
SLEEPY = "import time, json\ntime.sleep(%s)\njson.dump({'result': 'YES'}, open('/probe/out', 'w'))\n"

# Answers NONE when no socket file (but its own control) and no needle is
# anywhere it can read; FOUND when one is; UNKNOWN when a control was missed
# (the search is broken, so NONE would prove nothing).
SOCKET_FINDER = r'''
import json, os, socket, stat, time
NEEDLES = [bytes.fromhex(h) for h in NEEDLES_HEX]
CONTROL = bytes.fromhex(CONTROL_HEX)
time.sleep(2)            # the test inspects the running container meanwhile
CTRL_SOCK, CTRL_FILE = "/tmp/sp-control.sock", "/tmp/sp-control.txt"
ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ctl.bind(CTRL_SOCK)
with open(CTRL_FILE, "wb") as f:
    f.write(b"<" + CONTROL + b">")
sockets, hits, seen = [], [], set()
def look(where, data):
    if where.startswith("/probe/probe.py"):
        return
    for n in NEEDLES:
        if n in data:
            hits.append(where)
    if CONTROL in data:
        seen.add(where)
def read(path, cap=8 << 20):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return os.read(fd, cap)
        finally:
            os.close(fd)
    except OSError:
        return None
def entry(p):
    look(p + " (name)", p.encode())
    try:
        st = os.lstat(p)
    except OSError:
        return
    if stat.S_ISSOCK(st.st_mode):
        if p == CTRL_SOCK:
            seen.add("socket")
        else:
            sockets.append(p)
    elif stat.S_ISLNK(st.st_mode):
        try:
            look(p + " (link)", os.readlink(p).encode())
        except OSError:
            pass
    elif stat.S_ISREG(st.st_mode) and st.st_size <= (8 << 20):
        data = read(p)
        if data is not None:
            look(p, data)
def walk(top):
    entry(top)
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath in ("/proc", "/sys") or dirpath.startswith(("/proc/", "/sys/")):
            dirnames[:] = []
            continue
        for n in dirnames + filenames:
            entry(os.path.join(dirpath, n))
for top in ("/", "/run", "/var/run/", "/tmp", "/dev"):
    if os.path.isdir(top):
        walk(top)
read_ok = []
for pid in ["self", "1"] + [p for p in os.listdir("/proc") if p.isdigit()]:
    for part in ("mountinfo", "mounts", "environ", "cmdline"):
        data = read(f"/proc/{pid}/{part}")
        if data is not None:
            look(f"/proc/{pid}/{part}", data)
            read_ok.append(f"{pid}/{part}")
data = read("/proc/net/unix")
if data is not None:
    look("/proc/net/unix", data)
look("os.environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
controls = ("socket" in seen and CTRL_FILE in seen and all(f"{p}/{x}" in read_ok for p in ("self", "1")
            for x in ("mountinfo", "environ")))
result = "UNKNOWN" if not controls else ("FOUND" if sockets or hits else "NONE")
json.dump({"result": result}, open("/probe/out", "w"))
'''
FINDER_OUTCOMES = ("NONE", "FOUND", "UNKNOWN")

# What the probe gets, each checked from inside with its control: YES when
# the property holds and the control does, NO when the property fails,
# UNKNOWN when the control fails (the check proves nothing then).
EXACT_OUTCOMES = ("YES", "NO", "UNKNOWN")
EXACT_HEAD = ('import errno, json, mmap, os, stat\n'
              'def answer(ok, control):\n'
              '    json.dump({"result": "UNKNOWN" if not control else "YES" if ok else "NO"}, open("/probe/out", "w"))\n')
EXACT_PROBES = {
    "a probe mapping its own script PROT_EXEC is refused EPERM, and cannot open it for writing (control: the "
    "script maps PROT_READ, and /usr/bin/python3 maps PROT_EXEC)":
        'def maps(path, prot):\n'
        '    with open(path, "rb") as f:\n'
        '        try:\n'
        '            mmap.mmap(f.fileno(), 1, prot=prot).close()\n'
        '            return 0\n'
        '        except OSError as e:\n'
        '            return e.errno\n'
        'def writable(path):\n'
        '    try:\n'
        '        open(path, "r+b").close()\n'
        '        return True\n'
        '    except OSError:\n'
        '        return False\n'
        'answer(maps("/probe/probe.py", mmap.PROT_READ | mmap.PROT_EXEC) == errno.EPERM\n'
        '       and not writable("/probe/probe.py"),\n'
        '       maps("/probe/probe.py", mmap.PROT_READ) == 0\n'
        '       and maps("/usr/bin/python3", mmap.PROT_READ | mmap.PROT_EXEC) == 0)\n',
    "no /dev/shm, /dev/pts or /dev/mqueue, and /dev/ptmx does not open (control: /dev/null opens, a character "
    "device)":
        'def opens(path):\n'
        '    try:\n'
        '        os.close(os.open(path, os.O_RDWR | os.O_NOCTTY))\n'
        '        return True\n'
        '    except OSError:\n'
        '        return False\n'
        'answer(not any(os.path.lexists(p) for p in ("/dev/shm", "/dev/pts", "/dev/mqueue")) and not opens("/dev/ptmx"),\n'
        '       opens("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode))\n',
    "no cgroup hierarchy: /sys/fs/cgroup is empty and mountinfo has no cgroup file system (control: mountinfo "
    "shows /)":
        'lines = [l.split(" - ")[1].split()[0] for l in open("/proc/self/mountinfo") if " - " in l]\n'
        'points = [l.split()[4] for l in open("/proc/self/mountinfo")]\n'
        'empty = not os.path.isdir("/sys/fs/cgroup") or os.listdir("/sys/fs/cgroup") == []\n'
        'answer(empty and not any(t in ("cgroup", "cgroup2") for t in lines), "/" in points)\n',
    "the environment is exactly PATH, LANG and HOME: no HOSTNAME (control: PATH is /usr/bin)":
        'answer(sorted(os.environ) == ["HOME", "LANG", "PATH"], os.environ.get("PATH") == "/usr/bin")\n',
    "fds 1 and 2 are /dev/null itself, fd 0 an empty pipe at its end (control: fd 3 of a file opened is that "
    "file)":
        'fd = os.open("/probe/repo/README.md", os.O_RDONLY)\n'
        'answer(all(os.readlink(f"/proc/self/fd/{i}") == "/dev/null" for i in (1, 2))\n'
        '       and stat.S_ISFIFO(os.fstat(0).st_mode) and os.read(0, 1) == b"",\n'
        '       os.readlink(f"/proc/self/fd/{fd}") == "/probe/repo/README.md")\n',
    "the only group is the probe's own gid, Docker's supplementary copy of it (the named gap) (control: the gid "
    "is the uid)":
        'answer(os.getgroups() == [os.getgid()], os.getgid() == os.getuid() != 0)\n',
    "/.dockerenv (the named gap) is an empty file of root's that the probe cannot write (control: /probe/out "
    "can be written)":
        'st = os.lstat("/.dockerenv")\n'
        'answer(stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_uid == 0 and not os.access("/.dockerenv", os.W_OK),\n'
        '       os.access("/probe/out", os.W_OK))\n',
}


def socket_finder(needles, control):
    hexed = repr([n.encode().hex() for n in needles])
    return SOCKET_FINDER.replace("NEEDLES_HEX", hexed).replace("CONTROL_HEX", repr(control.encode().hex()))


# ---- helpers -------------------------------------------------------------------

def run_of(srv):
    """The run its ready line names.  serve writes its ready file, which
    start() waits for, just before that line: on a loaded host the line can
    come a moment after start() returns."""
    m = S.wait_for(lambda: re.search(r"ready: run ([0-9a-f]{12})", srv.stderr()), timeout=10)
    return m.group(1) if m else None


def docker_serve(work, config, state, daemon, state_dir=None, pool=None, **kw):
    extra = ["--docker-socket", daemon.sock]
    if state_dir:
        extra += ["--docker-state-dir", state_dir]
    if pool is not None:
        extra += ["--pool", str(pool)]
    return S.Serve(work, config, state, extra=tuple(extra), **kw)


def docker_work(state, *parts):
    return os.path.join(state, "docker-work", *parts)


def runs_a_script(state, c):
    """Whether container c (a listing's entry) has its script: its
    workspace's probe.py is not empty.  One of the pool's runs too, its
    interpreter started ahead, but waits with the empty placeholder."""
    labels = c.get("Labels") or {}
    path = docker_work(state, labels.get(LABEL_RUN, "?"), labels.get("org.sealed-probe.invocation", "?"),
                       "bundle", "probe.py")
    with contextlib.suppress(OSError):
        return os.path.getsize(path) > 0
    return False


def wait_running(daemon, state, timeout=30):
    """The first running container of the state directory (by its label)
    that runs a probe (runs_a_script)."""
    def one():
        for c in daemon.api.containers(**{LABEL_STATE: state_key(state)}):
            if c.get("State") == "running" and runs_a_script(state, c):
                return c
        return None
    return S.wait_for(one, timeout, interval=0.05)


def processes_in_cgroup_of(cid):
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cgroup") as f:
                    if cid in f.read():
                        out.append(int(pid))
    return out


def layer_dirs(daemon):
    top = os.path.join(daemon.dir, "data", "overlay2")
    return sorted(n for n in os.listdir(top) if n != "l") if os.path.isdir(top) else []


def image_report(daemon, tag):
    """[] when the daemon holds exactly the one image tag, and no layer
    directory beyond that image's layers."""
    bad = []
    imgs = daemon.api.images()
    if [i.get("RepoTags") for i in imgs] != [[tag]]:
        bad.append(f"images: {[(i.get('RepoTags'), i.get('Id')) for i in imgs]}")
        return bad
    status, info = daemon.api.json(f"{API}/images/{imgs[0]['Id']}/json")
    layers = (info or {}).get("RootFS", {}).get("Layers", []) if status == 200 else []
    dirs = layer_dirs(daemon)
    if len(dirs) != len(layers):
        bad.append(f"{len(dirs)} layer directories {dirs}, the image has {len(layers)} layers")
    return bad


def stage_clone(work, config, clone):
    return work.staged_state(config, [("acme/alpha", clone)])


work = S.Work("sp-docker-backend-")
daemons = []
shared_binds = []
try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n", "src/app.py": b"print('hi')\n"})
    # Staging takes a runc config (SP_BACKEND runc); serve reads a docker one.
    stage_config = work.write_config(["acme/alpha"])
    config = work.path("docker-config") + ".json"
    with open(config, "w") as f:
        json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["acme/alpha"], "runtime": "docker",
                                    "timeout": 60, "maxInvocations": 1000}}, f)
    r = subprocess.run([os.environ["SP_ROOTFS_BUILDER"], "verify", work.rootfs], capture_output=True, text=True)
    DIGEST = r.stdout.strip()
    if r.returncode != 0 or not re.fullmatch(r"sha256:[0-9a-f]{64}", DIGEST):
        bail_out(f"sealed-probe-rootfs verify failed: {r.stderr.strip()}")
    TAG = f"sealed-probe/rootfs:{DIGEST[7:19]}"

    # ==== 1. path mapping: the daemon sees STATE at another path ==============
    state1 = stage_clone(work, stage_config, alpha)
    view_top = "/srv" if os.path.isdir("/srv") else "/mnt"
    view = f"{view_top}/sp-daemon-state-{nonce}"
    # Staging's own read-only seed mounts under STATE stay (unstage removes them).
    mounts_before = S.mounts_under(state1)
    subprocess.run(["mount", "--rbind", state1, state1], check=True, capture_output=True)
    shared_binds.append(state1)
    subprocess.run(["mount", "--make-shared", state1], check=True, capture_output=True)
    q = shlex.quote
    prelude = "\n".join([
        "mount --make-rslave /",
        f"mount -t tmpfs -o size=1m,mode=0755 sp-daemon-view {q(view_top)}",
        f"mkdir {q(view)}",
        f"mount --rbind {q(state1)} {q(view)}",
        f"mount -t tmpfs -o size=1m,mode=0 sp-daemon-hide {q(state1)}",
    ])
    dind = Dockerd(prelude=prelude)
    daemons.append(dind)
    if not tap.ok(dind.wait_ready(), "dind: a dockerd in a mount namespace of its own answers /_ping",
                  dind.log_tail()):
        raise SystemExit
    ns = ["nsenter", "-t", str(dind.pid), "-m", "--"]
    inside_state = subprocess.run(ns + ["ls", "-A", state1], capture_output=True, text=True)
    inside_view = subprocess.run(ns + ["test", "-f", os.path.join(view, "staged.json")], capture_output=True)
    tap.ok(inside_state.returncode == 0 and inside_state.stdout == "" and inside_view.returncode == 0
           and not os.path.lexists(view) and os.path.exists(os.path.join(state1, "staged.json")),
           "dind: the recipe holds: in the daemon's namespace STATE is empty and VIEW/staged.json is there; the "
           "host has no VIEW",
           (inside_state.stdout[:300], inside_state.returncode, inside_view.returncode, os.path.lexists(view)))

    srv = docker_serve(work, config, state1, dind, state_dir=view)
    try:
        ok = srv.start(ready_timeout=180)
        tap.ok(ok, "dind: serve --docker-state-dir VIEW becomes ready (its canary passed)", srv.stderr()[-800:])
        if ok:
            run1 = run_of(srv)
            tap.ok(srv.probe(README_PROBE, "acme/alpha") == S.answer("YES"), "dind: a probe reading README answers YES")
            tap.ok(srv.probe(EDIT_PROBE, "acme/alpha", EDIT_OUTCOMES) == S.answer("EDITED"),
                   "dind: a probe that edits the repository answers EDITED")
            tap.ok(srv.probe(ORIGINAL_PROBE, "acme/alpha", ORIGINAL_OUTCOMES) == S.answer("ORIGINAL"),
                   "dind: the next probe sees the original repository")
            res = {}
            th = threading.Thread(target=lambda: res.setdefault("r", srv.probe(SLEEPY % 3, "acme/alpha")))
            th.start()
            c = wait_running(dind, state1)
            sources = []
            if c:
                status, info = dind.api.json(f"{API}/containers/{c['Id']}/json")
                sources = [m.get("Source", "") for m in (info or {}).get("Mounts", [])]
            th.join(timeout=60)
            prefix = os.path.join(view, "docker-work", run1 or "?") + "/"
            tap.ok(c and sources and all(s.startswith(prefix) for s in sources)
                   and not any(s.startswith(state1 + "/") for s in sources) and res.get("r") == S.answer("YES"),
                   "dind: the running container's bind sources are all under VIEW/docker-work/RUN, none under "
                   "STATE", (sources, res))
            note("the daemon's namespace, serve idle, under VIEW/docker-work: "
                 f"{S.mounts_under(docker_work(view), f'/proc/{dind.pid}/mountinfo')}")
            tap.ok(srv.stop() == 0, "dind: serve stops cleanly", srv.stderr()[-300:])
    finally:
        srv.cleanup()

    srv = docker_serve(work, config, state1, dind)
    try:
        ok = srv.start(ready_timeout=180)
        err = srv.stderr()
        tap.ok(not ok and srv.returncode not in (None, 0) and "canary" in err,
               "dind: the same serve without --docker-state-dir fails its canary and never becomes ready",
               f"ready {ok}, exit {srv.returncode}: {err[-800:]}")
        note("without --docker-state-dir: " + err.strip()[-600:])
        tap.ok(dind.sock not in err and dind.sock not in srv.stdout(),
               "dind: that failure names no socket path", err[-400:])
    finally:
        srv.cleanup()
    left = dind.api.containers(**{LABEL_STATE: state_key(state1)})
    tap.ok(not left and not S.mounts_under(docker_work(state1))
           and not S.mounts_under(docker_work(view), f"/proc/{dind.pid}/mountinfo")
           and not S.mounts_under(docker_work(state1), f"/proc/{dind.pid}/mountinfo"),
           "dind: nothing is left: no container of the state, no mount under STATE/docker-work on the host, "
           "none under VIEW or STATE in the daemon's namespace",
           (left, S.mounts_under(docker_work(state1)),
            S.mounts_under(view, f"/proc/{dind.pid}/mountinfo")))
    dind.stop()
    daemons.remove(dind)
    subprocess.run(["umount", "-R", state1], capture_output=True)
    if S.mounts_under(state1) == mounts_before:
        shared_binds.remove(state1)
    tap.ok(S.mounts_under(state1) == mounts_before and not os.path.lexists(view) and not os.path.exists(dind.dir),
           "dind: cleaned up: the daemon is gone, the shared bind of STATE undone (only staging's own seed "
           "mounts are left under STATE), no VIEW on the host", (S.mounts_under(state1), mounts_before))

    # ==== 2. kill -9 mid-probe, then a restart on the same state ================
    dk = Dockerd()
    daemons.append(dk)
    if not tap.ok(dk.wait_ready(), "kill -9: a dockerd in the host's mount namespace answers /_ping", dk.log_tail()):
        raise SystemExit
    state2 = stage_clone(work, stage_config, alpha)
    key2 = state_key(state2)
    srv = docker_serve(work, config, state2, dk)
    old_run, old_cid = None, None
    try:
        if not tap.ok(srv.start(ready_timeout=180), "kill -9: serve on docker becomes ready", srv.stderr()[-800:]):
            raise SystemExit
        old_run = run_of(srv)
        th = threading.Thread(target=lambda: srv.probe(SLEEPY % 30, "acme/alpha", timeout=90), daemon=True)
        th.start()
        c = wait_running(dk, state2)
        old_cid = c["Id"] if c else None
        ws_mounts = S.wait_for(lambda: S.mounts_under(docker_work(state2, old_run or "?")), timeout=10)
        tap.ok(c is not None and c.get("Labels", {}).get(LABEL_RUN) == old_run and ws_mounts,
               "kill -9: the sleeping probe's container (by the state's label, of this run) and its workspace "
               "mount exist", (c, ws_mounts))
        srv.kill9()
        time.sleep(1)
        status, info = dk.api.json(f"{API}/containers/{old_cid}/json") if old_cid else (None, None)
        kept_mounts = S.mounts_under(docker_work(state2, old_run or "?"))
        tap.ok(status == 200 and info["State"]["Running"] and kept_mounts,
               "kill -9: after serve's kill -9 the container still runs and the workspace mount remains",
               (status, kept_mounts))
        note(f"left by the kill -9: container {old_cid} ({(info or {}).get('Name')}, run {old_run}), "
             f"mounts {kept_mounts}")
    finally:
        srv.cleanup()
    # The restart makes nothing ahead (--pool 0), so that every container,
    # mount and layer the checks below find is the killed run's.
    srv2 = docker_serve(work, config, state2, dk, probe_id_base=srv.probe_id_base, pool=0)
    try:
        ok = srv2.start(ready_timeout=180)
        tap.ok(ok, "kill -9: a new serve on the same state (the same probe ids) becomes ready", srv2.stderr()[-800:])
        if ok:
            new_run = run_of(srv2)
            by_run = dk.api.containers(**{LABEL_RUN: old_run})
            by_state = dk.api.containers(**{LABEL_STATE: key2})
            status, _ = dk.api.json(f"{API}/containers/{old_cid}/json")
            tap.ok(new_run != old_run and not by_run and not by_state and status == 404,
                   "kill -9: once ready, no container of the old run exists (by label and by id: 404)",
                   (by_run, by_state, status))
            tap.ok(not S.mounts_under(docker_work(state2, old_run))
                   and not os.path.lexists(docker_work(state2, old_run)),
                   "kill -9: no mount under STATE/docker-work/OLD_RUN, and no such directory",
                   (S.mounts_under(docker_work(state2)), os.listdir(docker_work(state2))))
            procs = processes_in_cgroup_of(old_cid) + list(S.probe_processes(srv.probe_id_base, PROBE_ID_RANGE))
            tap.ok(not procs, "kill -9: no process is left in the old container's cgroup or with the probe ids",
                   procs)
            bad = image_report(dk, TAG)
            tap.ok(not bad, f"kill -9: the only image is {TAG}, and no layer of the old run's container is left",
                   bad)
            tap.ok(srv2.probe(README_PROBE, "acme/alpha") == S.answer("YES"), "kill -9: a probe answers after the "
                                                                              "restart")
            tap.ok(srv2.stop() == 0, "kill -9: the new serve stops cleanly", srv2.stderr()[-300:])
            left = dk.api.containers(**{LABEL_STATE: key2})
            work_left = os.listdir(docker_work(state2)) if os.path.isdir(docker_work(state2)) else []
            bad = image_report(dk, TAG)
            tap.ok(not left and not work_left and not S.mounts_under(docker_work(state2)) and not bad,
                   "kill -9: after the new serve stops, nothing of its run is left (containers, STATE/docker-work "
                   "entries, mounts, image layers)", (left, work_left, S.mounts_under(docker_work(state2)), bad))
    finally:
        srv2.cleanup()

    # ==== 3. the socket goes nowhere, and the image is local ====================
    state3 = stage_clone(work, stage_config, alpha)
    t0 = int(time.time()) - 600
    srv = docker_serve(work, config, state3, dk)
    try:
        if not tap.ok(srv.start(ready_timeout=180), "socket: serve on docker becomes ready", srv.stderr()[-800:]):
            raise SystemExit
        run3 = run_of(srv)
        control = f"SP-CONTROL-{uuid.uuid4().hex}"
        res = {}
        th = threading.Thread(target=lambda: res.setdefault(
            "r", srv.probe(socket_finder([dk.sock], control), "acme/alpha", FINDER_OUTCOMES, timeout=120)))
        th.start()
        c = wait_running(dk, state3)
        info, image = {}, {}
        if c:
            _, info = dk.api.json(f"{API}/containers/{c['Id']}/json")
            _, image = dk.api.json(f"{API}/images/{info.get('Image')}/json")
        th.join(timeout=150)
        tap.ok(res.get("r") == S.answer("NONE"),
               "socket: a probe searching its whole file system, /proc's mountinfo, environ and cmdline, "
               "/proc/net/unix, its environment, /run and /var/run finds no socket file (but its own control) and "
               "no socket path", res)
        # The control of the search itself: a needle that is there is found.
        tap.ok(srv.probe(socket_finder(["/probe/repo"], control), "acme/alpha", FINDER_OUTCOMES, timeout=120)
               == S.answer("FOUND"), "socket: control: the same search for a path that is there (/probe/repo, in "
                                     "mountinfo) answers FOUND")
        sources = [m.get("Source", "") for m in (info or {}).get("Mounts", [])]
        tap.ok(c and sources and all(s.startswith(docker_work(state3, run3 or "?") + "/") for s in sources)
               and not any(dk.sock in s or "docker.sock" in s for s in sources),
               "socket: the container's mounts are all the invocation's workspace under STATE/docker-work/RUN; "
               "none is the socket", sources)
        labels = ((image or {}).get("Config") or {}).get("Labels") or {}
        tap.ok(((info or {}).get("Config") or {}).get("Image") == TAG and (image or {}).get("Id") == info.get("Image")
               and image.get("RepoTags") == [TAG],
               f"socket: the container ran the image {TAG} (12 hex of the rootfs digest)",
               (((info or {}).get("Config") or {}).get("Image"), (image or {}).get("RepoTags")))
        tap.ok(labels.get(LABEL_DIGEST) == DIGEST,
               f"socket: the image's {LABEL_DIGEST} label equals `sealed-probe-rootfs verify` of the rootfs",
               (labels, DIGEST))
        tap.ok(not (image or {}).get("RepoDigests"), "socket: the image has no RepoDigests (never pulled)",
               (image or {}).get("RepoDigests"))
        status, events = dk.api.events(t0, "image")
        actions = [(e.get("Action") or e.get("status"), e.get("id")) for e in events]
        tap.ok(status == 200 and any(a == "import" for a, _ in actions)
               and not any(a in ("pull", "push") for a, _ in actions),
               "socket: the daemon's image events show an import and no pull", actions)
        for name, body in EXACT_PROBES.items():
            got = srv.probe(EXACT_HEAD + body, "acme/alpha", EXACT_OUTCOMES, timeout=120)
            tap.ok(got == S.answer("YES"), f"exact: {name}", got)
        rc = srv.stop()
        outputs = S.audit_raw(state3) + srv.stderr().encode() + srv.stdout().encode()
        tap.ok(rc == 0 and S.audit_raw(state3) and dk.sock.encode() not in outputs,
               "socket: neither the audit log nor serve's stdout or stderr holds the socket's path",
               (rc, [ln for ln in outputs.decode("utf-8", "replace").splitlines() if dk.sock in ln][:3]))
    finally:
        srv.cleanup()

    # ==== 4. a daemon whose containers could set their loginuid: refused ========
    with open("/proc/self/loginuid") as f:
        own_loginuid = f.read()
    name = "loginuid: check refuses a daemon whose probes could set their loginuid (its canary answers UNCONFINED)"
    if own_loginuid != "4294967295":
        tap.n += 1
        print(f"ok {tap.n} - {name} # SKIP this test's own loginuid is set ({own_loginuid}), so no daemon it "
              "starts can hand its containers an unset one", flush=True)
    else:
        dk = Dockerd(pin_loginuid=False)
        daemons.append(dk)
        if tap.ok(dk.wait_ready(), "loginuid: a dockerd with an unset loginuid answers /_ping", dk.log_tail()):
            state4 = stage_clone(work, stage_config, alpha)
            r = subprocess.run([S.PROXY, "check", "--config", config, "--state", state4, "--docker-socket", dk.sock,
                                "--rootfs", work.rootfs, "--probe-ids", str(S.probe_ids()), "--run-dir", S.B.run_dir], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=300)
            tap.ok(r.returncode == 1 and "canary" in r.stderr and "not confined" in r.stderr
                   and dk.sock not in r.stderr, name, r.stderr[-400:])
finally:
    for d in daemons:
        with contextlib.suppress(Exception):
            d.stop()
    for b in shared_binds:
        subprocess.run(["umount", "-R", b], capture_output=True)
        if S.mounts_under(b):
            subprocess.run(["umount", "-R", "-l", b], capture_output=True)
    work.close()
tap.finish()
