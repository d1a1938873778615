"""A fake sealed-probe proxy for the client contract tests.

It decodes requests with its own implementation of docs/protocol.md, written
from the document and not from src/base/protocol.c, so that the client is held to
the documented bytes.  Every byte is checked; any deviation is recorded as a
decode error, which the tests assert is absent.

Standard library only.
"""

import os
import shutil
import socket
import struct
import tempfile
import threading

MAGIC = b"SPRB"
VERSION = 0x01
VERSION_V2 = 0x02
KIND_REQUEST = 0x01
KIND_RESPONSE = 0x02
HEADER = struct.Struct(">4sBBI")  # magic, version, kind, body_length (BE)
FIELD = struct.Struct(">BI")  # tag, length (BE)

REPO_MAX = 140  # SP_REPO_MAX_BYTES
OUTCOME_MAX = 64  # SP_OUTCOME_MAX_BYTES
SCRIPT_MAX = 65536  # SP_SCRIPT_MAX_BYTES
# tag and bound of each field, in the only order v1 allows
FIELDS = [(0x01, REPO_MAX), (0x02, OUTCOME_MAX), (0x02, OUTCOME_MAX), (0x02, OUTCOME_MAX), (0x03, SCRIPT_MAX)]
BODY_MAX = len(FIELDS) * FIELD.size + REPO_MAX + 3 * OUTCOME_MAX + SCRIPT_MAX
# v2 (docs/protocol.md, "Protocol v2"): REPO, SCHEMA (tag 04), SCRIPT
SCHEMA_MAX = 4096  # SP_ANSWER_SCHEMA_MAX_BYTES
ANSWER_MAX = 8192  # SP_ANSWER_OUTPUT_MAX_BYTES
FIELDS_V2 = [(0x01, REPO_MAX), (0x04, SCHEMA_MAX), (0x03, SCRIPT_MAX)]
BODY_MAX_V2 = len(FIELDS_V2) * FIELD.size + REPO_MAX + SCHEMA_MAX + SCRIPT_MAX
FRAME_MAX = HEADER.size + max(BODY_MAX, BODY_MAX_V2)


class FrameError(Exception):
    pass


class Request:
    def __init__(self, repo, outcomes, script, version=VERSION, schema=None):
        self.version = version
        self.repo = repo
        self.outcomes = outcomes
        self.schema = schema
        self.script = script


def decode_request(frame):
    """Decodes exactly one request frame, or raises FrameError."""
    if len(frame) < HEADER.size:
        raise FrameError("short header: %d bytes" % len(frame))
    magic, version, kind, body_length = HEADER.unpack_from(frame, 0)
    if magic != MAGIC:
        raise FrameError("magic %r" % magic)
    if version not in (VERSION, VERSION_V2):
        raise FrameError("version %d" % version)
    if kind != KIND_REQUEST:
        raise FrameError("kind %d" % kind)
    fields, body_max = (FIELDS, BODY_MAX) if version == VERSION else (FIELDS_V2, BODY_MAX_V2)
    if body_length > body_max:
        raise FrameError("body_length %d above %d" % (body_length, body_max))
    if len(frame) != HEADER.size + body_length:
        raise FrameError("frame is %d bytes, header says %d" % (len(frame), HEADER.size + body_length))
    pos = HEADER.size
    values = []
    for want_tag, bound in fields:
        if len(frame) - pos < FIELD.size:
            raise FrameError("field %d: no header" % (len(values) + 1))
        tag, length = FIELD.unpack_from(frame, pos)
        if tag != want_tag:
            raise FrameError("field %d: tag %d, want %d" % (len(values) + 1, tag, want_tag))
        if not 1 <= length <= bound:
            raise FrameError("field %d: length %d outside 1..%d" % (len(values) + 1, length, bound))
        pos += FIELD.size
        if len(frame) - pos < length:
            raise FrameError("field %d: runs past the frame" % (len(values) + 1))
        values.append(bytes(frame[pos : pos + length]))
        pos += length
    if pos != len(frame):
        raise FrameError("%d bytes after the script" % (len(frame) - pos))
    if version == VERSION_V2:
        return Request(values[0], [], values[2], VERSION_V2, values[1])
    return Request(values[0], values[1:4], values[4])


def encode_response(index, magic=MAGIC, version=VERSION, kind=KIND_RESPONSE, body_length=1):
    return HEADER.pack(magic, version, kind, body_length) + bytes([index])


def encode_response_v2(value, status=None, magic=MAGIC, version=VERSION_V2, kind=KIND_RESPONSE, body_length=None):
    """A v2 response: status 00 alone for ERROR (value None), or 01 and the
    value's bytes; each part overridable to build a malformed one."""
    body = b"\x00" if value is None else b"\x01" + value
    if status is not None:
        body = bytes([status]) + body[1:]
    if body_length is None:
        body_length = len(body)
    return HEADER.pack(magic, version, kind, body_length) + body


class FakeProxy:
    """Listens on a Unix socket in a private temporary directory and answers
    every connection with `reply(conn, request)`: a function that writes
    whatever the test wants, or nothing.  Use as a context manager."""

    def __init__(self, reply, read_request=True):
        self.dir = tempfile.mkdtemp(prefix="sp-contract-")
        self.path = os.path.join(self.dir, "probe.sock")
        self.reply = reply
        self.read_request = read_request
        self.stop = threading.Event()
        self.release = threading.Event()  # for replies that wait on the test
        self.connections = 0
        self.received = []  # raw request bytes, one per connection
        self.requests = []  # decoded requests
        self.decode_errors = []
        self.failures = []  # exceptions inside the fake itself
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                self.connections += 1
                try:
                    self._handle(conn)
                except Exception as e:  # a client that hangs up early is not a failure
                    if not isinstance(e, (BrokenPipeError, ConnectionResetError)):
                        self.failures.append(repr(e))

    def _handle(self, conn):
        conn.settimeout(10)
        request = None
        if self.read_request:
            data = bytearray()
            while len(data) <= FRAME_MAX:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.received.append(bytes(data))
            try:
                request = decode_request(bytes(data))
                self.requests.append(request)
            except FrameError as e:
                self.decode_errors.append(str(e))
        self.reply(self, conn, request)

    def wait_for_client_to_leave(self, conn, limit=15):
        """Blocks until the test ends, so that the client alone decides when
        to give up."""
        self.stop.wait(limit)

    def close(self):
        self.stop.set()
        self.release.set()
        self.thread.join(20)
        # A connection still queued was a contact too.
        self.sock.setblocking(False)
        try:
            conn, _ = self.sock.accept()
            conn.close()
            self.connections += 1
        except OSError:
            pass
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)
