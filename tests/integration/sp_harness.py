"""Shared plumbing for the integration tests: TAP output, skips with reasons,
the sandbox backend a test runs on (backend(): the test matrix, see
docs/testing.md), one cached rootfs per build directory (built by the real
builder from the pinned lock and the fetched debs; see docs/rootfs.md), and
for the docker backend a Docker Engine API client over the project's own
dockerd's socket (docker_api; SP_DOCKER_SOCKET, scripts/dockerd) with the
replay of a dry-run bundle's requests (docker_replay, the docker `runc run`).

Run as a program, it is that replay's command line (DockerBackend.run_argv,
delete_argv and kill_argv on docker):
    python3 -I sp_harness.py docker-run --socket S --bundle DIR [--name NAME]
    python3 -I sp_harness.py docker-rm --socket S NAME
    python3 -I sp_harness.py docker-kill --socket S NAME [SIGNAL]"""

import atexit
import contextlib
import fcntl
import glob
import hashlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import traceback
import urllib.parse


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

    def skip(self, name, reason):
        self.n += 1
        print(f"ok {self.n} - {name} # SKIP {reason}", flush=True)

    def finish(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)


def skip_all(reason):
    print(f"1..0 # SKIP {reason}", flush=True)
    sys.exit(0)


def bail_out(reason):
    print(f"Bail out! {reason}", flush=True)
    sys.exit(1)


def sanitized_build():
    """Whether the programs under test are a -Db_sanitize build (SP_B_SANITIZE,
    tests/meson.build): ASan makes the proxy several times slower, and a test
    sized by how long a phase lasts sizes its input by this."""
    return os.environ.get("SP_B_SANITIZE", "none") not in ("", "none")


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


def serve_test(*programs):
    """The preamble of every test that drives serve, stage or check on the
    backend matrix: the backend (backend(): the whole file a SKIP, or a
    failure under CI=true, when it is not selected or not installed), root,
    git and programs (require_root_and), then sp_serve, imported only once
    those hold (it reads the environment and the backend when imported).
    Returns (the backend, sp_serve):
        B, S = serve_test()            # or serve_test("chattr")"""
    b = backend()
    require_root_and("git", *programs)
    import sp_serve
    return b, sp_serve


# What a test function of run_tests returns when the rest of its list needs
# what it could not set up (its own failing check says why).
STOP = object()


def run_tests(tap, tests, *args):
    """Runs test functions in order, each as fn(*args), each one named
    property with its own checks.  An unexpected exception in one is a
    failing check naming it, with its traceback, and the next one runs; one
    that returns STOP ends the list.  Returns False when the list was ended
    so, else True."""
    for fn in tests:
        try:
            if fn(*args) is STOP:
                return False
        except Exception:  # noqa: BLE001 (any exception is the test's failure, reported and passed)
            tap.ok(False, f"{fn.__name__}: runs to its end without an unexpected exception",
                   traceback.format_exc())
    return True


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


# ---- the Docker Engine API, over a Unix socket --------------------------------
#
# For the docker backend: the tests talk to the project's own dockerd
# (scripts/dockerd start; docs/testing.md), whose socket scripts/test exports
# as SP_DOCKER_SOCKET.  Standard library only.  A system daemon's socket is
# refused outright, so that no test ever touches the machine's own Docker.

DOCKER_API_VERSION = "1.41"
PROJECT_DOCKER_SOCKET = "/run/sealed-probe-test/docker.sock"   # scripts/dockerd's
SYSTEM_DOCKER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
_VERSIONED = re.compile(r"^/v[0-9]+\.[0-9]+/")


class DockerError(Exception):
    pass


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def docker_socket():
    """The daemon the tests use: SP_DOCKER_SOCKET, or None when it is unset."""
    return os.environ.get("SP_DOCKER_SOCKET") or None


def _checked_socket(path):
    path = path or docker_socket()
    if not path:
        raise DockerError("SP_DOCKER_SOCKET is not set (scripts/test starts the project's dockerd and sets it)")
    real = os.path.realpath(path)
    if real in {os.path.realpath(p) for p in SYSTEM_DOCKER_SOCKETS}:
        raise DockerError(f"refusing {path}: a system Docker daemon's socket; the tests use the project's own "
                          f"(scripts/dockerd, {PROJECT_DOCKER_SOCKET})")
    return path


def docker_api(method, path, body=None, socket_path=None, timeout=60, content_type=None):
    """One request to the daemon at socket_path (default SP_DOCKER_SOCKET).
    path is unversioned ("/containers/json?all=1", prefixed with /v1.41) or
    versioned ("/v1.41/..."); body is a JSON-able value, bytes, or an open
    binary file (sent with its size).  Returns (status, value): value is the
    parsed JSON of a JSON answer, else the raw bytes.  Raises DockerError when
    the daemon cannot be reached."""
    sock = _checked_socket(socket_path)
    if not _VERSIONED.match(path):
        path = f"/v{DOCKER_API_VERSION}{path}"
    headers = {"Host": "docker"}
    data = None
    if body is not None:
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif hasattr(body, "read"):
            data = body
            headers["Content-Type"] = content_type or "application/x-tar"
            headers["Content-Length"] = str(os.fstat(body.fileno()).st_size)
        else:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
    conn = _UnixHTTPConnection(sock, timeout)
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        ctype = resp.getheader("Content-Type", "")
    except (OSError, http.client.HTTPException) as e:
        raise DockerError(f"{method} {path} on {sock}: {e}") from e
    finally:
        conn.close()
    if ctype.startswith("application/json") and raw:
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            pass
    return resp.status, raw


def docker_ping(socket_path=None, timeout=5):
    """None when the daemon answers /_ping with OK, else why not."""
    try:
        status, value = docker_api("GET", "/_ping", socket_path=socket_path, timeout=timeout)
    except DockerError as e:
        return str(e)
    if status == 200 and value == b"OK":
        return None
    return f"/_ping answered {status} {value!r:.200}"


def docker_state_key(state):
    """The org.sealed-probe.state label of a state directory's containers:
    its device and inode in hex, as serve's work key (work_dir)."""
    st = os.stat(state)
    return f"{st.st_dev:x}-{st.st_ino:x}"


def docker_containers(labels, socket_path=None):
    """Every container (running or not) carrying all of labels {key: value}:
    the API's container summaries."""
    filters = json.dumps({"label": [f"{k}={v}" for k, v in sorted(labels.items())]})
    status, value = docker_api("GET", "/containers/json?all=1&filters=" + urllib.parse.quote(filters),
                               socket_path=socket_path)
    if status != 200 or not isinstance(value, list):
        raise DockerError(f"listing containers answered {status}: {value!r:.300}")
    return value


def _docker_state_summaries(state, run=None, socket_path=None):
    """{name: the API's summary} of the containers labelled with state's key
    (and run's id when given).  Empty when state does not exist."""
    try:
        labels = {"org.sealed-probe.state": docker_state_key(state)}
    except OSError:
        return {}
    if run:
        labels["org.sealed-probe.run"] = run
    out = {}
    for c in docker_containers(labels, socket_path):
        names = [n.lstrip("/") for n in c.get("Names") or []]
        out[names[0] if names else c["Id"]] = c
    return out


def docker_state_statuses(state, run=None, socket_path=None):
    """{name: State} ("created", "running", "exited") of the containers
    labelled with state's key (and run's id when given)."""
    return {n: c.get("State") for n, c in _docker_state_summaries(state, run, socket_path).items()}


def docker_state_containers(state, run=None, socket_path=None):
    """{name: id} of the containers labelled with state's key (and run's id
    when given).  Empty when state does not exist."""
    return {n: c["Id"] for n, c in _docker_state_summaries(state, run, socket_path).items()}


def docker_remove(name, socket_path=None):
    """Force-removes one container (kills it first); True when it is gone."""
    status, _ = docker_api("DELETE", f"/containers/{urllib.parse.quote(name, safe='')}?force=1&v=1",
                           socket_path=socket_path)
    return status in (204, 404)


def docker_shims(container_ids):
    """[(pid, argv)] of the containerd shims serving any of container_ids
    (a shim's argv names its container: `-id ID`)."""
    ids = set(container_ids)
    out = []
    if not ids:
        return out
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if not argv or not os.path.basename(argv[0]).startswith(b"containerd-shim"):
            continue
        for i, a in enumerate(argv[:-1]):
            if a == b"-id" and argv[i + 1].decode("utf-8", "replace") in ids:
                out.append((int(pid), b" ".join(argv)[:200]))
    return out


def _image_ref(ref):
    """(repository, tag) of an image reference."""
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


def docker_ensure_image(ref, bundle, socket_path=None):
    """Makes image ref present, as serve imports it: from the bundle's own
    verified rootfs (bundle/rootfs/root), labelled
    org.sealed-probe.rootfs.digest with bundle/rootfs/digest; never pulled.
    An image already there must carry that digest."""
    digest = None
    digest_file = os.path.join(bundle, "rootfs", "digest")
    if os.path.exists(digest_file):
        with open(digest_file) as f:
            digest = f.read().strip()
    quoted = urllib.parse.quote(ref, safe="/:")
    status, value = docker_api("GET", f"/images/{quoted}/json", socket_path=socket_path)
    if status == 200:
        have = ((value.get("Config") or {}).get("Labels") or {}).get("org.sealed-probe.rootfs.digest")
        if digest and have != digest:
            raise DockerError(f"image {ref} carries rootfs digest {have!r}, the bundle's rootfs is {digest}")
        return
    if status != 404:
        raise DockerError(f"inspecting image {ref} answered {status}: {value!r:.300}")
    root = os.path.join(bundle, "rootfs", "root")
    if not digest or not os.path.isdir(root):
        raise DockerError(f"image {ref} is missing and {bundle} holds no rootfs to import it from")
    repo, tag = _image_ref(ref)
    query = urllib.parse.urlencode({"fromSrc": "-", "repo": repo, "tag": tag,
                                    "changes": f"LABEL org.sealed-probe.rootfs.digest={digest}"})
    with tempfile.TemporaryFile() as tmp:
        with tarfile.open(fileobj=tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(os.listdir(root)):
                tar.add(os.path.join(root, name), arcname=name)
        tmp.flush()
        tmp.seek(0)
        status, value = docker_api("POST", "/images/create?" + query, body=tmp, socket_path=socket_path,
                                   timeout=600, content_type="application/x-tar")
    if status != 200 or b'"error' in (value if isinstance(value, bytes) else json.dumps(value).encode()):
        raise DockerError(f"importing {ref} answered {status}: {value!r:.300}")


def _demux(raw):
    """(stdout, stderr) of a non-TTY container's multiplexed log stream."""
    out, err, i = b"", b"", 0
    while i + 8 <= len(raw):
        kind, size = raw[i], int.from_bytes(raw[i + 4:i + 8], "big")
        chunk = raw[i + 8:i + 8 + size]
        if kind == 2:
            err += chunk
        else:
            out += chunk
        i += 8 + size
    return out, err


def docker_requests(bundle):
    """The requests of a dry-run bundle's runtime-commands.json (runtime
    docker): [{"step", "method", "path", "body"}], in order."""
    with open(os.path.join(bundle, "runtime-commands.json")) as f:
        described = json.load(f)
    if described.get("runtime") != "docker":
        raise DockerError(f"{bundle}/runtime-commands.json is for runtime {described.get('runtime')!r}, not docker")
    return described["requests"]


def _described_name(requests):
    """The container name the dry run chose: the create request's ?name=."""
    for req in requests:
        query = urllib.parse.urlparse(req["path"]).query
        names = urllib.parse.parse_qs(query).get("name")
        if names and "/containers/create" in req["path"]:
            return names[0]
    return None


class _DockerWait:
    """POST /containers/ID/wait in a thread of its own: the daemon answers
    its headers once the wait is set up, and its body when the container
    stops, so a wait described before the start (condition next-exit) is in
    place before the start is sent."""

    def __init__(self, sock, path):
        self.sock, self.path = sock, path
        self.headers = threading.Event()
        self.status, self.value, self.error = None, None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.headers.wait(30)

    def _run(self):
        conn = _UnixHTTPConnection(self.sock, None)
        try:
            conn.request("POST", self.path, headers={"Host": "docker"})
            resp = conn.getresponse()
            self.headers.set()
            raw = resp.read()
            self.status = resp.status
            try:
                self.value = json.loads(raw) if raw else None
            except ValueError:
                self.value = raw
        except (OSError, http.client.HTTPException) as e:
            self.error = f"POST {self.path}: {e}"
        finally:
            self.headers.set()
            conn.close()

    def result(self, timeout=None):
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.error = self.error or f"POST {self.path}: no answer in {timeout} s"
        return self


def _docker_seal_script(bundle):
    """What serve's docker backend does before a start (docker.c's
    seal_script): the bundle's probe.py becomes a read-only, nosuid, nodev,
    noexec bind of itself, which the create body binds read-write (Docker's
    read-only remount would clear those flags).  Returns its path."""
    script = os.path.join(bundle, "probe.py")
    subprocess.run(["mount", "--bind", script, script], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro,nosuid,nodev,noexec", script], check=True)
    return script


def docker_attach_stdin(path, socket_path=None, timeout=60):
    """POST path (a container's /attach?stream=1&stdin=1) with `Upgrade: tcp`,
    as serve attaches a container's stdin: the socket once the daemon answered
    101, whose close ends the container's stdin (StdinOnce).  DockerError when
    it answers anything else."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(_checked_socket(socket_path))
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                     "Content-Length: 0\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 4096:
            data = sock.recv(4096)
            if not data:
                break
            head += data
    except OSError as e:
        sock.close()
        raise DockerError(f"attach {path}: {e}") from e
    if not head.startswith(b"HTTP/1.1 101 "):
        sock.close()
        line = head.split(b"\r\n", 1)[0]
        raise DockerError(f"attach {path}: answered {line!r:.200}")
    return sock


def docker_replay(bundle, name=None, socket_path=None, out=None, err=None):
    """Runs a dry-run bundle by hand on docker: the docker equivalent of
    `runc run --bundle BUNDLE NAME` (DockerBackend.run_argv returns the command
    line that calls this).  It replays the bundle's runtime-commands.json
    requests in order against the daemon (create, start, wait, remove), with
    name (when given) in place of the container name the dry run chose, as a
    test gives runc a container id of its own.  Steps named "kill ..." are
    conditional (on timeout or stop) and are not replayed; an image import
    (POST /images/create or /images/load, whose body is no JSON) is replaced
    by importing the bundle's own verified rootfs when the image is missing
    (docker_ensure_image).  The attach (its `upgrade`) is made as serve makes
    it and closed at once: the script is already in place, so the
    container's stdin ends before or as it starts, cold or started ahead.
    Before the start, the script is sealed as serve seals it
    (_docker_seal_script), and unsealed at the end.  A wait is sent from a thread of its own, so that
    one described before the start is in place first; the replay collects
    it before any later DELETE and at the end.  The probe's logs, when the
    daemon keeps any, go to out and err.  Returns the probe's exit status
    (the wait's StatusCode), or 125 when a request failed (as the docker CLI
    does); once a container was created, its remove steps always run."""
    out = out or sys.stdout.buffer
    err = err or sys.stderr.buffer
    sock = _checked_socket(socket_path)
    requests = docker_requests(bundle)
    described = _described_name(requests)
    failed, created, waits = None, False, []
    sealed = None
    status_code = [None]

    def note(msg):
        err.write(f"docker-replay: {msg}\n".encode())
        err.flush()

    def path_of(req):
        """The request's path with the test's container name in place of
        the dry run's: as a path segment, and as create's ?name=."""
        path = req["path"]
        if not (name and described and name != described):
            return path
        parts = urllib.parse.urlsplit(path)
        segments = [urllib.parse.quote(name, safe="") if urllib.parse.unquote(seg) == described else seg
                    for seg in parts.path.split("/")]
        query = [(k, name if k == "name" and v == described else v)
                 for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
        return urllib.parse.urlunsplit(("", "", "/".join(segments), urllib.parse.urlencode(query), ""))

    def collect(timeout=None):
        nonlocal failed
        while waits:
            w = waits.pop(0).result(timeout)
            if w.error or w.status is None or w.status >= 300:
                failed = failed or f"wait: {w.error or f'{w.status} {w.value!r:.300}'}"
                note(failed)
                continue
            if isinstance(w.value, dict):
                status_code[0] = w.value.get("StatusCode")
                if w.value.get("Error"):
                    note(f"wait: {w.value['Error']}")
            # The probe's output, when the daemon kept it (best effort).
            cname = _VERSIONED.sub("/", w.path).split("/")[2]
            with contextlib.suppress(DockerError):
                st, raw = docker_api("GET", f"/containers/{cname}/logs?stdout=1&stderr=1", socket_path=sock)
                if st == 200 and isinstance(raw, bytes):
                    o, e = _demux(raw)
                    out.write(o)
                    err.write(e)
                    out.flush()
                    err.flush()

    for req in requests:
        step = str(req.get("step", ""))
        method = str(req.get("method", "GET")).upper()
        path = path_of(req)
        if not _VERSIONED.match(path):
            path = f"/v{DOCKER_API_VERSION}{path}"
        plain = _VERSIONED.sub("/", path)
        if step.startswith("kill") or plain.startswith(("/images/create", "/images/load")):
            continue
        removing = method == "DELETE" and plain.startswith("/containers/")
        if removing and not failed:
            collect()
        if failed and not (removing and created):
            continue
        if method == "POST" and re.match(r"^/containers/[^/]+/wait", plain):
            waits.append(_DockerWait(sock, path))
            continue
        if method == "POST" and req.get("upgrade") == "tcp":
            try:
                docker_attach_stdin(path, sock).close()
            except DockerError as e:
                failed = failed or f"{step}: {e}"
                note(f"{step}: {e}")
            continue
        body = req.get("body")
        if method == "POST" and re.match(r"^/containers/[^/]+/start", plain) and not sealed:
            sealed = _docker_seal_script(bundle)
        try:
            if plain.startswith("/containers/create") and isinstance(body, dict) and body.get("Image"):
                docker_ensure_image(body["Image"], bundle, sock)
            # The dry run's image step inspects the image serve would import:
            # made present first, as serve's import would (above).
            inspected = re.match(r"^/images/([^/]+(?:/[^/]+)*)/json$", plain)
            if method == "GET" and inspected:
                docker_ensure_image(urllib.parse.unquote(inspected.group(1)), bundle, sock)
            status, value = docker_api(method, path, body=body, socket_path=sock, timeout=120)
        except DockerError as e:
            failed = failed or f"{step}: {e}"
            note(f"{step}: {e}")
            continue
        if status >= 300 and not (removing and status == 404):
            failed = failed or f"{step}: {method} {path} answered {status}: {value!r:.300}"
            note(f"{step}: {method} {path} answered {status}: {value!r:.300}")
            continue
        if plain.startswith("/containers/create"):
            created = True
    # After a failure the container may never have run: its wait gets a
    # bounded time once the container was removed.
    collect(10 if failed else None)
    if sealed:
        subprocess.run(["umount", sealed], check=False)
    # The container's parent cgroup (the create body's CgroupParent, the
    # bundle's cgroupsPath) outlives it, as serve removes it after a run.
    for req in requests:
        parent = ((req.get("body") or {}).get("HostConfig") or {}).get("CgroupParent") \
            if isinstance(req.get("body"), dict) else None
        if parent and parent.startswith("/sealed-probe/") and ".." not in parent:
            for hier in glob.glob("/sys/fs/cgroup/*/"):
                with contextlib.suppress(OSError):
                    os.rmdir(hier.rstrip("/") + parent)
    if failed:
        return 125
    if status_code[0] is None:
        note("no wait step answered a StatusCode")
        return 125
    return int(status_code[0])


def _main(argv):
    """python3 sp_harness.py docker-run --bundle DIR [--name NAME] [--socket PATH]
    python3 sp_harness.py docker-rm [--socket PATH] NAME
    python3 sp_harness.py docker-kill [--socket PATH] NAME [SIGNAL]
    (what DockerBackend.run_argv, delete_argv and kill_argv return for docker)."""
    if not argv:
        print(_main.__doc__, file=sys.stderr)
        return 2
    verb, args = argv[0], argv[1:]
    opts, rest = {}, []
    i = 0
    while i < len(args):
        if args[i] in ("--bundle", "--name", "--socket") and i + 1 < len(args):
            opts[args[i][2:]] = args[i + 1]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    sock = opts.get("socket")
    try:
        if verb == "docker-run" and "bundle" in opts and not rest:
            return docker_replay(opts["bundle"], opts.get("name"), sock)
        if verb == "docker-rm" and len(rest) == 1:
            return 0 if docker_remove(rest[0], sock) else 1
        if verb == "docker-kill" and len(rest) in (1, 2):
            sig = rest[1] if len(rest) == 2 else "KILL"
            status, value = docker_api("POST", f"/containers/{urllib.parse.quote(rest[0], safe='')}/kill?signal={sig}",
                                       socket_path=sock)
            if status >= 300:
                print(f"docker-kill: {status} {value!r:.300}", file=sys.stderr)
            return 0 if status < 300 else 1
    except DockerError as e:
        print(f"{verb}: {e}", file=sys.stderr)
        return 125
    print(_main.__doc__, file=sys.stderr)
    return 2


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
    # Docker: the Engine API (v1.41) of a dockerd, over its Unix socket.  No
    # binary: the option names the daemon's socket, and the tests' daemon is
    # the project's own (scripts/dockerd; its socket in SP_DOCKER_SOCKET),
    # never the system's.  serve keeps each invocation's workspace in
    # STATE/docker-work/<run>/<inv>, in the host's mount namespace (dockerd
    # resolves bind sources in its own), and names each container
    # sp-<run>-<inv>, labelled with the run, the invocation and the state
    # directory's key (docker_state_key).
    "docker": {
        "runtime": "docker",
        "binary": None,
        "option": "--docker-socket",
        "state": "docker-work",
        # Its host processes: the containerd shim of each container.
        "processes": ("containerd-shim-runc-v2",),
        "kernel": "host",
        "flags": (),
        # What /version answers for a daemon serve refuses (API older than 1.41).
        "old_version": '{"Version":"19.03.15","ApiVersion":"1.40","MinAPIVersion":"1.12","Os":"linux"}',
    },
    # sbx (Docker Sandboxes, a microVM per sandbox) cannot run here: its
    # tests run against the TEST DOUBLE tests/doubles/sbx/sbx, installed per
    # test file by sp_sbx.SbxDouble, which runs each VM's workload under
    # runc.  serve keeps each invocation's workspace in STATE/sbx-work/<run>/<inv>
    # and names each VM sp-<run>-<inv>.<state key> (sp_sbx.vm_name).
    "sbx": {
        "runtime": "sbx",
        "binary": "sbx",
        "option": "--sbx",
        "state": "sbx-work",
        # Its host processes, each of whose argv names the VM: the sbx CLI
        # serve runs (`sbx exec` lives as long as the probe; the double is
        # a script, so its argv[0] is python3: SbxBackend.is_process) and the
        # double's runc.
        "processes": ("sbx", "runc", "runc:[2:INIT]"),
        "kernel": "microvm",
        "flags": (),
        # What `sbx version` prints for a release serve refuses (not audited).
        "old_version": "Client:\n Version: v0.38.0\n",
    },
}


def other_backends(name):
    """The backends this build has (SP_BUILD_BACKENDS, tests/meson.build's
    sp_backends) other than name: whose options a test gives with name's
    config, to see them refused."""
    built = [b for b in os.environ.get("SP_BUILD_BACKENDS", name).split(",") if b]
    return sorted(b for b in built if b != name and b in BACKENDS)


def option_example(name):
    """A value for backend name's option in a test that expects it refused:
    its binary where runc and runsc install, or the project's test dockerd's
    socket (never the system's)."""
    binary = BACKENDS[name]["binary"]
    return f"/usr/bin/{binary}" if binary else PROJECT_DOCKER_SOCKET


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
    and the command lines a test uses to run a dry-run bundle by hand.

    One subclass per backend (BACKEND_CLASSES; backend() makes the one of
    SP_BACKEND), each overriding what it does its own way: RuncBackend and
    GvisorBackend share OciCliBackend (a runtime command line with a --root
    per run), DockerBackend and SbxBackend share HostWorkspacesBackend (a
    daemon that mounts from the host's mount namespace).  A test asks a
    capability that says why it differs (workspaces_on_host,
    creates_ahead, ...), not which backend it is.

    binary_path is the runtime binary for runc and gvisor, the daemon's
    socket for docker (SP_DOCKER_SOCKET), the installed test double for
    sbx (sp_sbx.SbxDouble)."""

    name = None

    # Which backend this is.  Kept for the few checks that are about one
    # backend's own files or double (test_bundle_structure's sbx command
    # format, test_stage's sbx double log, test_docker_wait_answers' guard);
    # new code asks a capability.
    docker = False
    sbx = False
    gvisor = False

    # ---- capabilities: what a test may ask, each saying why it differs ----
    # serve keeps its workspaces under STATE, in the host's mount namespace
    # (STATE/docker-work, STATE/sbx-work), since the daemon resolves mount
    # sources there (docs/runtimes.md).
    workspaces_on_host = False
    # serve creates a sandbox ahead of its request (a `create` op in the
    # runtime's vtable), so a pool of waiting sandboxes exists.
    creates_ahead = True
    # serve also starts a pool sandbox's interpreter ahead, which then waits
    # for its script (docs/runtimes.md, "Interpreters started ahead"): the
    # runtime reports a waiting sandbox as running, not created.
    starts_ahead = False
    # The daemon that resolves the workspaces' mount sources, named for a
    # test's message (None where serve mounts them itself).
    mount_daemon = None
    # The runtime is a daemon reached through a socket (the option names the
    # socket): the daemon, not serve, makes the containers (their processes,
    # namespaces, the create's errors), and finds them by the label of their
    # state directory (org.sealed-probe.state), not as entries of a --root.
    runtime_is_daemon = False
    # The probe runs in a per-sandbox user namespace, root and the probe
    # each mapped onto a host id of serve's range (docs/runtimes.md, "The
    # probe's identity").
    user_namespace = True
    # The probe runs on gVisor's sentry, a kernel in user space inside
    # runsc-sandbox: it has no host process of its own, and the sentry
    # keeps its own accounting (getrusage), UTS namespace and /proc.
    runs_on_sentry = False
    # The audit's resource facts (cpu_ms, peak memory, oom) come from the
    # host's account of the sandbox; a VM's kernel counts them where the
    # host cannot, and sbx does not report them (docs/runtimes.md).
    reports_resource_facts = True
    # The runtime is an OCI command line serve runs with a --root per run
    # (runc, runsc): that directory holds its state, and a fake binary
    # (sp_backend.FakeBins) can stand in for it to make a step slow or fail.
    oci_cli = False

    def __init__(self, binary_path):
        spec = BACKENDS[self.name]
        self.runtime = spec["runtime"]
        self.binary_name = spec["binary"]
        self.binary = binary_path
        self.socket = None
        self.double = None
        self.option = spec["option"]
        self.state_subdir = spec["state"]
        self.process_names = tuple(n.encode() for n in spec["processes"])
        self.kernel = spec["kernel"]
        self.flags = tuple(spec["flags"])
        self.old_version = spec["old_version"]

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"

    @property
    def create_reason(self):
        """What the audit's reason for a failed create names: the runtime's
        create (`runc create`, `sbx create`)."""
        return f"{self.binary_name} create"

    # ---- the proxy's command lines ----
    @property
    def option_default(self):
        """The value a test gives the backend's option when it names none:
        nothing for runc and runsc (serve finds them on its search path)."""
        return None

    def proxy_args(self, given=()):
        """The options every serve, check and bundle of a test carries on this
        backend, unless given (the test's own arguments) names the option
        already: [] for runc and runsc."""
        if self.option_default is None or self.option in given:
            return []
        return [self.option, self.option_default]

    @property
    def extra_args(self):
        """Options beyond the backend's one that serve needs on it."""
        return []

    # ---- state ----
    def run_root(self, state, run):
        """serve's --root for one run: STATE/runc/<run> or STATE/runsc/<run>;
        for docker and sbx, the run's workspaces: STATE/docker-work/<run>."""
        return os.path.join(state, self.state_subdir, run or "")

    @property
    def run_dir(self):
        """This test process's own --run-dir (TEST_RUN_DIR_ROOT/<pid>): every
        serve and check of the suite writes its workspaces and probe-id locks
        there, never in the host's /run/sealed-probe, so that tests running
        side by side, and an operator's serve, share nothing.  Made on first
        use, removed when the process exits."""
        path = os.path.join(TEST_RUN_DIR_ROOT, str(os.getpid()))
        if not os.path.isdir(path):
            os.makedirs(TEST_RUN_DIR_ROOT, mode=0o711, exist_ok=True)
            os.mkdir(path, 0o711)
            os.chmod(path, 0o711)
            atexit.register(_remove_run_dir, path)
        return path

    def serve_args(self, given=()):
        """proxy_args, and this process's --run-dir unless given names one:
        what every serve and check of a test carries."""
        return self.proxy_args(given) + ([] if "--run-dir" in given else ["--run-dir", self.run_dir])

    def work_dir(self, state):
        """Where serve keeps the workspaces of the state directory state:
        RUN_DIR/work/<device>-<inode> of it, in hex (src/serve/preflight.c),
        RUN_DIR this process's run_dir."""
        st = os.stat(state)
        return f"{self.run_dir}/work/{st.st_dev:x}-{st.st_ino:x}"

    def release(self, path):
        """Undoes occupy(): removes the path it made."""
        if os.path.isdir(path):
            os.rmdir(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def force_delete_all(self, root):
        for cid in self.containers(root):
            self.force_delete(root, cid)

    # ---- a preflight refusal's runtime ----
    @contextlib.contextmanager
    def too_old(self, directory):
        """(what, value): a value for the backend's option naming a runtime
        serve refuses as too old (it answers old_version), made in
        directory, and what it is, for a test's name."""
        fake = os.path.join(directory, f"fake-{self.binary_name}")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ncat <<'EOF'\n" + self.old_version + "EOF\nexit 0\n")
        os.chmod(fake, 0o755)
        yield f"printing version {self.old_version.split()[2]}", fake

    def missing(self, directory):
        """A value for the backend's option naming no file, in directory."""
        return os.path.join(directory, f"no-{self.binary_name}")

    # ---- host processes ----
    def is_process(self, argv):
        """argv (a list of bytes) is one of this backend's host processes."""
        return bool(argv) and os.path.basename(argv[0]) in self.process_names

    def process_mark(self, state):
        """What the argv of a host process of state holds (runc, runsc):
        the state directory.  None when state is gone."""
        return state.encode()

    def host_processes(self, state):
        """[(pid, argv)] of the backend's host processes that belong to state:
        those (is_process) whose argv holds process_mark(state)."""
        mark = self.process_mark(state)
        if mark is None:
            return []
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if self.is_process(argv) and mark in b" ".join(argv):
                out.append((int(pid), b" ".join(argv)[:200]))
        return out

    # ---- TAP ----
    def not_applicable(self, tap, name, reason):
        """A named line for an assertion that does not apply here, with why:
        `ok N - NAME # SKIP not applicable on BACKEND: REASON`."""
        tap.n += 1
        print(f"ok {tap.n} - {name} # SKIP not applicable on {self.name}: {reason}", flush=True)


class OciCliBackend(Backend):
    """runc and runsc: an OCI runtime command line, with serve's --root for
    each run at STATE/<runc|runsc>/<run>, one entry per container there."""

    oci_cli = True
    starts_ahead = True
    # What `list` says of a container whose interpreter waits.
    waiting_statuses = ("running",)

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
        """The runtime's `run`."""
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
            cid = self._listed_container(root, n)
            if cid:
                ids.add(cid)
        return ids

    def created_containers(self, state, run):
        """run's containers that the runtime reports as waiting for their
        request (`list`'s status column): running, the interpreter started
        ahead (starts_ahead)."""
        root = self.run_root(state, run)
        if not os.path.isdir(root):
            return set()
        want = self.waiting_statuses if self.starts_ahead else ("created",)
        r = subprocess.run(self.prefix(root) + ["list"], capture_output=True, text=True)
        return {f[0] for f in (ln.split() for ln in r.stdout.splitlines()[1:]) if len(f) >= 3 and f[2] in want}

    def create_returned(self, root, cid):
        """Whether the `create` of container cid in root has returned: runc
        and runsc report a container created before `create --pid-file` has
        written its pid file (a dot-named file, then renamed)."""
        return os.path.exists(os.path.join(root, f"{cid}.pid"))

    def force_delete(self, root, cid, bundle=None):
        subprocess.run(self.kill_argv(root, cid, bundle=bundle), capture_output=True)
        subprocess.run(self.delete_argv(root, cid, bundle=bundle), capture_output=True)

    def force_delete_state(self, state):
        """Removes every container of a state directory, whatever its run:
        each --root's (STATE/runc/*, STATE/runsc/*)."""
        for root in glob.glob(os.path.join(state, self.state_subdir, "*")):
            self.force_delete_all(root)

    def leftover_containers(self, state, exclude=frozenset()):
        """What a leak check reports of state's containers: one line per
        --root holding any.  Ids in exclude (a live serve's pool) are not
        reported."""
        found = []
        for root in glob.glob(os.path.join(state, self.state_subdir, "*")):
            ids = self.containers(root) - set(exclude)
            if ids:
                found.append(f"containers in {root}: {sorted(ids)}")
        return found


class RuncBackend(OciCliBackend):
    """runc: a directory per container in its --root."""

    name = "runc"

    def container_of(self, name, root=None):
        """The container id an entry of a --root directory belongs to."""
        return name

    def _listed_container(self, root, name):
        return name if os.path.isdir(os.path.join(root, name)) else None

    def occupy(self, root, cid):
        """Makes `create` of container cid in root fail, as a taken id does;
        returns the path made, which the caller removes (release())."""
        path = os.path.join(root, cid)
        os.mkdir(path, 0o700)
        return path


class GvisorBackend(OciCliBackend):
    """runsc: `<id>_sandbox:<id>.state` and `.lock` files in its --root."""

    name = "gvisor"
    # runsc 2022 `list` says "stopped" (pid -1) of a running container on
    # these hosts, a cold probe's as well (seen while it slept): only
    # "created" is told apart.
    waiting_statuses = ("running", "stopped")
    gvisor = True
    runs_on_sentry = True

    def container_of(self, name, root=None):
        """The container id an entry of a --root directory belongs to."""
        return name.split("_sandbox:", 1)[0] if "_sandbox:" in name else None

    def _listed_container(self, root, name):
        # A container is its .state file.  A lone .lock is none: a
        # `runsc list` that loads a container just as it is deleted makes
        # its lock file again (runsc opens it with O_CREAT), and `runsc
        # list` and `delete` ignore it; serve's stop removes the --root
        # whole.
        return self.container_of(name) if name.endswith(".state") else None

    def occupy(self, root, cid):
        """Makes `create` of container cid in root fail, as a taken id does;
        returns the path made, which the caller removes (release())."""
        path = os.path.join(root, f"{cid}_sandbox:{cid}.state")
        with open(path, "w") as f:
            f.write("{}")
        return path


class HostWorkspacesBackend(Backend):
    """docker and sbx: a daemon resolves the mount sources in the host's
    mount namespace, so serve unshares none and keeps each invocation's
    workspace at STATE/<docker-work|sbx-work>/<run>/<inv>, naming its
    sandbox sp-<run>-<inv>.  There is no OCI command line: run_argv,
    delete_argv and kill_argv call a helper of the harness's own."""

    workspaces_on_host = True

    def work_dir(self, state):
        """STATE/docker-work (STATE/sbx-work), in the host's mount namespace,
        where the daemon resolves bind sources."""
        return os.path.join(state, self.state_subdir)

    def container_of(self, name, root=None):
        """An entry of STATE/<state_subdir>/<run> (root) is an invocation's
        workspace, <inv>, of container sp-<run>-<inv>."""
        if root and name.isdigit():
            return f"sp-{os.path.basename(os.path.normpath(root))}-{name}"
        return None

    def prefix(self, root, bundle=None):
        raise RuntimeError(f"{self.name} has no OCI runtime command line: use run_argv, delete_argv, kill_argv")

    @staticmethod
    def _state_and_run(root):
        return os.path.dirname(os.path.dirname(os.path.normpath(root))), os.path.basename(root)

    def create_returned(self, root, cid):
        """The daemon reports a container created once its create returned."""
        return True


class DockerBackend(HostWorkspacesBackend):
    """The Engine API (v1.41) of a dockerd over its Unix socket (binary_path):
    containers sp-<run>-<inv>, labelled with the run, the invocation and the
    state directory's key (docker_state_key)."""

    name = "docker"
    docker = True
    mount_daemon = "dockerd"
    runtime_is_daemon = True
    # userns-remap is daemon-wide: the probe runs as its slot's host probe id.
    user_namespace = False
    # The daemon's reason for a failed create (its 409): "docker: create `sp-<run>-<inv>`: ...".
    create_reason = "docker: create"
    # A pool container is started at create, its interpreter waiting on the
    # stdin an attach holds open (docs/runtimes.md): the daemon says running.
    starts_ahead = True
    waiting_statuses = ("running",)

    def __init__(self, socket_path):
        super().__init__(None)
        self.socket = socket_path

    @property
    def option_default(self):
        """The tests' daemon, so that serve, check and bundle never fall back
        to the system's /var/run/docker.sock."""
        return self.socket

    @contextlib.contextmanager
    def too_old(self, directory):
        """A daemon whose Engine API is too old: the fake Engine API's
        old-api mode (its /version answers old_version), on a socket of the
        test's own."""
        from sp_fake_docker import FakeDocker
        fake_sock = os.path.join(directory, "fake-docker.sock")
        with FakeDocker(fake_sock, "old-api", os.path.join(directory, "fake-docker.log")):
            yield "naming a daemon whose Engine API is 1.40", fake_sock

    def missing(self, directory):
        return os.path.join(directory, "no-docker.sock")

    def occupy(self, root, cid):
        """Makes `create` of container cid fail, as a taken name does: a
        container named cid exists already (made from an empty image,
        labelled with root's state and run, so that force_delete_state
        removes it too); the path returned is a marker file in root, and
        release() removes both."""
        state, run = self._state_and_run(root)
        labels = {"org.sealed-probe.state": docker_state_key(state), "org.sealed-probe.run": run,
                  "org.sealed-probe.test": "occupy"}
        status, value = docker_api("POST", f"/containers/create?name={urllib.parse.quote(cid, safe='')}",
                                   {"Image": self._empty_image(), "Cmd": ["/nonexistent"], "Labels": labels,
                                    "NetworkDisabled": True, "HostConfig": {"NetworkMode": "none"}},
                                   socket_path=self.socket)
        if status != 201:
            raise DockerError(f"creating {cid} answered {status}: {value!r:.300}")
        path = os.path.join(root, f".occupied-{cid}")
        with open(path, "w") as f:
            f.write(cid)
        return path

    def release(self, path):
        if os.path.isfile(path):
            with open(path) as f:
                docker_remove(f.read().strip(), self.socket)
        super().release(path)

    def _empty_image(self):
        """A one-file image for containers that are never started (occupy)."""
        ref = "sealed-probe-test/empty:1"
        status, _ = docker_api("GET", f"/images/{ref}/json", socket_path=self.socket)
        if status == 200:
            return ref
        with tempfile.TemporaryFile() as tmp:
            with tarfile.open(fileobj=tmp, mode="w") as tar:
                info = tarfile.TarInfo("empty")
                tar.addfile(info)
            tmp.flush()
            tmp.seek(0)
            status, value = docker_api("POST", "/images/create?fromSrc=-&repo=sealed-probe-test/empty&tag=1",
                                       body=tmp, socket_path=self.socket, content_type="application/x-tar")
        if status != 200:
            raise DockerError(f"importing {ref} answered {status}: {value!r:.300}")
        return ref

    def _helper(self, verb, *args):
        return [sys.executable, "-I", os.path.abspath(__file__), verb, "--socket", self.socket, *args]

    def run_argv(self, root, bundle, cid):
        """The replay of the bundle's runtime-commands.json (docker_replay),
        root unused."""
        return self._helper("docker-run", "--bundle", bundle, "--name", cid)

    def delete_argv(self, root, cid, bundle=None):
        return self._helper("docker-rm", cid)

    def kill_argv(self, root, cid, sig="KILL", bundle=None):
        return self._helper("docker-kill", cid, sig)

    def containers(self, root):
        """root is STATE/docker-work/<run>: the names of the containers
        labelled with that state's key and that run."""
        state, run = self._state_and_run(root)
        return set(docker_state_containers(state, run, self.socket)) if run else set()

    def created_containers(self, state, run):
        """run's containers that wait for their request: State "running", the
        interpreter started ahead (starts_ahead)."""
        want = self.waiting_statuses if self.starts_ahead else ("created",)
        return {n for n, st in docker_state_statuses(state, run, self.socket).items() if st in want}

    def force_delete(self, root, cid, bundle=None):
        docker_remove(cid, self.socket)

    def force_delete_state(self, state):
        """Removes every container labelled with the state's key."""
        for cid in docker_state_containers(state, socket_path=self.socket):
            docker_remove(cid, self.socket)

    def leftover_containers(self, state, exclude=frozenset()):
        """The containers labelled with the state's key
        (org.sealed-probe.state), of any run, but those in exclude."""
        left = sorted(set(docker_state_containers(state, socket_path=self.socket)) - set(exclude))
        return [f"containers labelled org.sealed-probe.state={docker_state_key(state)}: {sorted(left)}"] \
            if left else []

    def host_processes(self, state):
        """The containerd shims of the containers labelled with state's key."""
        return docker_shims(docker_state_containers(state, socket_path=self.socket).values())


class SbxBackend(HostWorkspacesBackend):
    """sbx (Docker Sandboxes, a microVM per sandbox), run here against its
    test double (binary_path: sp_sbx.SbxDouble), which runs each VM's
    workload under runc.  VMs are named sp-<run>-<inv>.<state key>
    (sp_sbx.vm_name)."""

    name = "sbx"
    sbx = True
    creates_ahead = False  # sbx starts every sandbox cold
    mount_daemon = "sandboxd (sbx's daemon)"
    reports_resource_facts = False  # the VM's kernel counts them

    def __init__(self, double):
        super().__init__(double.path)
        self.double = double

    @property
    def option_default(self):
        return self.double.path

    def proxy_args(self, given=()):
        """The double as --sbx and its template as --sbx-template, each
        unless given names it."""
        out = [] if self.option in given else [self.option, self.double.path]
        return out + ([] if "--sbx-template" in given else ["--sbx-template", self.double.template])

    @property
    def extra_args(self):
        """sbx's template."""
        return ["--sbx-template", self.double.template]

    def occupy(self, root, cid):
        """Makes `create` of container cid in root fail, as a taken name does:
        the double holds a VM of that name; the path returned is a marker
        file in root, and release() removes both."""
        import sp_sbx
        state = self._state_and_run(root)[0]
        name = sp_sbx.vm_name(cid, state)
        r = self.double.call("create", "shell", "--name", name, "--template", self.double.template, "--quiet",
                             "--mount-target", "/probe/repo", "--", "/")
        if r.returncode != 0:
            raise RuntimeError(f"occupying {name} failed: {r.stderr.strip()}")
        path = os.path.join(root, f".occupied-{cid}")
        with open(path, "w") as f:
            f.write(name)
        return path

    def release(self, path):
        if os.path.isfile(path):
            with open(path) as f:
                self.double.remove_vm(f.read().strip())
        super().release(path)

    def _helper(self, verb, *args):
        sbx_main = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sp_sbx.py")
        return [sys.executable, "-I", sbx_main, verb, "--sbx", self.double.path, *args]

    def _vm(self, root, cid):
        """The VM of container cid whose workspaces are under root
        (STATE/sbx-work/<run>), or of a dry-run whose --state is root's."""
        import sp_sbx
        state = self._state_and_run(root)[0] if root else None
        return sp_sbx.vm_name(cid, state) if state and os.path.isdir(state) else cid

    def run_argv(self, root, bundle, cid):
        return self._helper("sbx-run", "--bundle", bundle, "--name", cid)

    def delete_argv(self, root, cid, bundle=None):
        return self._helper("sbx-rm", cid)

    def kill_argv(self, root, cid, sig="KILL", bundle=None):
        return self._helper("sbx-kill", cid)

    def containers(self, root):
        """The VMs of root's state (STATE/sbx-work/<run>) and run, by their
        container names."""
        state, run = self._state_and_run(root)
        return {n.rsplit(".", 1)[0] for n in self.state_vms(state) if run and n.startswith(f"sp-{run}-")}

    def created_containers(self, state, run):
        """None: sbx creates no sandbox ahead (creates_ahead)."""
        return set()

    def state_vms(self, state):
        """The double's VMs of state (named with its key), whatever their run."""
        import sp_sbx
        try:
            key = sp_sbx.state_key(state)
        except OSError:
            return []
        return [n for n in self.double.vms() if n.endswith("." + key)]

    def force_delete(self, root, cid, bundle=None):
        self.double.remove_vm(self._vm(root, cid))

    def force_delete_state(self, state):
        for name in self.state_vms(state):
            self.double.remove_vm(name)

    def leftover_containers(self, state, exclude=frozenset()):
        left = self.state_vms(state)
        return [f"sbx VMs of this state directory: {left}"] if left else []

    def is_process(self, argv):
        """Also the test double, a Python script: `python3 -I PATH ...`."""
        return super().is_process(argv) or (bool(argv) and self.double.path.encode() in argv[1:3])

    def process_mark(self, state):
        """The suffix of its VMs' names, `.<state key>`, which the argv of
        the sbx CLI serve runs and of the double's runc hold."""
        try:
            return ("." + docker_state_key(state)).encode()
        except OSError:
            return None


BACKEND_CLASSES = {c.name: c for c in (RuncBackend, GvisorBackend, DockerBackend, SbxBackend)}


_backend = []


# Where each test process's --run-dir lives (Backend.run_dir): short, as
# the default /run/sealed-probe is, since runsc cuts the argv it rewrites to
# its first length, and the paths below it name the bundles.
TEST_RUN_DIR_ROOT = "/run/spt"


def _remove_run_dir(path):
    """At exit: the run directory goes once no mount is left in it (a
    mount there means a serve is still running, or leaked one: left for
    the test that looks to find)."""
    with open("/proc/self/mountinfo") as f:
        if any(line.split()[4].startswith(path + "/") for line in f):
            return
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)


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
    if name == "sbx":
        # The test double (sp_sbx.SbxDouble): this build must accept its
        # version (meson -Dsbx_test_double=true, as scripts/test builds),
        # and it runs each VM under runc.
        import sp_sbx
        why = None
        if os.environ.get("SP_SBX_TEST_DOUBLE") != "1":
            why = ("backend sbx: this build does not accept the sbx test double's version "
                   "(configure it with meson -Dsbx_test_double=true, as scripts/test does)")
        elif sp_sbx.find_runc() is None:
            why = f"backend sbx: its test double runs VMs under runc, which is not installed in {RUNTIME_SEARCH_PATH}"
        if why is not None:
            if ci():
                bail_out(why + "; under CI=true this is a failure, not a skip")
            skip_all(why)
        _backend.append(SbxBackend(sp_sbx.SbxDouble(cached_rootfs())))
        return _backend[0]
    if binary_name is None:
        # Docker: no binary; its presence is the tests' daemon answering.
        path = docker_socket()
        if path is None:
            why = (f"backend {name}: SP_DOCKER_SOCKET is not set (scripts/test starts the project's dockerd, "
                   f"scripts/dockerd start, and sets it to {PROJECT_DOCKER_SOCKET})")
        else:
            why = docker_ping(path)
            if why is not None:
                why = f"backend {name}: the daemon at SP_DOCKER_SOCKET={path} does not answer /_ping: {why}"
        if why is not None:
            if ci():
                bail_out(why + "; under CI=true a missing or unreachable daemon is a failure, not a skip")
            skip_all(why)
    else:
        path = find_runtime(binary_name)
    if path is None:
        why = (f"backend {name}: its runtime binary `{binary_name}` is not installed in {RUNTIME_SEARCH_PATH} "
               "(scripts/install-deps --test installs it)")
        if ci():
            bail_out(why + "; under CI=true a missing runtime is a failure, not a skip")
        skip_all(why)
    _backend.append(BACKEND_CLASSES[name](path))
    return _backend[0]


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
