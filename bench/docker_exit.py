#!/usr/bin/env python3
"""Where a Docker probe started ahead spends its time after the signal
(issue 29): the interpreter waiting on the stdin of an attach, as serve's
pool container does (docs/runtimes.md, "Interpreters started ahead").  For
each of --runs containers of the rootfs's image (the one serve imported): create (OpenStdin,
StdinOnce), attach its stdin, start, let it wait a second, post a wait, then
close the attach (the signal).  The container's process, once its stdin
ends, writes time.monotonic() into a bind-mounted file and exits; the host's
and the container's monotonic clocks are the same clock.  Printed, as
medians in ms:

  signal -> end of file   the attach closed, until the process wrote its time
  end of file -> wait     from that write (the probe's last act) until the
                          pending wait answered: the interpreter's exit and
                          the daemon's handling of it

A benchmark, never a test: it prints numbers and judges nothing.

usage (as root, with the project's dockerd running):
  bench/docker_exit.py [--socket /run/sealed-probe-test/docker.sock]
                       [--rootfs DIR | --image sealed-probe/rootfs:<12 hex>] [--runs 7]
                       [--shared-dir /var/tmp]
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

API = "/v1.41"
CODE = ("import os, time\n"
        "null = os.open('/dev/null', os.O_RDWR)\n"
        "for fd in (1, 2):\n"
        "    os.dup2(null, fd)\n"
        "while os.read(0, 4096):\n"
        "    pass\n"
        "with open('/x/t', 'w') as f:\n"
        "    f.write(repr(time.monotonic()))\n")


class Connection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("docker")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = Connection(sock)
    try:
        c.request(method, API + path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def attach_stdin(sock, cid):
    """The container's stdin, as serve holds it: a hijacked connection."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(f"POST {API}/containers/{cid}/attach?stream=1&stdin=1 HTTP/1.1\r\nHost: docker\r\n"
              "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = s.recv(4096)
        if not data:
            raise RuntimeError("attach: the daemon closed the connection")
        head += data
    if not head.startswith(b"HTTP/1.1 101 "):
        raise RuntimeError(f"attach: {head.splitlines()[0]!r}")
    return s


def rootfs_image(sock, rootfs):
    """The image serve imports for the rootfs at rootfs (its digest file):
    sealed-probe/rootfs:<the digest's first 12 hex>; it must exist."""
    with open(os.path.join(rootfs, "digest")) as f:
        digest = f.read().strip()
    image = "sealed-probe/rootfs:" + digest.split(":", 1)[-1][:12]
    status, _ = api(sock, "GET", f"/images/{image}/json")
    if status != 200:
        raise SystemExit(f"{image}: not in the daemon (serve on docker imports it at its first start)")
    return image


def one(sock, image, shared):
    status, body = api(sock, "POST", "/containers/create", {
        "Image": image, "Cmd": ["/usr/bin/python3", "-I", "-S", "-B", "-c", CODE],
        "OpenStdin": True, "StdinOnce": True, "NetworkDisabled": True,
        "HostConfig": {"Binds": [f"{shared}:/x"], "NetworkMode": "none", "LogConfig": {"Type": "none"}}})
    if status != 201:
        raise RuntimeError(f"create: {status} {body[:200]!r}")
    cid = json.loads(body)["Id"]
    try:
        stdin = attach_stdin(sock, cid)
        api(sock, "POST", f"/containers/{cid}/start")
        time.sleep(1)
        answered = {}

        def wait():
            answered["wait"] = api(sock, "POST", f"/containers/{cid}/wait")
            answered["at"] = time.monotonic()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
        signal_at = time.monotonic()
        stdin.close()
        waiter.join()
        status, body = answered["wait"]
        if status != 200 or json.loads(body).get("StatusCode") != 0:
            raise RuntimeError(f"the container did not exit 0: {status} {body[:200]!r}")
        with open(os.path.join(shared, "t")) as f:
            eof_at = float(f.read())
        return (eof_at - signal_at) * 1000, (answered["at"] - eof_at) * 1000
    finally:
        api(sock, "DELETE", f"/containers/{cid}?force=1")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", default="/run/sealed-probe-test/docker.sock")
    p.add_argument("--rootfs", default="/var/lib/sealed-probe/rootfs",
                   help="the rootfs whose image serve imported (default /var/lib/sealed-probe/rootfs)")
    p.add_argument("--image", help="an image of that rootfs by name, instead of --rootfs")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--shared-dir", default="/var/tmp",
                   help="where the bind-mounted directory is made: a path the daemon's mount namespace shows as "
                   "the host's (default /var/tmp)")
    a = p.parse_args()
    image = a.image or rootfs_image(a.socket, a.rootfs)
    eof, wait = [], []
    with tempfile.TemporaryDirectory(prefix="sp-docker-exit-", dir=a.shared_dir) as shared:
        os.chmod(shared, 0o777)
        for _ in range(a.runs):
            e, w = one(a.socket, image, shared)
            eof.append(e)
            wait.append(w)
    print(f"image {image}, {a.runs} runs, medians (ms):")
    print(f"  signal -> end of file: {statistics.median(eof):.1f}  ({', '.join(f'{x:.0f}' for x in eof)})")
    print(f"  end of file -> wait:   {statistics.median(wait):.1f}  ({', '.join(f'{x:.0f}' for x in wait)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
