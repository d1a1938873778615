"""sp_github_fetch end to end, through the test-only driver, against a real
HTTPS server on loopback that plays the GitHub API and the codeload host.

The test makes a throwaway CA and a server certificate (localhost and
127.0.0.1) with the openssl CLI, starts three TLS servers on 127.0.0.1 only
(the API, the allowed codeload host, and another host a redirect must never
reach), records every request's headers, and proves: the happy paths
extract the tree; every refusal is an error naming the cause; the token never
reaches the codeload host, a URL, the driver's output, its argv or any file
it wrote."""

import hashlib
import io
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from sp_harness import Tap, env_path, skip_all  # noqa: E402

TOKEN = "ghp_SPCANARY7f3c9a1e5b2d8c4f6a0e1d3b5c7a9f2e"
WRONG_TOKEN = "ghp_SPCANARYwrongwrongwrongwrongwrongwrong"
SHA = hashlib.sha1(b"sealed-probe github test").hexdigest()
SHA256 = hashlib.sha256(b"sealed-probe github test").hexdigest()


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d):
    """A throwaway CA, and a server certificate it signs for localhost and
    127.0.0.1."""
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
       "-days", "2", "-subj", "/CN=sealed-probe test CA", cwd=d)
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
       "-subj", "/CN=localhost", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
       "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)
    return os.path.join(d, "ca.pem"), os.path.join(d, "server.pem"), os.path.join(d, "server.key")


def tarball(members, top="acme-good-" + SHA[:7]):
    """A gzip pax tarball as git archive makes them: a global header with the
    commit, then everything under one top directory.  members: (name, kind,
    data-or-target, mode) with name relative to top unless absolute=True."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": SHA}) as tf:
        d = tarfile.TarInfo(top + "/")
        d.type = tarfile.DIRTYPE
        d.mode = 0o775
        tf.addfile(d)
        for name, kind, data, mode in members:
            full = name if name.startswith("/") or name.startswith("!") else top + "/" + name
            ti = tarfile.TarInfo(full.lstrip("!"))
            ti.mode = mode
            ti.mtime = 1700000000
            if kind == "file":
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                tf.addfile(ti)
    return buf.getvalue()


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # (role, path, [(header, value)])

    def add(self, role, path, headers):
        with self.lock:
            self.requests.append((role, path, list(headers.items())))


def make_handler(role, world):
    class Handler(BaseHTTPRequestHandler):
        server_version = "sp-test"
        sys_version = ""

        def log_message(self, *args):
            pass

        def send(self, status, body=b"", headers=(), declared=None):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if declared is None else declared))
            self.end_headers()
            try:
                self.wfile.write(body)
                self.wfile.flush()
            except OSError:
                pass

        def do_GET(self):
            world.recorder.add(role, self.path, self.headers)
            parts = self.path.split("?")[0].strip("/").split("/")
            if role == "api":
                return self.api(parts)
            if role == "codeload":
                return self.codeload(parts)
            return self.send(200, world.tarballs["good"])  # a host no redirect may reach

        def api(self, parts):
            if self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.send(401, b'{"message":"Bad credentials"}')
            if len(parts) < 5 or parts[0] != "repos" or parts[1] != "acme":
                return self.send(404, b'{"message":"Not Found"}')
            repo, what = parts[2], parts[3]
            if repo == "missing":
                return self.send(404, b'{"message":"Not Found"}')
            if what == "commits":
                if repo == "slow":
                    world.slow_arrived.set()
                    world.slow_release.wait(30)
                if repo == "badsha-traversal":
                    return self.send(200, b"../../x")
                if repo == "badsha-short":
                    return self.send(200, SHA[:39].encode())
                if repo == "badsha-upper":
                    return self.send(200, SHA.upper().encode())
                if repo == "sha256":
                    return self.send(200, SHA256.encode())
                return self.send(200, SHA.encode())
            if what != "tarball":
                return self.send(404, b"")
            commit = parts[4]
            cl = world.codeload
            if repo == "direct":
                return self.send(200, world.tarballs["good"])
            if repo == "evilhost":
                return self.send(302, b"", [("Location", f"https://127.0.0.1:{world.evil_port}/x/{commit}")])
            if repo == "plainhttp":
                return self.send(302, b"", [("Location", f"http://{cl}/acme/good/legacy.tar.gz/{commit}")])
            if repo == "userinfo":
                return self.send(302, b"", [("Location", f"https://user:pw@{cl}/acme/good/legacy.tar.gz/{commit}")])
            return self.send(302, b"redirecting",
                             [("Location", f"https://{cl}/acme/{repo}/legacy.tar.gz/{commit}?token=codeload-own")])

        def codeload(self, parts):
            repo = parts[1] if len(parts) > 1 else ""
            if repo == "tworedirects":
                return self.send(302, b"", [("Location", f"https://{world.codeload}/acme/good/again")])
            if repo == "truncated":
                body = world.tarballs["good"]
                return self.send(200, body[: len(body) // 2], declared=len(body))
            if repo == "codeload404":
                return self.send(404, b"")
            return self.send(200, world.tarballs.get(repo, world.tarballs["good"]))

    return Handler


class World:
    pass


def start_server(role, world, cert, key):
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(role, world))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def files_under(root):
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


def main():
    driver = env_path("SP_GITHUB_DRIVER")
    for prog in ("openssl",):
        if shutil.which(prog) is None:
            skip_all(f"`{prog}` is not installed")
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="sp-github-")
    servers = []
    try:
        run_all(t, driver, tmp, servers)
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
        shutil.rmtree(tmp, ignore_errors=True)
    t.finish()


def run_all(t, driver, tmp, servers):
    ca, cert, key = make_certs(tmp)
    outside = os.path.join(tmp, "outside")
    os.mkdir(outside)
    world = World()
    world.recorder = Recorder()
    world.slow_arrived = threading.Event()
    world.slow_release = threading.Event()
    good_members = [
        ("README.md", "file", b"hello from the seed\n", 0o644),
        ("src", "dir", None, 0o755),
        ("src/main.py", "file", b"#!/usr/bin/env python3\nprint('hi')\n", 0o755),
        ("link", "symlink", "README.md", 0o777),
        ("caf\u00e9.txt", "file", b"utf-8 name\n", 0o644),
    ]
    world.tarballs = {
        "good": tarball(good_members),
        "dotdot": tarball([("../escape-dotdot", "file", b"x", 0o644)]),
        "absolute": tarball([("!" + os.path.join(outside, "escape-absolute"), "file", b"x", 0o644)]),
        "symlink": tarball([("evil", "symlink", outside, 0o777),
                            ("evil/escape-symlink", "file", b"x", 0o644)]),
        "oversized": tarball([("big", "file", b"x" * 5000, 0o644)]),
    }
    api = start_server("api", world, cert, key)
    servers.append(api)
    codeload = start_server("codeload", world, cert, key)
    servers.append(codeload)
    evil = start_server("evil", world, cert, key)
    servers.append(evil)
    api_port = api.server_address[1]
    world.codeload = f"127.0.0.1:{codeload.server_address[1]}"
    world.evil_port = evil.server_address[1]

    outputs = []  # every stdout and stderr, for the canary
    outdirs = []

    def run(name, repo, ref="main", ca_file=ca, token=TOKEN, extra=(), slow_check=None):
        out = os.path.join(tmp, "out-" + name)
        os.mkdir(out)
        outdirs.append(out)
        argv = [driver, "--api-base", f"https://localhost:{api_port}", "--codeload-host", world.codeload,
                "--repo", repo, "--ref", ref, "--out", out, *extra]
        if ca_file:
            argv += ["--ca", ca_file]
        env = {"PATH": "/usr/bin:/bin"}
        if token is not None:
            env["SP_TEST_TOKEN"] = token
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             stdin=subprocess.DEVNULL)
        if slow_check:
            slow_check(p)
        stdout, stderr = p.communicate(timeout=120)
        outputs.append(stdout + stderr)
        return p.returncode, stdout.strip(), stderr.strip(), out

    def refused(name, rc, stderr, *needles):
        ok = rc == 1 and all(n in stderr for n in needles)
        print(f"# {name}: {stderr}", flush=True)
        t.ok(ok, name, f"rc={rc} stderr={stderr!r} wanted {needles}")

    # The happy path: a 302 to the allowed codeload host.
    rc, stdout, stderr, out = run("good", "acme/good")
    ok = rc == 0 and stdout == SHA
    t.ok(ok, "redirect_to_codeload_extracts_and_prints_commit", f"rc={rc} out={stdout!r} err={stderr!r}")
    tree_ok = (
        os.path.isfile(os.path.join(out, "README.md"))
        and open(os.path.join(out, "README.md"), "rb").read() == b"hello from the seed\n"
        and os.stat(os.path.join(out, "src", "main.py")).st_mode & 0o111 == 0o111
        and os.readlink(os.path.join(out, "link")) == "README.md"
        and os.path.isfile(os.path.join(out, "caf\u00e9.txt"))
        and not any(n.startswith("acme-good") for n in os.listdir(out))
    )
    t.ok(tree_ok, "tarball_tree_extracted_minus_top_dir", f"listing={sorted(os.listdir(out))}")

    rc, stdout, stderr, out = run("direct", "acme/direct")
    t.ok(rc == 0 and stdout == SHA and os.path.isfile(os.path.join(out, "README.md")),
         "direct_200_from_api_host_accepted", f"rc={rc} err={stderr!r}")

    rc, stdout, stderr, out = run("sha256", "acme/sha256")
    t.ok(rc == 0 and stdout == SHA256, "sha256_commit_id_accepted", f"rc={rc} out={stdout!r} err={stderr!r}")

    before = len([r for r in world.recorder.requests if r[0] == "evil"])
    rc, stdout, stderr, out = run("evilhost", "acme/evilhost")
    refused("redirect_to_other_host_refused", rc, stderr, "not to the codeload host")
    t.ok(len([r for r in world.recorder.requests if r[0] == "evil"]) == before and not os.listdir(out),
         "other_host_never_contacted")

    rc, stdout, stderr, out = run("plainhttp", "acme/plainhttp")
    refused("redirect_to_http_refused", rc, stderr, "https")

    rc, stdout, stderr, out = run("userinfo", "acme/userinfo")
    refused("redirect_with_credentials_refused", rc, stderr, "credentials")

    rc, stdout, stderr, out = run("tworedirects", "acme/tworedirects")
    refused("second_redirect_refused", rc, stderr, "more than 1 redirect")

    rc, stdout, stderr, out = run("unauthorized", "acme/good", token=WRONG_TOKEN)
    refused("http_401_reported_with_status", rc, stderr, "401", "check the token's access")
    t.ok(WRONG_TOKEN not in stderr and TOKEN not in stderr, "http_401_message_holds_no_token", stderr)

    rc, stdout, stderr, out = run("missing", "acme/missing")
    refused("http_404_reported", rc, stderr, "404", "no such repository or ref")

    rc, stdout, stderr, out = run("codeload404", "acme/codeload404")
    refused("codeload_404_reported", rc, stderr, "codeload host", "404")

    rc, stdout, stderr, out = run("truncated", "acme/truncated")
    refused("truncated_body_is_error", rc, stderr, "download the tarball")
    t.ok(not os.listdir(out) and stdout == "", "truncated_body_writes_nothing", f"{os.listdir(out)}")

    for name, needle in (("dotdot", "`..`"), ("absolute", "absolute"), ("symlink", "symlink")):
        rc, stdout, stderr, out = run(name, "acme/" + name)
        refused(f"hostile_{name}_archive_refused", rc, stderr, "extract the tarball", needle)
    leaked = [n for n in os.listdir(outside)] + [n for n in os.listdir(tmp) if n.startswith("escape")]
    t.ok(not leaked, "hostile_archives_wrote_nothing_outside", f"{leaked}")

    rc, stdout, stderr, out = run("oversized", "acme/oversized", extra=("--max-tree-bytes", "1000"))
    refused("hostile_oversized_member_refused", rc, stderr, "5000 bytes")
    t.ok(not os.path.exists(os.path.join(out, "big")), "oversized_member_not_written")

    rc, stdout, stderr, out = run("toolarge", "acme/good", extra=("--max-tarball", "100"))
    refused("tarball_over_its_cap_refused", rc, stderr, "bigger than 100 bytes")

    rc, stdout, stderr, out = run("untrusted", "acme/good", ca_file=None)
    refused("untrusted_certificate_refused", rc, stderr, "certificate")
    t.ok(not os.listdir(out), "untrusted_certificate_writes_nothing")

    for name in ("badsha-traversal", "badsha-short", "badsha-upper"):
        before = len([r for r in world.recorder.requests if "/tarball/" in r[1]])
        rc, stdout, stderr, out = run(name, "acme/" + name)
        after = len([r for r in world.recorder.requests if "/tarball/" in r[1]])
        refused(f"invalid_commit_body_refused_{name}", rc, stderr, "not a commit id")
        t.ok(before == after, f"invalid_commit_never_used_in_a_url_{name}")

    rc, stdout, stderr, out = run("badref", "acme/good", ref="../../etc")
    refused("ref_with_dotdot_refused", rc, stderr, "ref")

    # argv: the driver's /proc/PID/cmdline while it waits on the server.
    cmdline = {}

    def look(p):
        if world.slow_arrived.wait(30):
            try:
                with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                    cmdline["bytes"] = f.read()
            finally:
                world.slow_release.set()
        else:
            world.slow_release.set()

    rc, stdout, stderr, out = run("slow", "acme/slow", slow_check=look)
    t.ok(rc == 0 and "bytes" in cmdline and cmdline["bytes"]
         and TOKEN.encode() not in cmdline["bytes"], "token_never_in_driver_cmdline",
         f"rc={rc} err={stderr!r} cmdline={cmdline!r}")

    # The canary, everywhere it could land.
    reqs = world.recorder.requests
    codeload_reqs = [r for r in reqs if r[0] in ("codeload", "evil")]
    t.ok(codeload_reqs and all(h.lower() != "authorization" and TOKEN not in v
                               for _, _, hs in codeload_reqs for h, v in hs),
         "token_never_sent_to_codeload_host", f"{codeload_reqs}")
    t.ok(all(TOKEN not in path and WRONG_TOKEN not in path for _, path, _ in reqs),
         "token_never_in_any_url")
    api_reqs = [r for r in reqs if r[0] == "api"]
    t.ok(all(dict((k.lower(), v) for k, v in hs).get("x-github-api-version") == "2022-11-28"
             and dict((k.lower(), v) for k, v in hs).get("user-agent", "").startswith("sealed-probe/")
             for _, _, hs in api_reqs), "api_requests_carry_version_and_user_agent")
    t.ok(all(dict((k.lower(), v) for k, v in hs).get("accept") == "application/vnd.github.sha"
             for _, p, hs in api_reqs if "/commits/" in p), "commit_request_asks_for_the_bare_sha")
    t.ok(all(TOKEN not in o and WRONG_TOKEN not in o for o in outputs), "token_never_in_driver_output")
    hits = []
    for d in outdirs:
        for path in files_under(d):
            if os.path.islink(path):
                data = os.readlink(path).encode()
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = b""
            if TOKEN.encode() in data or TOKEN.encode() in path.encode():
                hits.append(path)
    t.ok(not hits, "token_never_in_any_output_file", f"{hits}")


if __name__ == "__main__":
    main()
