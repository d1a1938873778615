"""A fake Docker Engine API endpoint, for the docker backend's refusal tests
(test_docker_verify.py).  Standard library only.

It speaks HTTP/1.1 on a Unix socket (keep-alive, `Expect: 100-continue`,
request bodies by Content-Length or chunked, as libcurl sends them) and
emulates in memory exactly the calls the proxy's docker backend makes, API
version 1.41 (every path under /v1.41, except /_ping and /version):

    verify   GET /_ping, GET /version, GET /v1.41/info
    orphans  GET /v1.41/containers/json?all=1&filters=...,
             DELETE /v1.41/containers/<id>?force=1&v=1
    image    GET /v1.41/images/<name>/json,
             POST /v1.41/images/create?fromSrc=-&repo=..&tag=..&changes=LABEL%20k%3Dv (a tar body)
    run      POST /v1.41/containers/create?name=.., GET /v1.41/containers/<id>/json,
             POST .../start, .../wait, .../kill?signal=KILL, DELETE /v1.41/containers/<id>

Anything else is Docker's own 404 `page not found`, and is logged like every
other request.

Modes:

    capable          everything well-formed: API 1.41, `runc` among the runtimes,
                     seccomp among the security options, imports accepted, and
                     inspect echoing the create body's HostConfig.  It RUNS
                     NOTHING: `start` marks the container exited with status 0
                     at once and `wait` returns {"StatusCode":0}, so no probe
                     ever writes an answer.  A proxy's canary therefore fails
                     against it (serve never becomes ready, check exits 1): the
                     fake is for refusals and call sequences, never for answers.
    old-api          /version says ApiVersion 1.40 (Docker 19.03), and every
                     /v1.41 path is Docker's 400 "client version 1.41 is too new"
    no-runc          /v1.41/info's Runtimes has no `runc` key (it has
                     io.containerd.runc.v2 and runsc: the key must match exactly)
    no-seccomp       /v1.41/info's SecurityOptions has no `name=seccomp...` entry
    bad-image-label  every sealed-probe/rootfs:<tag> image exists, its
                     org.sealed-probe.rootfs.digest label sha256:<tag><other hex>:
                     the right 12-digit prefix, the wrong digest
    drops-field      inspect returns the create body's HostConfig with one field
                     (--field, default PidsLimit) changed: PidsLimit 64 -> 0,
                     MaskedPaths [...] -> [], a bool negated, and so on
    down             no server at all: nothing is made at the socket path

The log (--log) gets one JSON object per request, in the order handled:
seq, method, target (the request target as sent), path, query (parsed, each
value a list), headers ([[name, value], ...] as sent), chunked (bool),
body_length, body_sha256, json (the body parsed, when it was JSON), status
(the response's), and for a create, container (the Id given).

Standalone:

    python3 sp_fake_docker.py --socket PATH --mode MODE --log FILE [--ready-file FILE] [--field NAME]
    python3 sp_fake_docker.py --socket PATH --forward UPSTREAM --log FILE [--ready-file FILE]
        [--wait-answer KIND [--wait-answer-after N] [--wait-answer-token TOKEN] [--wait-answer-away SECONDS]]

It prints READY (and writes the ready file) once it accepts connections (in
mode down: once it has decided not to), and on SIGTERM or SIGINT closes the
socket, removes it and exits 0.  FakeDocker below runs it as a child process
for a test.

--forward UPSTREAM: no emulation at all, but a logging forwarding proxy in
front of a real daemon's socket (test_runtime_commands.py on docker: what
serve asks the daemon, request by request).  Each request (HTTP/1.1,
keep-alive, `Expect: 100-continue`, a body by Content-Length or chunked) is
sent on to UPSTREAM over a connection of its own, its body streamed (a
chunked one stays chunked), every header but the hop-by-hop ones as sent;
the answer is relayed as it comes (a body of unknown length re-chunked), so
a wait's headers reach the client when the daemon sends them.  The log gets
two JSON lines per request, joined on seq: at receipt, before anything is
forwarded, {"event": "request", seq, method, target, path, query, headers,
chunked, body_length, body_sha256, json (when the body is JSON)}; when the
answer's headers came back, {"event": "response", seq, status, json (a JSON answer of known
length up to 1 MiB, read whole first: a create's Id, an inspect)}; status
502 with "error" when UPSTREAM could not be reached.  ForwardingProxy below runs
it as a child process; its requests() merges the two.

--wait-answer KIND (with --forward only): the daemon's answers to
`POST /v1.41/containers/<ref>/wait` are replaced by a malformed one of KIND
(test_docker_wait_answers.py: a wait that cannot be read is the runtime's
failure, never a timeout), except the first --wait-answer-after N waits (the
canary's), which pass through untouched.  Every other request is forwarded
as without the option.  The wait is forwarded first and the replacement
sent once the daemon's own answer came (so the probe ran its course), except
for dropped-early.  Each malformed body holds --wait-answer-token TOKEN,
which must never show in what the client reports of it:

    ok             nothing replaced: the daemon's answer (a control)
    deep           200, a JSON array 100,000 levels deep
    bad-utf8       200, {"StatusCode":0,"Error":{"Message":"TOKEN <invalid UTF-8>"}}
    not-json       200, a line of text that is no JSON
    huge           200, a valid JSON object of 5 MiB (over the client's 4 MiB,
                   DOCKER_API_RESPONSE_MAX in src/runtimes/docker_api.h)
    status-500     500, {"message":"TOKEN ..."} (Docker's error form)
    dropped        200, a Content-Length the body never reaches: the
                   connection closes mid-answer
    dropped-early  nothing forwarded: the connection closes at once, with no
                   answer, the container still running
    dup-key        200, {"StatusCode":0,"TOKEN":1,"TOKEN":2} (a duplicate key)
    bad-after-key  200, {"StatusCode":0,"TOKEN":nope} (a bad value after a key)
    unreachable    no wait is touched: once the start of a container past
                   the first N is answered, the socket is moved away (renamed
                   beside itself: a connect finds nothing, as at a dead
                   daemon's), so that the wait cannot connect at all; it
                   comes back after --wait-answer-away SECONDS (default 3)
    gone           dropped-early, and the socket moved away as for
                   unreachable: the daemon went away during the wait

The log's response line of a replaced answer has "wait_answer": KIND and the
daemon's own status as "upstream_status" (absent for dropped-early and
gone); moving the socket away and back are the lines {"event": "away", seq}
and {"event": "back"} (ForwardingProxy.events())."""

import argparse
import contextlib
import hashlib
import http.client
import http.server
import json
import os
import re
import secrets
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse

API = "1.41"
MODES = ("capable", "old-api", "no-runc", "no-seccomp", "bad-image-label", "drops-field", "down")
DIGEST_LABEL = "org.sealed-probe.rootfs.digest"
# Bodies up to this size are parsed and logged as JSON when they are JSON.
JSON_LOG_MAX = 1 << 20
BODY_MAX = 4 << 30


def mutate(value):
    """A value that is certainly different from value, of the same kind where
    there is one: what drops-field puts in the inspected HostConfig."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 0 if value != 0 else 1
    if isinstance(value, list):
        return [] if value else ["changed"]
    if isinstance(value, dict):
        return {} if value else {"changed": ""}
    if isinstance(value, str):
        return "" if value else "changed"
    return 0


class Engine:
    """The daemon's state: images and containers, in memory, under one lock."""

    def __init__(self, mode, field, log_path):
        self.mode = mode
        self.field = field
        self.lock = threading.Lock()
        self.images = {}       # "repo:tag" -> {"Id", "Labels"}
        self.containers = {}   # id -> record
        self.seq = 0
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry = {"seq": self.seq, **entry}
            if self.log:
                self.log.write(json.dumps(entry, sort_keys=False) + "\n")
                self.log.flush()

    # ---- the calls -----------------------------------------------------------

    def ping(self):
        return 200, "text/plain; charset=utf-8", b"OK"

    def version(self):
        old = self.mode == "old-api"
        v = {
            "Platform": {"Name": "Docker Engine - Community"},
            "Version": "19.03.15" if old else "20.10.24",
            "ApiVersion": "1.40" if old else API,
            "MinAPIVersion": "1.12",
            "GitCommit": "fake",
            "GoVersion": "go1.19.9",
            "Os": "linux",
            "Arch": "amd64",
            "KernelVersion": os.uname().release,
            "BuildTime": "2023-05-16T00:00:00.000000000+00:00",
        }
        return json_reply(200, v)

    def info(self):
        runtimes = {"io.containerd.runc.v2": {"path": "runc"}, "io.containerd.runtime.v1.linux": {"path": "runc"},
                    "runc": {"path": "runc"}}
        security = ["name=apparmor", "name=seccomp,profile=default", "name=cgroupns"]
        default_runtime = "runc"
        if self.mode == "no-runc":
            runtimes = {"io.containerd.runc.v2": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc"}}
            default_runtime = "runsc"
        if self.mode == "no-seccomp":
            security = ["name=apparmor", "name=cgroupns"]
        with self.lock:
            n_containers = len(self.containers)
            n_images = len(self.images)
        return json_reply(200, {
            "ID": "FAKE:DOCK:ER00:0000:0000:0000:0000:0000:0000:0000:0000:0000",
            "Containers": n_containers, "ContainersRunning": 0, "ContainersPaused": 0,
            "ContainersStopped": n_containers, "Images": n_images,
            "Driver": "overlay2", "CgroupDriver": "systemd", "CgroupVersion": "2",
            "KernelVersion": os.uname().release, "OperatingSystem": "sp_fake_docker", "OSType": "linux",
            "Architecture": "x86_64", "NCPU": os.cpu_count() or 1, "MemTotal": 1 << 34,
            "Name": "fake", "ServerVersion": "19.03.15" if self.mode == "old-api" else "20.10.24",
            "Runtimes": runtimes, "DefaultRuntime": default_runtime, "SecurityOptions": security,
            "Swarm": {"LocalNodeState": "inactive"}, "Warnings": None,
        })

    def image_inspect(self, name):
        with self.lock:
            image = self.images.get(name)
        if image is None and self.mode == "bad-image-label":
            m = re.fullmatch(r"sealed-probe/rootfs:([0-9a-f]{12})", name)
            if m:
                # The right prefix, the wrong digest: sha256:<tag> + 52 digits
                # no rootfs of this tag will have.
                tail = hashlib.sha256(b"sp_fake_docker bad-image-label " + name.encode()).hexdigest()[:52]
                image = {"Id": "sha256:" + hashlib.sha256(name.encode()).hexdigest(),
                         "Labels": {DIGEST_LABEL: "sha256:" + m.group(1) + tail}}
        if image is None:
            return json_reply(404, {"message": f"No such image: {name}"})
        repo, _, tag = name.rpartition(":")
        return json_reply(200, {
            "Id": image["Id"], "RepoTags": [name], "RepoDigests": [], "Parent": "", "Comment": "Imported from -",
            "Created": "2024-01-01T00:00:00.000000000Z", "Architecture": "amd64", "Os": "linux",
            "Size": image.get("Size", 0), "VirtualSize": image.get("Size", 0),
            "Config": {"Labels": dict(image["Labels"]), "Env": None, "Cmd": None, "Entrypoint": None},
            "RootFS": {"Type": "layers", "Layers": [image["Id"]]},
        })

    def image_create(self, query, body_sha256, body_length, head):
        if "fromImage" in query:
            # A registry pull: the proxy must never ask for one.
            return json_reply(500, {"message": "sp_fake_docker: no registry here (fromImage)"})
        if query.get("fromSrc") != ["-"]:
            return json_reply(400, {"message": "sp_fake_docker: only fromSrc=- is emulated"})
        repo = query.get("repo", [""])[0]
        tag = query.get("tag", ["latest"])[0] or "latest"
        if not repo:
            return json_reply(400, {"message": "sp_fake_docker: repo is required"})
        if body_length < 512 or head[257:262] != b"ustar":
            return json_reply(500, {"message": "archive/tar: invalid tar header"})
        labels = {}
        for change in query.get("changes", []):
            words = change.split(None, 1)
            if len(words) != 2 or words[0].upper() != "LABEL":
                return json_reply(400, {"message": f"sp_fake_docker: unsupported change {change!r}"})
            for pair in words[1].split():
                key, eq, value = pair.partition("=")
                if not eq:
                    return json_reply(400, {"message": f"sp_fake_docker: LABEL needs key=value: {pair!r}"})
                labels[key.strip('"')] = value.strip('"')
        image_id = "sha256:" + body_sha256
        with self.lock:
            self.images[f"{repo}:{tag}"] = {"Id": image_id, "Labels": labels, "Size": body_length}
        return 200, "application/json", (json.dumps({"status": image_id}) + "\r\n").encode()

    def container_list(self, query):
        try:
            filters = json.loads(query.get("filters", ["{}"])[0] or "{}")
        except ValueError:
            return json_reply(400, {"message": "invalid filter"})
        if not isinstance(filters, dict):
            return json_reply(400, {"message": "invalid filter"})
        wanted = filters.get("label", [])
        if isinstance(wanted, dict):  # the older {"label": {"k=v": true}} form
            wanted = [k for k, v in wanted.items() if v]
        out = []
        with self.lock:
            for c in self.containers.values():
                labels = c["Config"].get("Labels") or {}
                ok = True
                for w in wanted:
                    key, eq, value = w.partition("=")
                    if key not in labels or (eq and labels[key] != value):
                        ok = False
                if ok:
                    out.append({"Id": c["Id"], "Names": ["/" + c["Name"]], "Image": c["Config"].get("Image"),
                                "Labels": labels, "State": c["State"]["Status"],
                                "Status": "Exited (0)" if c["State"]["Status"] == "exited" else "Created"})
        return json_reply(200, out)

    def container_create(self, query, body):
        if not isinstance(body, dict):
            return json_reply(400, {"message": "sp_fake_docker: the create body is not a JSON object"})
        name = query.get("name", [""])[0]
        if name and not re.fullmatch(r"/?[a-zA-Z0-9][a-zA-Z0-9_.-]+", name):
            return json_reply(400, {"message": f"Invalid container name ({name})"})
        name = name.lstrip("/")
        image = body.get("Image")
        with self.lock:
            known = image in self.images or (self.mode == "bad-image-label")
            if not known:
                return json_reply(404, {"message": f"No such image: {image}"})
            if name and any(c["Name"] == name for c in self.containers.values()):
                return json_reply(409, {"message": f'Conflict. The container name "/{name}" is already in use'})
            cid = secrets.token_hex(32)
            host = body.get("HostConfig")
            self.containers[cid] = {
                "Id": cid, "Name": name or cid[:12], "Created": now(),
                "Config": {k: v for k, v in body.items() if k not in ("HostConfig", "NetworkingConfig")},
                "HostConfig": json.loads(json.dumps(host)) if isinstance(host, dict) else {},
                "State": {"Status": "created", "Running": False, "Paused": False, "Restarting": False,
                          "OOMKilled": False, "Dead": False, "Pid": 0, "ExitCode": 0, "Error": "",
                          "StartedAt": "0001-01-01T00:00:00Z", "FinishedAt": "0001-01-01T00:00:00Z"},
            }
        return json_reply(201, {"Id": cid, "Warnings": []})

    def find(self, ref):
        """A container by full id, unique id prefix or name, as Docker finds one."""
        if ref in self.containers:
            return self.containers[ref]
        named = [c for c in self.containers.values() if c["Name"] == ref.lstrip("/")]
        if named:
            return named[0]
        prefixed = [c for cid, c in self.containers.items() if cid.startswith(ref)]
        return prefixed[0] if len(prefixed) == 1 else None

    def container_op(self, method, ref, op, query):
        with self.lock:
            c = self.find(ref)
            if c is None:
                return json_reply(404, {"message": f"No such container: {ref}"})
            state = c["State"]
            if method == "GET" and op == "json":
                host = json.loads(json.dumps(c["HostConfig"]))
                if self.mode == "drops-field":
                    host[self.field] = mutate(host.get(self.field))
                return json_reply(200, {
                    "Id": c["Id"], "Created": c["Created"], "Name": "/" + c["Name"], "Path": "",
                    "Args": [], "State": dict(state), "Image": self.images.get(c["Config"].get("Image"),
                                                                                {}).get("Id", ""),
                    "Config": c["Config"], "HostConfig": host, "Mounts": [], "RestartCount": 0,
                    "Driver": "overlay2", "Platform": "linux",
                })
            if method == "POST" and op == "start":
                if state["Status"] != "created":
                    return 304, None, b""
                # It runs nothing: the container has exited, status 0, at once.
                state.update(Status="exited", Running=False, ExitCode=0, StartedAt=now(), FinishedAt=now())
                return 204, None, b""
            if method == "POST" and op == "wait":
                return json_reply(200, {"StatusCode": state["ExitCode"], "Error": None})
            if method == "POST" and op == "kill":
                if not state["Running"]:
                    return json_reply(409, {"message": f"Container {c['Id']} is not running"})
                return 204, None, b""
            if method == "DELETE" and op == "":
                if state["Running"] and query.get("force") not in (["1"], ["true"], ["True"]):
                    return json_reply(409, {"message": "You cannot remove a running container"})
                del self.containers[c["Id"]]
                return 204, None, b""
        return json_reply(404, {"message": "page not found"})


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


def json_reply(status, obj):
    return status, "application/json", (json.dumps(obj) + "\n").encode()



def body_chunks(rfile, headers, chunked):
    """A request body read from rfile, piece by piece: chunked (trailers
    skipped) or by Content-Length; over BODY_MAX, or cut short, is an
    error."""
    length = 0
    if chunked:
        while True:
            line = rfile.readline(1024)
            if not line:
                raise ConnectionError("the connection closed inside a chunked body")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    t = rfile.readline(8192)
                    if t in (b"\r\n", b"\n", b""):
                        break
                return
            if length + size > BODY_MAX:
                raise ConnectionError("body too large")
            left = size
            while left:
                data = rfile.read(min(left, 1 << 16))
                if not data:
                    raise ConnectionError("the connection closed inside a chunk")
                left -= len(data)
                length += len(data)
                yield data
            rfile.readline(16)  # the CRLF after the chunk
    left = int(headers.get("Content-Length") or 0)
    if left < 0 or left > BODY_MAX:
        raise ConnectionError("bad Content-Length")
    while left:
        data = rfile.read(min(left, 1 << 16))
        if not data:
            raise ConnectionError("the connection closed inside the body")
        left -= len(data)
        yield data

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Docker/20.10.24 (linux)"
    sys_version = ""

    # A Unix socket's peer address is "", which the stock logging indexes.
    def address_string(self):
        return "unix"

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        """The request body, by Content-Length or chunked: (sha256, length,
        the first bytes (up to JSON_LOG_MAX), chunked)."""
        h = hashlib.sha256()
        head = bytearray()
        length = 0
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        for data in body_chunks(self.rfile, self.headers, chunked):
            h.update(data)
            length += len(data)
            if len(head) < JSON_LOG_MAX:
                head.extend(data[:JSON_LOG_MAX - len(head)])
        return h.hexdigest(), length, bytes(head), chunked

    def handle_any(self):
        engine = self.server.engine
        if self.command == "POST" and ATTACH_PATH.fullmatch(urllib.parse.urlsplit(self.path).path):
            self.handle_attach(engine)
            return
        try:
            body_sha256, body_length, head, chunked = self.read_body()
        except (ConnectionError, ValueError) as e:
            engine.record({"method": self.command, "target": self.path, "error": str(e)})
            self.close_connection = True
            return
        parsed = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(parsed.path)
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        body_json = None
        if head and body_length <= JSON_LOG_MAX:
            try:
                body_json = json.loads(head.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                body_json = None
        status, ctype, payload = self.route(engine, path, query, body_json, body_sha256, body_length, head)
        entry = {"method": self.command, "target": self.path, "path": path, "query": query,
                 "headers": [[k, v] for k, v in self.headers.items()], "chunked": chunked,
                 "body_length": body_length, "body_sha256": body_sha256, "status": status}
        if body_json is not None:
            entry["json"] = body_json
        if path == f"/v{API}/containers/create" and status == 201:
            entry["container"] = json.loads(payload)["Id"]
        engine.record(entry)
        self.send_response(status)
        self.send_header("Api-Version", "1.40" if engine.mode == "old-api" else API)
        self.send_header("Docker-Experimental", "false")
        self.send_header("Ostype", "linux")
        if status not in (204, 304):
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if status not in (204, 304) and self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def handle_attach(self, engine):
        """POST /containers/{id}/attach: answered 101 for a known container,
        then the connection is its stdin, read (and dropped) until the
        client closes it; 404 otherwise.  Recorded like any request."""
        ref = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).split("/")[3]
        with engine.lock:
            known = engine.find(ref) is not None
        entry = {"method": self.command, "target": self.path,
                 "path": urllib.parse.unquote(urllib.parse.urlsplit(self.path).path),
                 "query": urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True),
                 "headers": [[k, v] for k, v in self.headers.items()], "chunked": False, "body_length": 0,
                 "body_sha256": hashlib.sha256(b"").hexdigest(), "status": 101 if known else 404}
        engine.record(entry)
        self.close_connection = True
        if not known:
            status, ctype, payload = json_reply(404, {"message": f"No such container: {ref}"})
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(101, "UPGRADED")
        self.send_header("Content-Type", "application/vnd.docker.raw-stream")
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", "tcp")
        self.end_headers()
        self.wfile.flush()
        with contextlib.suppress(OSError):
            while self.rfile.read1(65536):
                pass

    def route(self, engine, path, query, body_json, body_sha256, body_length, head):
        m = self.command
        if path == "/_ping" and m in ("GET", "HEAD"):
            return engine.ping()
        if path == "/version" and m == "GET":
            return engine.version()
        prefix = f"/v{API}/"
        if engine.mode == "old-api" and path.startswith(prefix):
            return json_reply(400, {"message": f"client version {API} is too new. "
                                               "Maximum supported API version is 1.40"})
        if not path.startswith(prefix):
            return json_reply(404, {"message": "page not found"})
        rest = path[len(prefix) - 1:]
        if rest == "/info" and m == "GET":
            return engine.info()
        if rest == "/images/create" and m == "POST":
            return engine.image_create(query, body_sha256, body_length, head)
        im = re.fullmatch(r"/images/(.+)/json", rest)
        if im and m == "GET":
            return engine.image_inspect(im.group(1))
        if rest == "/containers/json" and m == "GET":
            return engine.container_list(query)
        if rest == "/containers/create" and m == "POST":
            return engine.container_create(query, body_json)
        cm = re.fullmatch(r"/containers/([^/]+)(?:/(json|start|wait|kill))?", rest)
        if cm:
            return engine.container_op(m, cm.group(1), cm.group(2) or "", query)
        return json_reply(404, {"message": "page not found"})

    do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = handle_any


# ---- --forward: a logging proxy in front of a real daemon ---------------------

WAIT_ANSWERS = ("ok", "deep", "bad-utf8", "not-json", "huge", "status-500", "dropped", "dropped-early", "dup-key",
                "bad-after-key", "unreachable", "gone")
WAIT_PATH = re.compile(r"/v[0-9.]+/containers/[^/]+/wait")
ATTACH_PATH = re.compile(r"/v[0-9.]+/containers/[^/]+/attach")
START_PATH = re.compile(r"/v[0-9.]+/containers/[^/]+/start")
# unreachable, gone: how long the socket stays away.
WAIT_AWAY_SECONDS = 3.0
WAIT_DEEP = 100_000
# Over the proxy's client's cap on an answer (DOCKER_API_RESPONSE_MAX, 4 MiB).
WAIT_HUGE = 5 << 20
WAIT_TOKEN = "SP-WAIT-ANSWER-TOKEN"


def wait_answer(kind, token):
    """(status, body, sent): the malformed answer of kind to a wait, and how
    many of body's bytes are sent before the connection closes (all of them
    but for dropped)."""
    t = token.encode()
    if kind == "deep":
        body = b"[" * WAIT_DEEP + b'"' + t + b'"' + b"]" * WAIT_DEEP
    elif kind == "bad-utf8":
        body = b'{"StatusCode":0,"Error":{"Message":"' + t + b' \xff\xfe\xc0\xaf"}}\n'
    elif kind == "not-json":
        body = b"<html><body><h1>502 Bad Gateway</h1>" + t + b"</body></html>\n"
    elif kind == "huge":
        head = b'{"StatusCode":0,"Error":{"Message":"' + t + b" "
        tail = b'"}}\n'
        body = head + b"x" * (WAIT_HUGE - len(head) - len(tail)) + tail
    elif kind == "status-500":
        return 500, b'{"message":"' + t + b': the wait failed"}\n', None
    elif kind == "dropped":
        body = b'{"StatusCode":0,"Error":{"Message":"' + t + b' ' + b"y" * 4096 + b'"}}\n'
        return 200, body, len(body) // 2
    elif kind == "dup-key":
        body = b'{"StatusCode":0,"' + t + b'":1,"' + t + b'":2}\n'
    elif kind == "bad-after-key":
        body = b'{"StatusCode":0,"' + t + b'":nope}\n'
    else:
        raise ValueError(f"no malformed answer of kind {kind!r}")
    return 200, body, None


HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
              "expect", "content-length"}


class ForwardLog:
    """The proxy's log: JSON lines under one lock, seq given at receipt."""

    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.seq = 0
        self.log = open(log_path, "a", encoding="utf-8")

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def write(self, entry):
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()


class _UpstreamConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=None)
        self._unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self._unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


class ForwardHandler(http.server.BaseHTTPRequestHandler):
    """One client connection; each request on it goes to the upstream daemon
    on a connection of its own."""

    protocol_version = "HTTP/1.1"
    sys_version = ""

    def address_string(self):
        return "unix"

    def log_message(self, fmt, *args):
        pass

    def body_chunks(self, chunked):
        """The request body, piece by piece (by Content-Length or chunked)."""
        return body_chunks(self.rfile, self.headers, chunked)

    def handle_any(self):
        log = self.server.forward_log
        seq = log.next_seq()
        if self.command == "POST" and ATTACH_PATH.fullmatch(urllib.parse.urlsplit(self.path).path):
            self.forward_attach(log, seq)
            return
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        has_body = chunked or int(self.headers.get("Content-Length") or 0) > 0
        parsed = urllib.parse.urlsplit(self.path)
        entry = {"event": "request", "seq": seq, "method": self.command, "target": self.path,
                 "path": urllib.parse.unquote(parsed.path),
                 "query": urllib.parse.parse_qs(parsed.query, keep_blank_values=True),
                 "headers": [[k, v] for k, v in self.headers.items()], "chunked": chunked}
        # The body is read whole before anything is forwarded when it is small
        # (a create's JSON: logged at receipt); a large one (an image's tar) is
        # streamed, and logged once it has all gone by.
        small = not chunked and int(self.headers.get("Content-Length") or 0) <= JSON_LOG_MAX
        h = hashlib.sha256()
        counted = [0]
        head = bytearray()

        def tee(chunks):
            for data in chunks:
                h.update(data)
                counted[0] += len(data)
                if len(head) < JSON_LOG_MAX:
                    head.extend(data[:JSON_LOG_MAX - len(head)])
                yield data

        try:
            if small:
                body = b"".join(tee(self.body_chunks(False)))
                chunks = [body] if body else []
                self._finish_entry(entry, h, counted[0], head)
                log.write(entry)
            else:
                chunks = tee(self.body_chunks(chunked))
            altered = self._wait_kind()
            if altered in ("dropped-early", "gone"):
                # Nothing forwarded, nothing answered: the connection closes
                # (gone: once the socket is away).
                if altered == "gone":
                    self._move_away(log, seq)
                log.write({"event": "response", "seq": seq, "status": None, "wait_answer": altered})
                self.close_connection = True
                return
            upstream = _UpstreamConnection(self.server.upstream)
            try:
                upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in self.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        upstream.putheader(k, v)
                if has_body:
                    if chunked:
                        upstream.putheader("Transfer-Encoding", "chunked")
                    else:
                        upstream.putheader("Content-Length", self.headers.get("Content-Length"))
                upstream.endheaders()
                for data in chunks:
                    if chunked:
                        upstream.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    else:
                        upstream.send(data)
                if chunked:
                    upstream.send(b"0\r\n\r\n")
                if not small:
                    self._finish_entry(entry, h, counted[0], head)
                    log.write(entry)
                resp = upstream.getresponse()
            except (OSError, http.client.HTTPException) as e:
                if not small and "body_sha256" not in entry:
                    self._finish_entry(entry, h, counted[0], head)
                    log.write(entry)
                log.write({"event": "response", "seq": seq, "status": 502, "error": str(e)})
                upstream.close()
                payload = (json.dumps({"message": f"sp_fake_docker --forward: {e}"}) + "\n").encode()
                self.send_response(502)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.close_connection = True
                return
            if altered == "unreachable":
                # The start's answer is relayed below, once nothing can
                # connect any more: the wait that follows it cannot.
                self._move_away(log, seq)
            elif altered is not None:
                # The daemon's own answer (the probe has run its course), then
                # a malformed one in its place.
                try:
                    resp.read()
                finally:
                    upstream.close()
                self._send_wait_answer(log, seq, altered, resp.status)
                return
            answer = {"event": "response", "seq": seq, "status": resp.status}
            ctype = resp.getheader("Content-Type", "")
            kept = None
            if resp.length is not None and resp.length <= JSON_LOG_MAX and ctype.startswith("application/json"):
                # A small JSON answer of known length (a create's Id, an
                # inspect): read whole, logged with the status, then relayed.
                kept = resp.read()
                with contextlib.suppress(UnicodeDecodeError, ValueError):
                    answer["json"] = json.loads(kept.decode("utf-8"))
            log.write(answer)
            try:
                self.relay(resp, kept)
            except OSError:
                # The client went away first (serve's wait ran out): the
                # daemon's late answer goes nowhere.
                self.close_connection = True
            finally:
                upstream.close()
        except (ConnectionError, ValueError) as e:
            log.write({"event": "response", "seq": seq, "status": None, "error": str(e)})
            self.close_connection = True

    def forward_attach(self, log, seq):
        """An attach (Upgrade: tcp): the request as it came, on a connection
        of its own to the daemon, logged; its answer's head relayed; after a
        101 the two connections are spliced until the client closes its
        side (the container's stdin ends) and the daemon closes its own."""
        parsed = urllib.parse.urlsplit(self.path)
        log.write({"event": "request", "seq": seq, "method": self.command, "target": self.path,
                   "path": urllib.parse.unquote(parsed.path),
                   "query": urllib.parse.parse_qs(parsed.query, keep_blank_values=True),
                   "headers": [[k, v] for k, v in self.headers.items()], "chunked": False, "body_length": 0,
                   "body_sha256": hashlib.sha256(b"").hexdigest()})
        self.close_connection = True
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(self.server.upstream)
            head = f"{self.command} {self.path} HTTP/1.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in self.headers.items()) + "\r\n"
            up.sendall(head.encode("latin-1"))
            answer = b""
            while b"\r\n\r\n" not in answer:
                data = up.recv(4096)
                if not data:
                    break
                answer += data
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
            log.write({"event": "response", "seq": seq, "status": status})
            self.wfile.write(answer)
            self.wfile.flush()
            if status != 101:
                return

            def client_to_daemon():
                with contextlib.suppress(OSError):
                    while True:
                        data = self.rfile.read1(65536)
                        if not data:
                            break
                        up.sendall(data)
                with contextlib.suppress(OSError):
                    up.shutdown(socket.SHUT_WR)

            pump = threading.Thread(target=client_to_daemon, daemon=True)
            pump.start()
            with contextlib.suppress(OSError):
                while True:
                    data = up.recv(65536)
                    if not data:
                        break
                    self.wfile.write(data)
                    self.wfile.flush()
            pump.join()
        except (OSError, ValueError, IndexError) as e:
            log.write({"event": "response", "seq": seq, "status": 502, "error": str(e)})
        finally:
            up.close()

    def _wait_kind(self):
        """What --wait-answer does to this request: None but for a wait past
        the first --wait-answer-after ones (for unreachable, a start past
        the first N); ok: nothing either."""
        kind = self.server.wait_answer
        which = START_PATH if kind == "unreachable" else WAIT_PATH
        if kind is None or self.command != "POST" or not which.fullmatch(urllib.parse.urlsplit(self.path).path):
            return None
        with self.server.wait_lock:
            self.server.waits += 1
            n = self.server.waits
        return kind if n > self.server.wait_answer_after and kind != "ok" else None

    def _move_away(self, log, seq):
        """unreachable, gone: the socket renamed beside itself, so that a
        connect finds nothing; back after --wait-answer-away seconds."""
        server = self.server
        with server.wait_lock:
            if server.away is not None:
                return
            os.rename(server.socket_path, server.socket_path + ".away")
            server.away = threading.Timer(server.wait_answer_away, come_back, args=(server,))
            server.away.daemon = True
            log.write({"event": "away", "seq": seq})
            server.away.start()

    def _send_wait_answer(self, log, seq, kind, upstream_status):
        status, body, sent = wait_answer(kind, self.server.wait_answer_token)
        log.write({"event": "response", "seq": seq, "status": status, "wait_answer": kind,
                   "upstream_status": upstream_status})
        self.close_connection = True
        try:
            self.send_response_only(status)
            self.send_header("Api-Version", API)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            view = memoryview(body)[:len(body) if sent is None else sent]
            for i in range(0, len(view), 1 << 16):
                self.wfile.write(view[i:i + (1 << 16)])
            self.wfile.flush()
        except OSError:
            pass  # the client stopped reading (huge: at its cap)

    @staticmethod
    def _finish_entry(entry, h, length, head):
        entry["body_length"] = length
        entry["body_sha256"] = h.hexdigest()
        if head and length <= JSON_LOG_MAX:
            try:
                entry["json"] = json.loads(bytes(head).decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                pass

    def relay(self, resp, kept=None):
        """The upstream answer to the client, as it comes (or kept: its body,
        read already)."""
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        bodiless = resp.status in (204, 304) or 100 <= resp.status < 200 or self.command == "HEAD"
        framed = kept is not None or resp.length is not None
        length = len(kept) if kept is not None else resp.length
        if not bodiless:
            if framed:
                self.send_header("Content-Length", str(length))
            else:
                self.send_header("Transfer-Encoding", "chunked")
        if resp.will_close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        if bodiless:
            return
        if kept is not None:
            self.wfile.write(kept)
            self.wfile.flush()
            return
        while True:
            data = resp.read1(1 << 16)
            if not data:
                break
            self.wfile.write(data if framed else f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        if not framed:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = handle_any


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False


def serve(socket_path, mode, log_path, ready_file=None, field="PidsLimit"):
    """Runs until SIGTERM or SIGINT; returns the exit status."""
    if mode not in MODES:
        print(f"sp_fake_docker: unknown mode {mode!r} (one of {', '.join(MODES)})", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if log_path:
        open(log_path, "a").close()
    server = None
    if mode != "down":
        engine = Engine(mode, field, log_path)
        old = os.umask(0o077)
        try:
            server = Server(socket_path, Handler)
        finally:
            os.umask(old)
        server.engine = engine
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    elif os.path.lexists(socket_path):
        print(f"sp_fake_docker: mode down, but {socket_path} exists", file=sys.stderr)
        return 2
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            f.write("READY\n")
        os.rename(ready_file + ".tmp", ready_file)
    print("READY", flush=True)
    while not stop.wait(0.2):
        pass
    if server is not None:
        server.shutdown()
        server.server_close()
        try:
            os.unlink(socket_path)
        except FileNotFoundError:
            pass
    return 0


class FakeDocker:
    """The fake as a child process of a test: start() waits for READY,
    stop() sends SIGTERM and waits; requests() reads the log, stderr() what
    the fake printed (LOG.stderr)."""

    def __init__(self, socket_path, mode, log_path, field=None):
        self.socket = socket_path
        self.mode = mode
        self.log = log_path
        self.field = field
        self.stderr_path = log_path + ".stderr"
        self.proc = None

    def argv(self):
        argv = [sys.executable, os.path.abspath(__file__), "--socket", self.socket, "--mode", self.mode,
                "--log", self.log]
        if self.field:
            argv += ["--field", self.field]
        return argv

    def start(self, timeout=20):
        argv = self.argv()
        # stderr to a file: a pipe nobody reads could fill with a handler's
        # traceback and stop the fake.
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
        line = []
        t = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        if not line or line[0].strip() != "READY":
            self.stop()
            raise RuntimeError(f"sp_fake_docker ({self.mode}) did not become ready: {self.stderr()}")
        return self

    def stop(self, timeout=10):
        """SIGTERM, then the exit status (SIGKILL after timeout)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode

    def stderr(self):
        """What the fake wrote to stderr (a handler's traceback, say)."""
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def come_back(server):
    """The socket moved away (ForwardHandler._move_away) back in place."""
    with server.wait_lock:
        if server.away is None:
            return
        server.away.cancel()
        server.away = None
        os.rename(server.socket_path + ".away", server.socket_path)
        server.forward_log.write({"event": "back"})


def forward(socket_path, upstream, log_path, ready_file=None, wait_answer_kind=None, wait_answer_after=0,
            wait_answer_token=WAIT_TOKEN, wait_answer_away=WAIT_AWAY_SECONDS):
    """--forward: the logging proxy in front of upstream, until SIGTERM or
    SIGINT; returns the exit status.  wait_answer_kind: --wait-answer."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    old = os.umask(0o077)
    try:
        server = Server(socket_path, ForwardHandler)
    finally:
        os.umask(old)
    server.upstream = upstream
    server.forward_log = ForwardLog(log_path)
    server.wait_answer = wait_answer_kind
    server.wait_answer_after = wait_answer_after
    server.wait_answer_token = wait_answer_token
    server.wait_answer_away = wait_answer_away
    server.wait_lock = threading.Lock()
    server.waits = 0
    server.socket_path = socket_path
    server.away = None
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            f.write("READY\n")
        os.rename(ready_file + ".tmp", ready_file)
    print("READY", flush=True)
    while not stop.wait(0.2):
        pass
    come_back(server)
    server.shutdown()
    server.server_close()
    try:
        os.unlink(socket_path)
    except FileNotFoundError:
        pass
    return 0


class ForwardingProxy(FakeDocker):
    """The --forward proxy as a child process of a test: start() waits for
    READY, stop() sends SIGTERM; requests() is one entry per request, in the
    order received (seq), its answer's status merged in (None while none
    came back), and response_json when the answer's JSON was logged."""

    def __init__(self, socket_path, upstream, log_path, wait_answer=None, wait_answer_after=0, wait_answer_token=None,
                 wait_answer_away=None):
        super().__init__(socket_path, "forward", log_path)
        self.upstream = upstream
        self.wait_answer = wait_answer
        self.wait_answer_after = wait_answer_after
        self.wait_answer_token = wait_answer_token
        self.wait_answer_away = wait_answer_away

    def argv(self):
        argv = [sys.executable, os.path.abspath(__file__), "--socket", self.socket, "--forward", self.upstream,
                "--log", self.log]
        if self.wait_answer is not None:
            argv += ["--wait-answer", self.wait_answer, "--wait-answer-after", str(self.wait_answer_after)]
            if self.wait_answer_token is not None:
                argv += ["--wait-answer-token", self.wait_answer_token]
            if self.wait_answer_away is not None:
                argv += ["--wait-answer-away", str(self.wait_answer_away)]
        return argv

    def events(self):
        """The log's lines other than requests and responses: the socket
        moved away and back (--wait-answer unreachable, gone)."""
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return [e for e in (json.loads(line) for line in f if line.strip())
                    if e.get("event") not in ("request", "response")]

    def requests(self):
        if not os.path.exists(self.log):
            return []
        out, by_seq = [], {}
        with open(self.log, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                e = json.loads(line)
                if e.get("event") == "request":
                    e = {k: v for k, v in e.items() if k != "event"}
                    e.setdefault("status", None)
                    by_seq[e["seq"]] = e
                    out.append(e)
                elif e.get("event") == "response" and e.get("seq") in by_seq:
                    by_seq[e["seq"]]["status"] = e.get("status")
                    if "json" in e:
                        by_seq[e["seq"]]["response_json"] = e["json"]
                    if "error" in e:
                        by_seq[e["seq"]]["error"] = e["error"]
                    if "wait_answer" in e:
                        by_seq[e["seq"]]["wait_answer"] = e["wait_answer"]
                        by_seq[e["seq"]]["upstream_status"] = e.get("upstream_status")
        return sorted(out, key=lambda e: e["seq"])


def main(argv=None):
    p = argparse.ArgumentParser(description="A fake Docker Engine API (1.41) on a Unix socket, for refusal tests; "
                                "or, with --forward, a logging proxy in front of a real daemon's socket.")
    p.add_argument("--socket", required=True)
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--forward", metavar="UPSTREAM", help="forward every request to this daemon socket, logging it")
    p.add_argument("--log", required=True, help="JSON lines, one per request")
    p.add_argument("--ready-file")
    p.add_argument("--field", default="PidsLimit", help="drops-field: the HostConfig field inspect changes")
    p.add_argument("--wait-answer", choices=WAIT_ANSWERS, metavar="KIND",
                   help="--forward: answer each wait with a malformed answer of KIND (" + ", ".join(WAIT_ANSWERS)
                   + ")")
    p.add_argument("--wait-answer-after", type=int, default=0, metavar="N",
                   help="--wait-answer: the first N waits pass through untouched")
    p.add_argument("--wait-answer-token", default=WAIT_TOKEN, metavar="TOKEN",
                   help="--wait-answer: the text every malformed answer holds")
    p.add_argument("--wait-answer-away", type=float, default=WAIT_AWAY_SECONDS, metavar="SECONDS",
                   help="--wait-answer unreachable, gone: how long the socket stays away")
    a = p.parse_args(argv)
    if (a.mode is None) == (a.forward is None):
        p.error("give exactly one of --mode and --forward")
    if a.forward is None and a.wait_answer is not None:
        p.error("--wait-answer is for --forward only")
    if a.wait_answer_after < 0 or a.wait_answer_away <= 0 or not re.fullmatch(r"[A-Za-z0-9_.-]+",
                                                                               a.wait_answer_token):
        p.error("--wait-answer-after must be >= 0, --wait-answer-away > 0, --wait-answer-token letters, digits, "
                "'_', '.', '-'")
    if a.forward is not None:
        return forward(a.socket, a.forward, a.log, a.ready_file, a.wait_answer, a.wait_answer_after,
                       a.wait_answer_token, a.wait_answer_away)
    return serve(a.socket, a.mode, a.log, a.ready_file, a.field)


if __name__ == "__main__":
    sys.exit(main())
