"""A real HTTPS server on loopback that plays the GitHub API and codeload
hosts for staging tests.  It listens on 127.0.0.1 only, with a throwaway CA
and certificate made by the openssl CLI, and records every request."""

import http.server
import io
import os
import ssl
import subprocess
import tarfile
import threading
import time


def make_ca_and_cert(workdir):
    """A CA and a server certificate for localhost and 127.0.0.1; returns
    (ca_file, cert_file, key_file)."""
    ca_key, ca_crt = os.path.join(workdir, "ca.key"), os.path.join(workdir, "ca.crt")
    key, csr, crt = (os.path.join(workdir, n) for n in ("server.key", "server.csr", "server.crt"))
    ext = os.path.join(workdir, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True, stdin=subprocess.DEVNULL)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt,
        "-days", "2", "-subj", "/CN=sealed-probe test CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
        "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


def tarball(top, files):
    """A gzip tarball like GitHub's: one top directory, then the files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(top)
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeGitHub:
    """repos: {"owner/name": (commit, tarball bytes)}.  The API answers the
    commit with the sha media type and 302s the tarball to the codeload
    server, which serves it after `delay` seconds: whole, or `chunk` bytes at
    a time with `pause` seconds after each (attributes a test may change
    between requests), with a Content-Length, or chunked without one when
    `content_length` is false."""

    def __init__(self, workdir, repos, token, delay=0.0):
        self.ca, cert, key = make_ca_and_cert(workdir)
        self.repos, self.token, self.delay = repos, token, delay
        self.chunk, self.pause, self.content_length = None, 0.0, True
        self.requests = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.codeload = self._serve(ctx, self._codeload_handler())
        self.api = self._serve(ctx, self._api_handler())
        self.api_base = f"https://localhost:{self.api.server_address[1]}"
        self.codeload_host = f"127.0.0.1:{self.codeload.server_address[1]}"

    def _serve(self, ctx, handler):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def _record(self, host, handler):
        self.requests.append((host, handler.path, dict(handler.headers)))

    def _api_handler(self):
        fake = self

        class Api(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._record("api", self)
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._send(401, b'{"message":"Bad credentials"}')
                parts = self.path.split("/")  # /repos/OWNER/NAME/KIND/REF
                repo = "/".join(parts[2:4]) if len(parts) == 6 else None
                if repo not in fake.repos:
                    return self._send(404, b'{"message":"Not Found"}')
                commit, _ = fake.repos[repo]
                if parts[4] == "commits":
                    return self._send(200, commit.encode())
                if parts[4] == "tarball" and parts[5] == commit:
                    self.send_response(302)
                    self.send_header("Location", f"https://{fake.codeload_host}/{repo}/legacy.tar.gz/{commit}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                return self._send(404, b'{"message":"Not Found"}')

            def _send(self, status, body):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Api

    def _codeload_handler(self):
        fake = self

        class Codeload(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._record("codeload", self)
                repo = "/".join(self.path.split("/")[1:3])
                if repo not in fake.repos:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                time.sleep(fake.delay)
                body = fake.repos[repo][1]
                step = fake.chunk or len(body)
                if not fake.content_length:
                    self.protocol_version = "HTTP/1.1"  # chunked needs it
                    self.close_connection = True
                self.send_response(200)
                if fake.content_length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("Connection", "close")
                self.end_headers()
                for at in range(0, len(body), step):
                    piece = body[at:at + step]
                    if fake.content_length:
                        self.wfile.write(piece)
                    else:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    time.sleep(fake.pause)
                if not fake.content_length:
                    self.wfile.write(b"0\r\n\r\n")

        return Codeload

    def close(self):
        for server in (self.api, self.codeload):
            server.shutdown()
            server.server_close()
