"""The fake Docker Engine API (sp_fake_docker.py) against its own promises,
talked to with http.client over AF_UNIX (and with curl, when installed, for
libcurl's own chunked uploads and `Expect: 100-continue`): every mode's
answers, keep-alive, Content-Length and chunked bodies, the request log,
SIGTERM; and its --forward mode, the logging proxy test_runtime_commands.py
puts in front of a real daemon, here in front of the fake, with each of
--wait-answer's kinds (test_docker_wait_answers.py): the first wait relayed,
the next one's malformed answer as promised, the socket moved away and back.
Needs neither root nor a build: it tests the tool that test_docker_verify.py
and test_docker_wait_answers.py use, so that a failure there is the proxy's."""

import contextlib
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap  # noqa: E402
from sp_fake_docker import DIGEST_LABEL, WAIT_ANSWERS, FakeDocker, ForwardingProxy  # noqa: E402

tap = Tap()
top = tempfile.mkdtemp(prefix="sp-dfake-self-")
counter = [0]

HOST_CONFIG = {
    "NetworkMode": "none", "ReadonlyRootfs": True, "CapDrop": ["ALL"],
    "SecurityOpt": ["no-new-privileges:true", "seccomp={\"defaultAction\":\"SCMP_ACT_ERRNO\"}"],
    "Memory": 268435456, "MemorySwap": 268435456, "PidsLimit": 64, "NanoCpus": 1000000000,
    "Ulimits": [{"Name": "nofile", "Soft": 256, "Hard": 256}], "Tmpfs": {"/tmp": "rw,noexec,size=16m"},
    "MaskedPaths": ["/proc/kcore", "/proc/keys"], "ReadonlyPaths": ["/proc/sys"], "Runtime": "runc",
    "OomScoreAdj": 1000, "IpcMode": "private", "CgroupnsMode": "private", "CgroupParent": "sealed-probe",
    "Mounts": [{"Type": "bind", "Source": "/nonexistent/repo", "Target": "/probe/repo", "ReadOnly": False}],
}
DIGEST = "ab" * 32
TAG = DIGEST[:12]


class Conn(http.client.HTTPConnection):
    """http.client over a Unix socket."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def call(conn, method, target, body=None, headers=None, chunked=False):
    """(status, headers, body, parsed JSON or None) of one request on conn."""
    headers = dict(headers or {})
    if chunked and body is not None:
        data = body

        def pieces():
            for i in range(0, len(data), 4096):
                yield data[i:i + 4096]
        conn.request(method, target, body=pieces(), headers=headers, encode_chunked=True)
    else:
        conn.request(method, target, body=body, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return r.status, dict(r.getheaders()), raw, parsed


def fresh(mode, field=None):
    counter[0] += 1
    d = os.path.join(top, f"{counter[0]}-{mode}")
    os.mkdir(d)
    return FakeDocker(os.path.join(d, "docker.sock"), mode, os.path.join(d, "log.jsonl"), field=field)


def tar_bytes(size=0):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        data = os.urandom(size) if size else b"hello\n"
        info = tarfile.TarInfo("etc/hello")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def import_target(tag, digest):
    change = f"LABEL {DIGEST_LABEL}=sha256:{digest}"
    return (f"/v1.41/images/create?fromSrc=-&repo=sealed-probe/rootfs&tag={tag}&changes="
            + urllib.parse.quote(change, safe=""))


def create_body(labels=None):
    return json.dumps({"Image": f"sealed-probe/rootfs:{TAG}", "Cmd": ["/usr/bin/python3", "/probe/probe.py"],
                       "Entrypoint": [], "WorkingDir": "/probe", "Env": ["PATH=/usr/bin:/bin"], "User": "65534:65534",
                       "Hostname": "probe", "Domainname": "", "NetworkDisabled": True,
                       "Labels": labels or {"org.sealed-probe.state": "k1"}, "HostConfig": HOST_CONFIG}).encode()


JSON = {"Content-Type": "application/json"}
TAR = {"Content-Type": "application/x-tar"}
WAIT_CANARY = "SP-SELFTEST-WAIT-" + os.urandom(4).hex()
WAIT_PROMISE = {
    "ok": "relayed too",
    "deep": "a JSON array 100,000 deep holding the token",
    "bad-utf8": "a JSON object holding the token and invalid UTF-8",
    "not-json": "text holding the token, no JSON",
    "huge": "a valid JSON object over 4 MiB holding the token",
    "status-500": "a 500 whose message holds the token",
    "dropped": "cut short of its Content-Length, the token in what came",
    "dropped-early": "never forwarded, the connection closed with no answer",
    "dup-key": "a JSON object whose key (the token) is there twice",
    "bad-after-key": "a JSON object with a bad value after the token's key",
    "unreachable": "the second start relayed, then nothing can connect (the socket away)",
    "gone": "the second wait never answered, its connection closed, and nothing can connect",
}


def raw_wait(path):
    """A wait sent by hand on a connection of its own: (status, headers,
    body, whole) read up to its Content-Length or until the proxy closes;
    (None, {}, b"", False) when it answered nothing."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    s.sendall(b"POST /v1.41/containers/sp-wait/wait HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n")
    data, headers, length, status = b"", {}, None, None
    while length is None or len(data) < length:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
        if status is None and b"\r\n\r\n" in data:
            head, _, data = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers.get("content-length", "-1"))
    s.close()
    return status, headers, data, length is not None and length == len(data)


def wait_answer_problems(kind, first, second):
    """What is wrong with the two waits' answers through --wait-answer kind
    (--wait-answer-after 1); [] when nothing is."""
    problems = []
    st, _, body, whole = first
    if st != 200 or not whole or json.loads(body).get("StatusCode") != 0:
        problems.append(f"the first wait was not relayed: {first}")
    st, headers, body, whole = second
    token = WAIT_CANARY.encode()

    def parses():
        try:
            json.loads(body.decode("utf-8"))
            return True
        except (UnicodeDecodeError, ValueError):
            return False
    if kind == "ok":
        ok = st == 200 and whole and json.loads(body).get("StatusCode") == 0
    elif kind == "dropped-early":
        ok = st is None
    elif kind == "dropped":
        ok = st == 200 and not whole and token in body and 0 < len(body) < int(headers["content-length"])
    else:
        ok = whole and token in body and st == (500 if kind == "status-500" else 200)
        if kind == "deep":
            ok = ok and body == b"[" * 100_000 + b'"' + token + b'"' + b"]" * 100_000
        elif kind == "bad-utf8":
            ok = ok and b"\xff" in body and not parses()
        elif kind in ("not-json", "dup-key", "bad-after-key"):
            ok = ok and (not parses() if kind != "dup-key" else body.count(token) == 2)
        elif kind == "huge":
            ok = ok and len(body) > 4 << 20 and parses()
        elif kind == "status-500":
            ok = ok and parses() and token.decode() in json.loads(body)["message"]
    if not ok:
        problems.append(f"the second wait's answer: {st} {headers} {body[:120]!r}... ({len(body)} bytes, "
                        f"whole {whole})")
    return problems


try:
    # ---- capable ------------------------------------------------------------
    fake = fresh("capable").start()
    try:
        st = os.stat(fake.socket)
        tap.ok(st.st_mode & 0o170000 == 0o140000, "capable: the socket exists once READY is printed")
        c = Conn(fake.socket)
        s, h, raw, _ = call(c, "GET", "/_ping")
        tap.ok(s == 200 and raw == b"OK" and h.get("Api-Version") == "1.41",
               "capable: /_ping is 200 OK, Api-Version 1.41", (s, h, raw))
        s, _, _, v = call(c, "GET", "/version")
        tap.ok(s == 200 and v and v["ApiVersion"] == "1.41", "capable: /version says ApiVersion 1.41 (same connection)",
               v)
        s, _, _, info = call(c, "GET", "/v1.41/info")
        tap.ok(s == 200 and "runc" in info["Runtimes"]
               and any(o.startswith("name=seccomp") for o in info["SecurityOptions"]),
               "capable: /v1.41/info lists runc and name=seccomp", info)
        s, _, _, _ = call(c, "GET", "/info")
        tap.ok(s == 404, "capable: an unversioned /info is 404 (only /_ping and /version are unversioned)", s)

        image = f"/v1.41/images/sealed-probe/rootfs:{TAG}/json"
        s, _, _, body = call(c, "GET", image)
        tap.ok(s == 404 and "No such image" in body["message"], "capable: the rootfs image is missing at first", body)
        tar = tar_bytes()
        s, _, raw, _ = call(c, "POST", import_target(TAG, DIGEST), body=tar, headers=TAR)
        tap.ok(s == 200 and b'"status": "sha256:' in raw, "capable: an import by Content-Length is accepted", (s, raw))
        s, _, _, body = call(c, "GET", image)
        tap.ok(s == 200 and body["Config"]["Labels"] == {DIGEST_LABEL: "sha256:" + DIGEST},
               "capable: the imported image carries the digest label", body)
        other = "cd" * 32
        s, _, _, _ = call(c, "POST", import_target(other[:12], other), body=tar_bytes(200_000), headers=TAR,
                          chunked=True)
        s2, _, _, body = call(c, "GET", f"/v1.41/images/sealed-probe/rootfs:{other[:12]}/json")
        tap.ok(s == 200 and s2 == 200 and body["Config"]["Labels"][DIGEST_LABEL] == "sha256:" + other,
               "capable: a chunked import is accepted", (s, s2, body))
        s, _, _, body = call(c, "POST", "/v1.41/images/create?fromSrc=-&repo=x&tag=y", body=b"not a tar" * 100,
                             headers=TAR)
        tap.ok(s == 500, "capable: an import of something not a tar fails", (s, body))
        s, _, _, body = call(c, "POST", "/v1.41/images/create?fromImage=debian&tag=12")
        tap.ok(s == 500 and "fromImage" in body["message"], "capable: a registry pull (fromImage) fails", body)

        s, _, _, body = call(c, "POST", "/v1.41/containers/create?name=sp-aaaaaaaaaaaa-1", body=create_body(),
                             headers=JSON)
        cid = body.get("Id", "") if body else ""
        tap.ok(s == 201 and len(cid) == 64, "capable: create is 201 with an Id", (s, body))
        s, _, _, body = call(c, "POST", "/v1.41/containers/create?name=sp-aaaaaaaaaaaa-1", body=create_body(),
                             headers=JSON)
        tap.ok(s == 409, "capable: a second create of the same name is 409", (s, body))
        s, _, _, body = call(c, "POST", "/v1.41/containers/create?name=sp-aaaaaaaaaaaa-2",
                             body=json.dumps({"Image": "nope:1", "HostConfig": {}}).encode(), headers=JSON)
        tap.ok(s == 404, "capable: a create of an unknown image is 404", (s, body))
        s, _, _, body = call(c, "GET", f"/v1.41/containers/{cid}/json")
        tap.ok(s == 200 and body["HostConfig"] == HOST_CONFIG and body["Name"] == "/sp-aaaaaaaaaaaa-1"
               and body["State"]["Status"] == "created",
               "capable: inspect echoes the create body's HostConfig exactly", body)
        s, _, _, body = call(c, "POST", f"/v1.41/containers/{cid}/start")
        tap.ok(s == 204, "capable: start is 204", (s, body))
        s, _, _, body = call(c, "POST", f"/v1.41/containers/{cid}/wait")
        tap.ok(s == 200 and body == {"StatusCode": 0, "Error": None},
               "capable: wait is 200 StatusCode 0 (it ran nothing)", body)
        s, _, _, body = call(c, "POST", f"/v1.41/containers/{cid}/kill?signal=KILL")
        tap.ok(s == 409, "capable: kill of the exited container is 409, as Docker's", (s, body))
        s, _, _, body = call(c, "GET", f"/v1.41/containers/{cid}/json")
        tap.ok(s == 200 and body["State"]["ExitCode"] == 0 and body["State"]["OOMKilled"] is False
               and body["State"]["Status"] == "exited", "capable: inspect after wait: ExitCode 0, OOMKilled false",
               body)

        # Orphans: the label filter, as the proxy sends it.
        s, _, _, body = call(c, "POST", "/v1.41/containers/create?name=sp-bbbbbbbbbbbb-1",
                             body=create_body({"org.sealed-probe.state": "k2"}), headers=JSON)
        cid2 = body["Id"]
        filt = urllib.parse.quote(json.dumps({"label": ["org.sealed-probe.state=k1"]}), safe="")
        s, _, _, body = call(c, "GET", f"/v1.41/containers/json?all=1&filters={filt}")
        tap.ok(s == 200 and [x["Id"] for x in body] == [cid] and body[0]["Names"] == ["/sp-aaaaaaaaaaaa-1"]
               and body[0]["Labels"] == {"org.sealed-probe.state": "k1"},
               "capable: containers/json filters by label and gives Id, Names, Labels", body)
        s, _, _, _ = call(c, "DELETE", f"/v1.41/containers/{cid}?force=1&v=1")
        s2, _, _, _ = call(c, "DELETE", f"/v1.41/containers/{cid}?force=1&v=1")
        s3, _, _, _ = call(c, "GET", f"/v1.41/containers/{cid}/json")
        tap.ok((s, s2, s3) == (204, 404, 404), "capable: delete is 204, then the container is gone (404)",
               (s, s2, s3))
        s, _, _, _ = call(c, "DELETE", "/v1.41/containers/sp-bbbbbbbbbbbb-1?force=1&v=1")
        tap.ok(s == 204, "capable: a container is also found by its name", s)
        s, _, _, body = call(c, "GET", "/v1.41/containers/json?all=1")
        tap.ok(s == 200 and body == [], "capable: nothing is left", body)
        c.close()

        # libcurl's uploads: chunked and with Expect: 100-continue.
        curl = shutil.which("curl")
        if curl:
            path = os.path.join(top, "big.tar")
            with open(path, "wb") as f:
                f.write(tar_bytes(3 << 20))
            third = "ef" * 32
            r = subprocess.run([curl, "-sS", "--unix-socket", fake.socket, "-X", "POST",
                                "-H", "Content-Type: application/x-tar", "-H", "Transfer-Encoding: chunked",
                                "-H", "Expect: 100-continue", "--data-binary", f"@{path}",
                                "http://localhost" + import_target(third[:12], third)],
                               capture_output=True, text=True, timeout=60)
            c = Conn(fake.socket)
            s, _, _, body = call(c, "GET", f"/v1.41/images/sealed-probe/rootfs:{third[:12]}/json")
            c.close()
            tap.ok(r.returncode == 0 and s == 200 and body["Config"]["Labels"][DIGEST_LABEL] == "sha256:" + third,
                   "capable: curl's chunked upload with Expect: 100-continue is imported", (r.returncode, r.stderr, s))
        else:
            tap.n += 1
            print(f"ok {tap.n} - capable: curl's chunked upload # SKIP curl is not installed", flush=True)

        # A raw HTTP/1.1 exchange: two requests in one write, keep-alive.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(fake.socket)
        s.sendall(b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\nGET /_ping HTTP/1.1\r\nHost: docker\r\n"
                  b"Connection: close\r\n\r\n")
        got = b""
        while True:
            data = s.recv(65536)
            if not data:
                break
            got += data
        s.close()
        tap.ok(got.count(b"HTTP/1.1 200 OK") == 2 and got.endswith(b"OK"),
               "capable: pipelined keep-alive requests are each answered", got[:400])
    finally:
        rc = fake.stop()
    tap.ok(rc == 0 and not os.path.lexists(fake.socket), "capable: SIGTERM stops it (exit 0) and removes the socket",
           rc)
    tap.ok(fake.stderr() == "", "capable: the fake printed nothing to stderr (no handler failed)", fake.stderr())
    log = fake.requests()
    seqs = [e["seq"] for e in log]
    tap.ok(seqs == list(range(1, len(seqs) + 1)) and len(log) >= 25, "capable: every request is logged, in order",
           len(log))
    first = log[0]
    tap.ok(first["method"] == "GET" and first["path"] == "/_ping" and first["status"] == 200
           and first["body_length"] == 0 and isinstance(first["headers"], list),
           "capable: a log line has method, path, headers, body length, status", first)
    imports = [e for e in log if e["path"] == "/v1.41/images/create"]
    tap.ok(len(imports) >= 3 and imports[0]["query"]["changes"] == [f"LABEL {DIGEST_LABEL}=sha256:{DIGEST}"]
           and imports[0]["body_length"] == len(tar) and not imports[0]["chunked"] and imports[1]["chunked"]
           and imports[1]["body_length"] > 200_000,
           "capable: imports are logged with their query, body length and chunked-ness", imports[:2])
    if curl:
        by_curl = [e for e in imports if e["query"].get("tag") == ["efefefefefef"]]
        tap.ok(len(by_curl) == 1 and by_curl[0]["chunked"] and by_curl[0]["status"] == 200
               and by_curl[0]["body_length"] > 3 << 20
               and ["Expect", "100-continue"] in by_curl[0]["headers"],
               "capable: curl's upload is logged as chunked, with its Expect header", by_curl)
    pulls = [e for e in log if "fromImage" in e["target"]]
    tap.ok(len(pulls) == 1 and pulls[0]["status"] == 500, "capable: the pull is in the log, for a test to find",
           pulls)
    creates = [e for e in log if e["path"] == "/v1.41/containers/create" and e["status"] == 201]
    tap.ok(len(creates) == 2 and creates[0]["container"] == cid and creates[0]["json"]["HostConfig"] == HOST_CONFIG,
           "capable: a create is logged with its JSON body and the Id given", creates[:1])

    # ---- old-api ------------------------------------------------------------
    with fresh("old-api") as fake:
        c = Conn(fake.socket)
        s1, h, raw, _ = call(c, "GET", "/_ping")
        s2, _, _, v = call(c, "GET", "/version")
        s3, _, _, body = call(c, "GET", "/v1.41/info")
        c.close()
    tap.ok(s1 == 200 and raw == b"OK" and h.get("Api-Version") == "1.40", "old-api: /_ping is OK, Api-Version 1.40",
           h)
    tap.ok(s2 == 200 and v["ApiVersion"] == "1.40", "old-api: /version says ApiVersion 1.40", v)
    tap.ok(s3 == 400 and "1.41 is too new" in body["message"], "old-api: /v1.41 paths are Docker's 400", body)

    # ---- no-runc, no-seccomp -------------------------------------------------
    with fresh("no-runc") as fake:
        c = Conn(fake.socket)
        s, _, _, info = call(c, "GET", "/v1.41/info")
        _, _, _, v = call(c, "GET", "/version")
        c.close()
    tap.ok(s == 200 and "runc" not in info["Runtimes"] and info["Runtimes"] and v["ApiVersion"] == "1.41"
           and any(o.startswith("name=seccomp") for o in info["SecurityOptions"]),
           "no-runc: Runtimes has no runc key (and all else is capable)", info)
    with fresh("no-seccomp") as fake:
        c = Conn(fake.socket)
        s, _, _, info = call(c, "GET", "/v1.41/info")
        c.close()
    tap.ok(s == 200 and "runc" in info["Runtimes"]
           and not any(o.startswith("name=seccomp") for o in info["SecurityOptions"]),
           "no-seccomp: SecurityOptions has no name=seccomp entry (runc is there)", info)

    # ---- bad-image-label ------------------------------------------------------
    with fresh("bad-image-label") as fake:
        c = Conn(fake.socket)
        s, _, _, body = call(c, "GET", f"/v1.41/images/sealed-probe/rootfs:{TAG}/json")
        c.close()
    label = (body or {}).get("Config", {}).get("Labels", {}).get(DIGEST_LABEL, "")
    tap.ok(s == 200 and label.startswith("sha256:" + TAG) and len(label) == 71 and label != "sha256:" + DIGEST,
           "bad-image-label: the image exists, its label the right prefix and the wrong digest", body)

    # ---- drops-field -----------------------------------------------------------
    for field, changed in (("PidsLimit", 0), ("MaskedPaths", []), ("ReadonlyRootfs", False)):
        with fresh("drops-field", field=None if field == "PidsLimit" else field) as fake:
            c = Conn(fake.socket)
            call(c, "POST", import_target(TAG, DIGEST), body=tar_bytes(), headers=TAR)
            _, _, _, body = call(c, "POST", "/v1.41/containers/create?name=sp-cccccccccccc-1", body=create_body(),
                                 headers=JSON)
            s, _, _, ins = call(c, "GET", f"/v1.41/containers/{body['Id']}/json")
            c.close()
        diff = {k for k in set(HOST_CONFIG) | set(ins["HostConfig"])
                if HOST_CONFIG.get(k) != ins["HostConfig"].get(k)}
        tap.ok(s == 200 and diff == {field} and ins["HostConfig"][field] == changed,
               f"drops-field ({field}): inspect changes exactly {field}, to {changed!r}", (diff, ins["HostConfig"]))

    # ---- down -----------------------------------------------------------------
    fake = fresh("down").start()
    try:
        gone = not os.path.lexists(fake.socket) and os.path.isdir(os.path.dirname(fake.socket))
        try:
            c = Conn(fake.socket)
            call(c, "GET", "/_ping")
            refused = None
        except OSError as e:
            refused = e
    finally:
        rc = fake.stop()
    tap.ok(gone and isinstance(refused, FileNotFoundError) and rc == 0 and fake.requests() == [],
           "down: READY, no socket (connect: ENOENT), an empty log, SIGTERM exits 0", (gone, refused, rc))

    # ---- --forward: the logging proxy, in front of a capable fake ---------------
    up = fresh("capable").start()
    d = os.path.join(top, "forward")
    os.mkdir(d)
    fwd = ForwardingProxy(os.path.join(d, "fwd.sock"), up.socket, os.path.join(d, "fwd.jsonl")).start()
    try:
        c = Conn(fwd.socket)
        st, hdrs, raw, _ = call(c, "GET", "/_ping")
        tap.ok(st == 200 and raw == b"OK" and hdrs.get("Api-Version") == "1.41",
               "forward: /_ping relayed, body and headers", (st, raw, hdrs))
        big = tar_bytes(3 << 20)  # past the size a body is read whole at
        st, _, raw, _ = call(c, "POST", import_target(TAG, DIGEST), body=big,
                             headers={"Content-Type": "application/x-tar"}, chunked=True)
        body = create_body()
        st2, _, _, created = call(c, "POST", "/v1.41/containers/create?name=sp-fwd-0", body=body,
                                  headers={"Content-Type": "application/json"})
        st3, _, _, inspected = call(c, "GET", "/v1.41/containers/sp-fwd-0/json")
        c.close()
        got, sent = fwd.requests(), up.requests()
        want_sha = hashlib.sha256(big).hexdigest()
        tap.ok(st == 200 and [(g["method"], g["target"]) for g in got[1:]] == [(u["method"], u["target"])
                                                                             for u in sent[1:]]
               and got[1]["chunked"] and sent[1]["chunked"] and got[1]["body_sha256"] == want_sha
               and sent[1]["body_sha256"] == want_sha and sent[1]["body_length"] == len(big) == got[1]["body_length"]
               and got[1]["status"] == 200,
               "forward: a 3 MiB chunked import streamed on chunked, byte for byte, logged with its sha256",
               (st, raw[:200], got[1:2], sent[1:2]))
        tap.ok(st2 == 201 and st3 == 200 and got[2].get("json") == json.loads(body) and not got[2]["chunked"]
               and (got[2].get("response_json") or {}).get("Id") == created.get("Id") == sent[2].get("container")
               and inspected and inspected["HostConfig"] == HOST_CONFIG,
               "forward: a Content-Length create logged with its JSON and the answer's Id; keep-alive; inspect",
               (st2, st3, got[2:4]))
        # Expect: 100-continue, by hand: the 100 first, then the body, then the answer.
        raw_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw_sock.settimeout(10)
        raw_sock.connect(fwd.socket)
        raw_sock.sendall(b"POST /v1.41/containers/sp-fwd-0/kill?signal=KILL HTTP/1.1\r\nHost: docker\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        first = raw_sock.recv(4096)
        raw_sock.sendall(b"{}")
        rest = b""
        while b"\r\n\r\n" not in rest:
            chunk = raw_sock.recv(4096)
            if not chunk:
                break
            rest += chunk
        raw_sock.close()
        tap.ok(first.startswith(b"HTTP/1.1 100") and rest.startswith(b"HTTP/1.1 409"),
               "forward: Expect: 100-continue answered 100, then the daemon's answer (409: not running)",
               (first, rest[:200]))
    finally:
        fwd_rc = fwd.stop()
        up.stop()
    tap.ok(fwd_rc == 0 and fwd.stderr() == "" and not os.path.lexists(fwd.socket),
           "forward: SIGTERM exits 0, nothing on stderr, the socket removed", (fwd_rc, fwd.stderr()))
    fwd = ForwardingProxy(os.path.join(d, "fwd2.sock"), os.path.join(d, "nobody.sock"),
                          os.path.join(d, "fwd2.jsonl")).start()
    try:
        c = Conn(fwd.socket)
        st, _, raw, parsed = call(c, "GET", "/_ping")
        c.close()
        got = fwd.requests()
    finally:
        fwd.stop()
    tap.ok(st == 502 and len(got) == 1 and got[0]["status"] == 502 and got[0].get("error"),
           "forward: an upstream that is not there is 502, logged with the error", (st, raw, got))

    # ---- --forward --wait-answer: malformed answers to waits -------------------
    up = fresh("capable").start()
    try:
        c = Conn(up.socket)
        call(c, "POST", import_target(TAG, DIGEST), body=tar_bytes(), headers=TAR)
        call(c, "POST", "/v1.41/containers/create?name=sp-wait", body=create_body(), headers=JSON)
        call(c, "POST", "/v1.41/containers/sp-wait/start")
        c.close()
        for kind in [k for k in WAIT_ANSWERS if k not in ("unreachable", "gone")]:
            fwd = ForwardingProxy(os.path.join(d, f"w-{kind}.sock"), up.socket, os.path.join(d, f"w-{kind}.jsonl"),
                                  wait_answer=kind, wait_answer_after=1, wait_answer_token=WAIT_CANARY).start()
            waits_before = len([e for e in up.requests() if e["path"].endswith("/wait")])
            try:
                first = raw_wait(fwd.socket)
                second = raw_wait(fwd.socket)
                c = Conn(fwd.socket)
                st_ping, _, raw_ping, _ = call(c, "GET", "/_ping")
                c.close()
                got = fwd.requests()
            finally:
                rc = fwd.stop()
            waits = len([e for e in up.requests() if e["path"].endswith("/wait")]) - waits_before
            problems = wait_answer_problems(kind, first, second)
            if st_ping != 200 or raw_ping != b"OK":
                problems.append(f"/_ping after the waits: {st_ping} {raw_ping!r}")
            if waits != (1 if kind == "dropped-early" else 2):
                problems.append(f"the daemon saw {waits} waits")
            logged = [(e["path"].rsplit("/", 1)[-1], e.get("status"), e.get("wait_answer"), e.get("upstream_status"))
                      for e in got]
            altered = None if kind == "ok" else kind
            want_status = {"ok": 200, "status-500": 500, "dropped-early": None}.get(kind, 200)
            want_upstream = None if kind in ("ok", "dropped-early") else 200
            if logged != [("wait", 200, None, None), ("wait", want_status, altered, want_upstream), ("_ping", 200, None,
                                                                                                      None)]:
                problems.append(f"the log: {logged}")
            tap.ok(rc == 0 and fwd.stderr() == "" and not problems,
                   f"forward --wait-answer {kind}: the first wait relayed, the next {WAIT_PROMISE[kind]}; "
                   "other requests untouched; logged", (problems, rc, fwd.stderr()[-600:]))
        for kind in ("unreachable", "gone"):
            sock = os.path.join(d, f"w-{kind}.sock")
            fwd = ForwardingProxy(sock, up.socket, os.path.join(d, f"w-{kind}.jsonl"), wait_answer=kind,
                                  wait_answer_after=1, wait_answer_token=WAIT_CANARY, wait_answer_away=1.5).start()
            problems = []
            try:
                if kind == "unreachable":
                    c = Conn(fwd.socket)
                    first = call(c, "POST", "/v1.41/containers/sp-wait/start")[0]
                    c.close()
                    waited = raw_wait(fwd.socket)
                    c = Conn(fwd.socket)
                    second = call(c, "POST", "/v1.41/containers/sp-wait/start")[0]
                    c.close()
                    if first != 304 or second != 304 or waited[0] != 200:
                        problems.append(f"starts {first} {second}, the wait between {waited[0]}")
                else:
                    first, second = raw_wait(fwd.socket), raw_wait(fwd.socket)
                    if first[0] != 200 or second[0] is not None:
                        problems.append(f"waits {first[0]} {second[0]}")
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s_try:
                    try:
                        s_try.connect(fwd.socket)
                        problems.append("a connect right after succeeded")
                    except FileNotFoundError:
                        pass
                back = None
                deadline = time.monotonic() + 10
                while back is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                    with contextlib.suppress(FileNotFoundError):
                        c = Conn(fwd.socket)
                        back = call(c, "GET", "/_ping")[0]
                        c.close()
                if back != 200:
                    problems.append(f"the socket did not come back: {back}")
                events = [e["event"] for e in fwd.events()]
                if events != ["away", "back"]:
                    problems.append(f"events {events}")
            finally:
                rc = fwd.stop()
            tap.ok(rc == 0 and fwd.stderr() == "" and not problems and not os.path.lexists(sock)
                   and not os.path.lexists(sock + ".away"),
                   f"forward --wait-answer {kind}: {WAIT_PROMISE[kind]}; back after --wait-answer-away; logged",
                   (problems, rc, fwd.stderr()[-600:]))
    finally:
        up.stop()

    # ---- the command line -------------------------------------------------------
    d = os.path.join(top, "cli")
    os.mkdir(d)
    ready = os.path.join(d, "ready")
    p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sp_fake_docker.py"),
                          "--socket", os.path.join(d, "s"), "--mode", "capable", "--log", os.path.join(d, "log"),
                          "--ready-file", ready], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not os.path.exists(ready) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    with open(ready) if os.path.exists(ready) else io.StringIO("") as f:
        content = f.read()
    p.terminate()
    out, err = p.communicate(timeout=10)
    tap.ok(content == "READY\n" and out == b"READY\n" and p.returncode == 0,
           "standalone: --ready-file gets READY, stdout READY, SIGTERM exits 0", (content, out, err, p.returncode))
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sp_fake_docker.py"),
                        "--socket", os.path.join(d, "t"), "--mode", "bogus", "--log", os.path.join(d, "log2")],
                       capture_output=True, text=True, timeout=20)
    tap.ok(r.returncode == 2 and "bogus" in r.stderr, "standalone: an unknown mode is a usage error", r.stderr)
finally:
    shutil.rmtree(top, ignore_errors=True)
tap.finish()
