#!/usr/bin/python3
"""Contract tests for the client's answer schemas, `--answer-schema FILE` and
`--answer-schema-json TEXT` (docs/protocol.md, "The client" and "Protocol
v2").

The same contract as test_client.py, whose helpers this file shares: exactly
one line on stdout, `{"result":V}` with V the proxy's canonical value, or
`{"result":"ERROR"}`; nothing on stderr; exit 0.  The fake proxy decodes v2
requests with its own implementation of the documented bytes.

TAP on stdout; exit status 1 when any test fails.  Standard library only.
"""

import os
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_client as C  # noqa: E402
from fake_proxy import FakeProxy, encode_response, encode_response_v2  # noqa: E402

# test_client's own tests run from its own file; this one runs these.
C.TESTS.clear()
test = C.test

SCHEMA = b'{"type":"integer","minimum":0,"maximum":1000}'
OBJECT_SCHEMA = b'{"type":"object","fields":{"found":{"type":"boolean"},"count":{"type":"integer","minimum":0,"maximum":9}}}'


def schema_args(schema=SCHEMA, repo=C.REPO):
    return ["--repo", repo, "--answer-schema-json", schema]


def value_line(value):
    return b'{"result":' + value + b"}\n"


def answering_value(value):
    def reply(proxy, conn, request):
        conn.sendall(encode_response_v2(value))

    return reply


def check_forwarded_v2(proxy, schema, repo=C.REPO, script=C.SCRIPT):
    C.check_proxy_clean(proxy)
    assert len(proxy.requests) == 1, "%d requests" % len(proxy.requests)
    r = proxy.requests[0]
    assert r.version == 2, "version %d" % r.version
    assert r.repo == C.as_bytes(repo), "repo %r" % r.repo
    assert r.schema == schema, "schema %r" % r.schema
    assert r.outcomes == [], "outcomes %r" % r.outcomes
    assert r.script == script, "script differs (%d bytes received)" % len(r.script)


class SchemaFile:
    """A private directory holding a schema file; use as a context manager."""

    def __init__(self, content=None):
        self.dir = tempfile.mkdtemp(prefix="sp-contract-schema-")
        self.path = os.path.join(self.dir, "schema.json")
        if content is not None:
            with open(self.path, "wb") as f:
                f.write(content)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)


# Answered.


@test
def inline_schema_is_sent_as_v2_and_the_value_printed():
    run, proxy = C.ask(answering_value(b"42"), schema_args())
    C.check_contract(run, value_line(b"42"))
    check_forwarded_v2(proxy, SCHEMA)


@test
def schema_file_is_sent_byte_for_byte():
    # Pretty-printed, non-ASCII and all: the client forwards it unjudged.
    content = b'{\n  "type": "enum",\n  "values": ["\xc3\xa9t\xc3\xa9", "\xe6\x98\xaf"]\n}\n'
    with SchemaFile(content) as sf:
        run, proxy = C.ask(answering_value(b'"\xe6\x98\xaf"'), ["--answer-schema", sf.path, "--repo", C.REPO])
    C.check_contract(run, value_line(b'"\xe6\x98\xaf"'))
    check_forwarded_v2(proxy, content)


@test
def schema_of_exactly_4096_bytes_is_sent_from_a_file_and_inline():
    schema = SCHEMA + b" " * (4096 - len(SCHEMA))
    with SchemaFile(schema) as sf:
        run, proxy = C.ask(answering_value(b"7"), ["--repo", C.REPO, "--answer-schema", sf.path])
    C.check_contract(run, value_line(b"7"))
    check_forwarded_v2(proxy, schema)
    run, proxy = C.ask(answering_value(b"7"), schema_args(schema))
    C.check_contract(run, value_line(b"7"))
    check_forwarded_v2(proxy, schema)


@test
def structured_values_are_printed_as_the_proxy_wrote_them():
    for value in (
        b'{"found":true,"count":3}',
        b'{"tag":"ok","value":[1,-2,null]}',
        b'"say \\"yes\\" back\\\\slash"',
        b'"\xf0\x9f\x98\x80"',
        b"false",
    ):
        run, proxy = C.ask(answering_value(value), schema_args(OBJECT_SCHEMA))
        C.check_contract(run, value_line(value))
        check_forwarded_v2(proxy, OBJECT_SCHEMA)


@test
def value_of_exactly_8192_bytes_is_printed():
    value = b'"' + b"a" * 8190 + b'"'
    run, _ = C.ask(answering_value(value), schema_args())
    C.check_contract(run, value_line(value))


@test
def three_outcomes_still_send_v1_and_print_the_outcome():
    run, proxy = C.ask(C.answering(2), C.probe_args())
    C.check_contract(run, C.answer_line("NO"))
    C.check_forwarded(proxy, C.REPO, C.OUTCOMES, C.SCRIPT)
    assert proxy.requests[0].version == 1 and proxy.requests[0].schema is None


# The proxy answers ERROR, or something malformed: always the ERROR line.


def check_v2_error_reply(data):
    run, proxy = C.ask(C.sending(data), schema_args())
    C.check_contract(run)
    check_forwarded_v2(proxy, SCHEMA)
    assert run.elapsed < 4, "took %.1f s" % run.elapsed
    assert C.CANARY not in run.stdout and C.CANARY not in run.stderr


@test
def v2_error_reply_prints_error():
    check_v2_error_reply(encode_response_v2(None))


@test
def v1_reply_to_a_schema_prints_error():
    for index in (0, 1, 2, 3):
        check_v2_error_reply(encode_response(index))


@test
def v2_reply_to_three_outcomes_prints_error():
    for data in (encode_response_v2(None), encode_response_v2(b'"YES"'), encode_response_v2(b"1")[:11]):
        run, proxy = C.ask(C.sending(data), C.probe_args())
        C.check_contract(run)
        C.check_forwarded(proxy, C.REPO, C.OUTCOMES, C.SCRIPT)


@test
def malformed_v2_replies_print_error():
    good = encode_response_v2(b"42")
    cases = [
        encode_response_v2(b"42", status=0),  # ERROR with bytes after it
        encode_response_v2(b"", status=1),  # an answer of nothing
        encode_response_v2(b"42", status=2),
        encode_response_v2(b"42", status=255),
        encode_response_v2(b"42", magic=b"SPRQ"),
        encode_response_v2(b"42", version=1),
        encode_response_v2(b"42", version=3),
        encode_response_v2(b"42", kind=1),
        encode_response_v2(b"42", body_length=2),
        encode_response_v2(b"42", body_length=4),
        encode_response_v2(b"42", body_length=8194),
        good + b"\x00",
        good * 3,
        encode_response_v2(b"4" * 8193),  # over the bound
        encode_response_v2(b"4" * 20000),
        b"",
    ] + [good[:cut] for cut in range(1, len(good))]
    for data in cases:
        check_v2_error_reply(data)


@test
def values_no_canonical_answer_holds_print_error():
    # A newline would make two lines; controls, separators and bidi controls
    # would change what the transcript shows; bad UTF-8 is no text.
    for value in (
        b"1\n",
        b'"a\nb"',
        b"\n",
        b'"\x00"',
        b'"\x1b[31m"',
        b'"\x7f"',
        b'"\xc2\x85"',  # NEL, a C1 control
        b'"\xe2\x80\xa8"',  # line separator
        b'"\xe2\x80\xae"',  # right-to-left override
        b'"\xff"',
        b'"\xc0\xaf"',  # overlong
        b'"\xed\xa0\x80"',  # surrogate
        b'"\xe6\x98"',  # truncated
    ):
        check_v2_error_reply(encode_response_v2(value))


@test
def canary_in_a_malformed_v2_reply_never_reaches_client_output():
    for data in (
        encode_response_v2(C.CANARY, status=0),
        encode_response_v2(C.CANARY + b"\n"),
        encode_response_v2(C.CANARY, body_length=len(C.CANARY)),
        encode_response_v2(C.CANARY) + C.CANARY,
        encode_response(1) + C.CANARY,
    ):
        check_v2_error_reply(data)


@test
def canary_in_the_schema_never_reaches_client_output():
    schema = b'{"type":"const","value":"' + C.CANARY + b'"}'
    for reply in (C.sending(encode_response_v2(None)), C.sending(b"garbage " + C.CANARY[:4])):
        run, proxy = C.ask(reply, schema_args(schema))
        C.check_contract(run)
        check_forwarded_v2(proxy, schema)


@test
def proxy_stalling_after_a_full_v2_reply_makes_the_client_give_up():
    def reply(proxy, conn, request):
        conn.sendall(encode_response_v2(b"42"))
        proxy.stop.wait(C.RUN_TIMEOUT)

    run, _ = C.ask(reply, schema_args(), timeout="1")
    C.check_contract(run)
    assert 0.8 <= run.elapsed <= 6.0, "finished after %.2f s" % run.elapsed


# Refused before any contact.


@test
def schema_options_with_outcomes_or_each_other_print_error():
    with SchemaFile(SCHEMA) as sf:
        file_args = ["--answer-schema", sf.path]
        json_args = ["--answer-schema-json", SCHEMA]
        for args in (
            file_args + json_args,
            file_args + file_args,
            json_args + json_args,
            file_args + ["--outcome", "YES"],
            json_args + ["--outcome", "YES", "--outcome", "NO", "--outcome", "UNKNOWN"],
            ["--outcome", "YES"] + json_args,
        ):
            C.check_rejected_locally(["--repo", C.REPO] + args)
            C.check_rejected_locally(args)  # and with no repo


@test
def malformed_schema_options_print_error():
    with SchemaFile(SCHEMA) as sf:
        for args in (
            ["--repo", C.REPO, "--answer-schema"],
            ["--repo", C.REPO, "--answer-schema-json"],
            ["--repo", C.REPO, "--answer-schema=" + sf.path],
            ["--repo", C.REPO, "--answer-schema-json=" + SCHEMA.decode()],
            ["--repo", C.REPO, "--answer-schema-json", ""],
            ["--repo", C.REPO, "--answer-schema-json", SCHEMA + b" " * (4097 - len(SCHEMA))],
            ["--repo", "", "--answer-schema", sf.path],
            ["--repo", "o" * 141, "--answer-schema", sf.path],
            ["--answer-schema", sf.path, C.REPO],
        ):
            C.check_rejected_locally(args)


@test
def schema_files_that_cannot_be_sent_print_error():
    with SchemaFile() as sf:
        def path(name, content=None):
            p = os.path.join(sf.dir, name)
            if content is not None:
                with open(p, "wb") as f:
                    f.write(content)
            return p

        fifo = os.path.join(sf.dir, "fifo")
        os.mkfifo(fifo)  # nobody writes: opening it for reading must not block
        unreadable = path("unreadable", SCHEMA)
        os.chmod(unreadable, 0)
        cases = [
            path("missing"),
            sf.dir,  # a directory
            fifo,
            "/dev/zero",  # a device that never ends
            "/dev/null",
            path("empty", b""),
            path("over", SCHEMA + b" " * (4097 - len(SCHEMA))),
            path("huge", b" " * (1 << 20)),
            "",
        ]
        if os.geteuid() != 0:  # root reads it anyway
            cases.append(unreadable)
        for p in cases:
            C.check_rejected_locally(["--repo", C.REPO, "--answer-schema", p])
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@test
def canary_in_a_refused_schema_never_reaches_client_output():
    schema = b'{"type":"const","value":"' + C.CANARY + b'"}' + b" " * 4096
    with FakeProxy(C.answering(1)) as proxy:
        run = C.run_client(schema_args(schema), socket_path=proxy.path, timeout="5")
    C.check_contract(run)
    assert proxy.connections == 0
    assert C.CANARY not in run.stdout and C.CANARY not in run.stderr


if __name__ == "__main__":
    sys.exit(C.main())
