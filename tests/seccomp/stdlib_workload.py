"""A CPython standard-library workload that check_seccomp_enforce runs under the
built-in seccomp profile: python3 -I -S -B stdlib_workload.py DIR OUT.

Each step is what a probe plausibly does.  A step that the filter breaks
raises, and the traceback on stderr names it.  The workload also insists that
it runs under a filter that refuses inet sockets, so it can't pass vacuously.
On success it writes one line to OUT and exits 0.

It also insists that memory which is writable and executable is refused, and
that what the profile's denials make the standard library fall back from
(sendfile in shutil and socket) still works, and that ctypes calls C.
"""

import asyncio
import concurrent.futures
import ctypes
import errno
import hashlib
import json
import mmap
import multiprocessing
import os
import re
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

root, out = sys.argv[1], sys.argv[2]


def step(name):
    print(f"stdlib_workload: {name}", file=sys.stderr, flush=True)


step("under a filter")
status = Path("/proc/self/status").read_text()
seccomp_mode = re.search(r"^Seccomp:\s*(\d+)", status, re.M).group(1)
assert seccomp_mode == "2", f"Seccomp: {seccomp_mode}, not 2 (no filter)"
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
except PermissionError as e:
    assert e.errno == errno.EPERM
else:
    raise AssertionError("an AF_INET socket was allowed")

step("no memory that is writable and executable")
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError as e:
    assert e.errno == errno.EPERM
else:
    raise AssertionError("a writable and executable mapping was allowed")

step("read a file")
data = Path(root, "data.txt").read_bytes()
needle = re.search(rb"needle-(\d+)", data).group(0).decode()

step("os.walk")
files = sorted(f for _, _, names in os.walk(root) for f in names)
assert files == ["data.txt", "nested.txt"], files

step("json, hashlib, zlib")
doc = json.loads(json.dumps({"digest": hashlib.sha256(data).hexdigest(), "files": files}))
assert zlib.decompress(zlib.compress(data)) == data

step("write, copy, move and remove temporary files")
with tempfile.NamedTemporaryFile("w", dir=root, delete=False) as t:
    json.dump(doc, t)
shutil.copy2(t.name, t.name + ".copy")
os.replace(t.name + ".copy", t.name + ".moved")
os.unlink(t.name)
os.unlink(t.name + ".moved")
with tempfile.TemporaryDirectory(dir=root) as td:
    Path(td, "x").write_text("x")
    assert [p.name for p in Path(td).glob("*")] == ["x"]

step("shutil and socket fall back from the refused sendfile")
big = bytes(range(256)) * 4096  # 1 MiB: shutil copies it in more than one chunk
Path(root, "big.bin").write_bytes(big)
shutil.copyfile(Path(root, "big.bin"), Path(root, "big.copy"))
assert Path(root, "big.copy").read_bytes() == big
os.unlink(Path(root, "big.copy"))
a, b = socket.socketpair()
with a, b, open(Path(root, "big.bin"), "rb") as f:
    received = bytearray()

    def drain():
        while chunk := b.recv(65536):
            received.extend(chunk)

    t = threading.Thread(target=drain)
    t.start()
    assert a.sendfile(f) == len(big)
    a.shutdown(socket.SHUT_WR)
    t.join()
    assert bytes(received) == big
os.unlink(Path(root, "big.bin"))

step("memory maps: anonymous and of a file, read and write")
with mmap.mmap(-1, 8192) as m:
    m[:5] = b"hello"
    assert m[:5] == b"hello"
with open(Path(root, "data.txt"), "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
    assert m.find(needle.encode()) >= 0

step("extension modules load")
import array, bz2, csv, decimal, lzma, pickle, struct, unicodedata, uuid  # noqa: E401,E402
import xml.etree.ElementTree as ET  # noqa: E402

assert decimal.Decimal("1.1") + decimal.Decimal("2.2") == decimal.Decimal("3.3")
assert pickle.loads(pickle.dumps(array.array("i", [1, 2]))) == array.array("i", [1, 2])
assert lzma.decompress(lzma.compress(data)) == data and bz2.decompress(bz2.compress(data)) == data
assert ET.fromstring("<a><b/></a>").find("b") is not None
assert unicodedata.name("é") and struct.pack("<I", 1) and uuid.uuid4() and csv.reader(["a,b"])

step("ctypes calls C")
# Not its callbacks: refused writable executable memory, libffi maps a temporary
# file twice (writable, and executable), which works here on an exec /tmp but not
# on the sandbox's noexec mounts (confinement_probe.py checks that under runc).
assert ctypes.CDLL(None, use_errno=True).strlen(b"abc") == 3

step("subprocess of python itself")
r = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", "print(1)"], capture_output=True, check=True)
assert r.stdout == b"1\n", r

step("threads")
results = []
lock = threading.Lock()


def worker(i):
    with lock:
        results.append(hashlib.sha256(str(i).encode()).hexdigest())


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert len(results) == 4
with concurrent.futures.ThreadPoolExecutor(2) as ex:
    assert sum(ex.map(lambda x: x * 2, range(10))) == 90

step("multiprocessing")
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2, 3]) == [1, 2, 3]

step("AF_UNIX sockets and selectors")
a, b = socket.socketpair()
with a, b, selectors.DefaultSelector() as sel:
    sel.register(b, selectors.EVENT_READ)
    a.sendall(b"ping")
    assert sel.select(timeout=5)
    assert b.recv(4) == b"ping"

step("asyncio with a subprocess")


async def amain():
    await asyncio.sleep(0)
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-B", "-c", "print(2)", stdout=asyncio.subprocess.PIPE
    )
    o, _ = await p.communicate()
    assert o == b"2\n"


asyncio.run(amain())

step("time, signals, random")
time.sleep(0.01)
fired = []
signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.01)
deadline = time.monotonic() + 5
while not fired and time.monotonic() < deadline:
    time.sleep(0.005)
assert fired
assert len(os.urandom(16)) == 16
os.cpu_count()
os.uname()
os.times()
shutil.get_terminal_size()
sys.stdout.isatty()

step("sqlite3 on a file")
with tempfile.TemporaryDirectory(dir=root) as td:
    con = sqlite3.connect(os.path.join(td, "db.sqlite"))
    con.execute("create table t (x)")
    con.executemany("insert into t values (?)", [(1,), (2,)])
    con.commit()
    assert con.execute("select sum(x) from t").fetchone() == (3,)
    con.close()

step("write the result")
with open(out, "w") as f:
    f.write(f"ok {needle} files={len(files)} seccomp={seccomp_mode}\n")
