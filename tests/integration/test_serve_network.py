"""`serve`'s network confinement: the sandbox has only lo and no routes, names
do not resolve, TCP and UDP listeners on the host's loopback and in a network
namespace the test makes (a veth pair on 169.254.0.0/16) record nothing from
a probe, and serve's own namespace has only lo.  No traffic ever goes to an
address that is not on this machine."""

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test("ip")

tap = Tap()
work = S.Work("sp-serve-net-")
nonce = uuid.uuid4().hex[:12]
TOKEN = f"PROBE-{nonce}"


class Listener:
    """TCP and UDP listeners on one address; every connection and datagram
    is recorded with what it carried."""

    def __init__(self, family, addr):
        self.records = []
        self.tcp = socket.socket(family, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((addr, 0))
        self.tcp.listen(16)
        self.udp = socket.socket(family, socket.SOCK_DGRAM)
        self.udp.bind((addr, 0))
        self.ports = (self.tcp.getsockname()[1], self.udp.getsockname()[1])
        self.stop = False
        for fn in (self._tcp, self._udp):
            threading.Thread(target=fn, daemon=True).start()

    def _tcp(self):
        self.tcp.settimeout(0.2)
        while not self.stop:
            try:
                conn, peer = self.tcp.accept()
            except OSError:
                continue
            conn.settimeout(1)
            try:
                data = conn.recv(256)
            except OSError:
                data = b""
            self.records.append(("tcp", peer, data))
            conn.close()

    def _udp(self):
        self.udp.settimeout(0.2)
        while not self.stop:
            try:
                data, peer = self.udp.recvfrom(256)
            except OSError:
                continue
            self.records.append(("udp", peer, data))

    def close(self):
        self.stop = True
        time.sleep(0.3)
        self.tcp.close()
        self.udp.close()


# The probe tries to reach each (family, addr, tcp_port, udp_port); answers
# REACHED if any connect or send succeeded, CUT when none did and the
# attempt itself ran (every target was tried), BROKEN otherwise.
REACH = """import json, socket, errno
TARGETS = %r
TOKEN = %r
tried, reached = 0, []
for fam, addr, tport, uport in TARGETS:
    family = socket.AF_INET6 if fam == 6 else socket.AF_INET
    tried += 1
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect((addr, tport))
            s.sendall(TOKEN.encode())
            reached.append(("tcp", addr))
    except OSError:
        pass
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(TOKEN.encode(), (addr, uport))
            reached.append(("udp", addr))
    except OSError:
        pass
result = "REACHED" if reached else ("CUT" if tried == len(TARGETS) else "BROKEN")
with open("/probe/out", "w") as f:
    json.dump({"result": result}, f)
"""
REACH_OUTCOMES = ("REACHED", "CUT", "BROKEN")

NETVIEW = """import json, os
with open("/proc/net/dev") as f:
    devs = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
with open("/proc/net/route") as f:
    v4 = f.readlines()[1:]
with open("/proc/net/ipv6_route") as f:
    v6 = [line for line in f if line.split()[-1] != "lo"]
# /sys is masked whole (docs/threat-model.md, "Host-wide state"): the
# network namespace's own files are the view.
if not devs:
    result = "BROKEN"
elif devs == ["lo"] and not v4 and not v6:
    result = "ONLY_LO"
else:
    result = "MORE"
with open("/probe/out", "w") as f:
    json.dump({"result": result}, f)
"""

DNS = """import json, socket
resolved = []
for name in ("example.invalid", "sp-%s.invalid"):
    try:
        socket.getaddrinfo(name, 80)
        resolved.append(name)
    except (socket.gaierror, OSError):
        pass
# control: getaddrinfo itself works (a numeric host needs no resolver)
try:
    control = socket.getaddrinfo("127.0.0.1", 80, flags=socket.AI_NUMERICHOST)
except Exception:
    control = None
result = "BROKEN" if not control else ("RESOLVED" if resolved else "FAILED")
with open("/probe/out", "w") as f:
    json.dump({"result": result}, f)
""" % nonce

host = host6 = ns_listener = None
ns_name = f"sp-test-{os.getpid()}"
veth_host, veth_ns = f"spv{os.getpid() % 100000}h", f"spv{os.getpid() % 100000}n"
try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=5, maxInvocations=1000)
    state = work.staged_state(config, [("acme/alpha", alpha)])

    # A network namespace of the test's own, reachable from the host over a veth.
    a, b = random.randint(1, 254), random.randint(0, 63) * 4
    host_ip, ns_ip = f"169.254.{a}.{b + 1}", f"169.254.{a}.{b + 2}"
    work.add_netns(ns_name)
    work.add_link(veth_host)
    cmds = [["ip", "netns", "add", ns_name],
            ["ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_ns],
            ["ip", "link", "set", veth_ns, "netns", ns_name],
            ["ip", "addr", "add", f"{host_ip}/30", "dev", veth_host],
            ["ip", "link", "set", veth_host, "up"],
            ["ip", "netns", "exec", ns_name, "ip", "addr", "add", f"{ns_ip}/30", "dev", veth_ns],
            ["ip", "netns", "exec", ns_name, "ip", "link", "set", veth_ns, "up"],
            ["ip", "netns", "exec", ns_name, "ip", "link", "set", "lo", "up"]]
    errs = [(c, r.stderr) for c in cmds for r in [subprocess.run(c, capture_output=True, text=True)] if r.returncode]
    ns_ready = tap.ok(not errs, f"the test's netns {ns_name} with a veth pair on 169.254.{a}.{b}/30", errs)
    ns_record = os.path.join(work.dir, "ns-records.jsonl")
    ns_ports = None
    if ns_ready:
        listener_src = f"""
import json, socket, threading, sys
rec = open({ns_record!r}, "a", buffering=1)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(({ns_ip!r}, 0)); t.listen(16)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(({ns_ip!r}, 0))
print(t.getsockname()[1], u.getsockname()[1], flush=True)
def udp():
    while True:
        d, p = u.recvfrom(256)
        rec.write(json.dumps(["udp", p[0], d.decode("latin-1")]) + "\\n")
threading.Thread(target=udp, daemon=True).start()
while True:
    c, p = t.accept()
    c.settimeout(1)
    try:
        d = c.recv(256)
    except OSError:
        d = b""
    rec.write(json.dumps(["tcp", p[0], d.decode("latin-1")]) + "\\n")
    c.close()
"""
        ns_listener = subprocess.Popen(["ip", "netns", "exec", ns_name, "/usr/bin/python3", "-c", listener_src],
                                       stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        ns_ports = tuple(int(x) for x in ns_listener.stdout.readline().split())

        def ns_records():
            try:
                with open(ns_record) as f:
                    return [json.loads(line) for line in f]
            except FileNotFoundError:
                return []
        # Control: the host reaches the listener in the test's namespace.
        with socket.create_connection((ns_ip, ns_ports[0]), timeout=5) as c:
            c.sendall(b"CONTROL")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.sendto(b"CONTROL", (ns_ip, ns_ports[1]))
        got = S.wait_for(lambda: {r[0] for r in ns_records() if r[2] == "CONTROL"} == {"tcp", "udp"}, timeout=10)
        tap.ok(got, "control: from the host, the netns listeners receive TCP and UDP", ns_records())

    host = Listener(socket.AF_INET, "127.0.0.1")
    try:
        host6 = Listener(socket.AF_INET6, "::1")
    except OSError:
        pass
    with socket.create_connection(("127.0.0.1", host.ports[0]), timeout=5) as c:
        c.sendall(b"CONTROL")
    tap.ok(S.wait_for(lambda: any(r[2] == b"CONTROL" for r in host.records), timeout=5),
           "control: the host loopback listener records a connection", host.records)

    with S.serving(work, config, state) as srv:
        a = srv.probe(NETVIEW, "acme/alpha", ("ONLY_LO", "MORE", "BROKEN"))
        tap.ok(a == S.answer("ONLY_LO"), "the sandbox sees exactly lo (procfs and sysfs) and no routes", a)
        a = srv.probe(DNS, "acme/alpha", ("RESOLVED", "FAILED", "BROKEN"))
        tap.ok(a == S.answer("FAILED"), "name resolution fails in the sandbox (example.invalid, a random .invalid), "
                                        "while getaddrinfo itself runs", a)

        targets = [(4, "127.0.0.1", host.ports[0], host.ports[1])]
        if host6:
            targets.append((6, "::1", host6.ports[0], host6.ports[1]))
        a = srv.probe(REACH % (targets, TOKEN), "acme/alpha", REACH_OUTCOMES)
        time.sleep(0.5)
        got = [r for r in host.records + (host6.records if host6 else []) if r[2] != b"CONTROL"]
        tap.ok(a == S.answer("CUT") and not got,
               "TCP and UDP listeners on the host's loopback (127.0.0.1, ::1) are unreachable and record nothing",
               f"{a} {got}")
        if ns_ready:
            a = srv.probe(REACH % ([(4, ns_ip, ns_ports[0], ns_ports[1])], TOKEN), "acme/alpha", REACH_OUTCOMES)
            time.sleep(0.5)
            got = [r for r in ns_records() if r[2] != "CONTROL"]
            tap.ok(a == S.answer("CUT") and not got,
                   f"listeners in the test's own netns ({ns_ip}, over a veth) are unreachable and record nothing",
                   f"{a} {got}")

        with open(f"/proc/{srv.pid}/net/dev") as f:
            devs = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
        tap.ok(devs == ["lo"], "serve's own network namespace has only lo", devs)
        tap.ok(os.readlink(f"/proc/{srv.pid}/ns/net") != os.readlink("/proc/self/ns/net"),
               "serve runs in a network namespace of its own")
        r = subprocess.run(["nsenter", "-t", str(srv.pid), "-n", "ip", "-o", "link", "show"], capture_output=True,
                           text=True)
        lines = [line for line in r.stdout.splitlines() if line.strip()]
        tap.ok(len(lines) == 1 and ": lo:" in lines[0] and "UP" in lines[0].split("<")[1].split(">")[0].split(","),
               "serve's lo is up", r.stdout + r.stderr)
        r = subprocess.run(["nsenter", "-t", str(srv.pid), "-n", "ip", "route", "show", "table", "all"],
                           capture_output=True, text=True)
        off_lo = [line for line in r.stdout.splitlines() if line.strip() and "dev lo" not in line]
        tap.ok(r.returncode == 0 and not off_lo, "serve's namespace has no route off lo", r.stdout + r.stderr)
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-300:])
finally:
    for listener in (host, host6):
        if listener:
            listener.close()
    if ns_listener:
        ns_listener.kill()
        ns_listener.wait()
    work.close()
    for c in (["ip", "link", "del", veth_host], ["ip", "netns", "del", ns_name]):
        subprocess.run(c, capture_output=True)
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if ns_name in r.stdout:
        tap.ok(False, "the test's netns is deleted", r.stdout)
tap.finish()
