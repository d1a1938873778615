#!/usr/bin/python3
"""Contract tests for the agent-side client, `sealed-probe` (docs/protocol.md,
"The client").

Whatever happens, the client prints exactly one canonical line on stdout,
writes nothing to stderr and exits 0.  Every test below checks all three, and
drives the real binary (env SP_CLIENT) against a fake proxy that decodes the
request with an independent implementation of the frame format.

TAP on stdout; exit status 1 when any test fails.  Standard library only.
"""

import os
import pty
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_proxy  # noqa: E402
from fake_proxy import FakeProxy, encode_response  # noqa: E402

CLIENT = os.path.abspath(os.environ["SP_CLIENT"])
ERROR = b'{"result":"ERROR"}\n'
RUN_TIMEOUT = 15  # seconds; no subprocess may outlive it
CANARY = b"CANARY_SECRET_9f3b"

REPO = "acme/widgets"
OUTCOMES = ["YES", "NO", "UNKNOWN"]
SCRIPT = b"import os\nprint(os.listdir('/probe/repo'))\n"

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def as_bytes(arg):
    return arg if isinstance(arg, bytes) else arg.encode()


def probe_args(repo=REPO, outcomes=OUTCOMES):
    args = ["--repo", repo]
    for o in outcomes:
        args += ["--outcome", o]
    return args


def client_env(socket_path=None, timeout=None, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALED_PROBE_")}
    if socket_path is not None:
        env["SEALED_PROBE_SOCKET"] = socket_path
    if timeout is not None:
        env["SEALED_PROBE_TIMEOUT"] = timeout
    if extra:
        env.update(extra)
    return env


class Run:
    def __init__(self, stdout, stderr, status, elapsed):
        self.stdout = stdout
        self.stderr = stderr
        self.status = status
        self.elapsed = elapsed


def run_client(args, stdin=SCRIPT, socket_path=None, timeout=None, env=None, prefix=()):
    argv = list(prefix) + [os.fsencode(CLIENT)] + [as_bytes(a) for a in args]
    if env is None:
        env = client_env(socket_path, timeout)
    start = time.monotonic()
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=RUN_TIMEOUT)
    return Run(p.stdout, p.stderr, p.returncode, time.monotonic() - start)


def answer_line(outcome):
    """The canonical line, built here from the documented rule: only '"' and
    '\\' are escaped."""
    raw = as_bytes(outcome)
    return b'{"result":"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"}\n'


def check_contract(run, want=ERROR):
    assert run.stdout == want, "stdout %r, want %r" % (run.stdout, want)
    assert run.stderr == b"", "stderr %r" % run.stderr
    assert run.status == 0, "exit status %d" % run.status


def check_proxy_clean(proxy):
    assert not proxy.failures, "fake proxy failed: %s" % proxy.failures
    assert not proxy.decode_errors, "request off the documented format: %s" % proxy.decode_errors


def check_forwarded(proxy, repo, outcomes, script):
    check_proxy_clean(proxy)
    assert len(proxy.requests) == 1, "%d requests" % len(proxy.requests)
    r = proxy.requests[0]
    assert r.repo == as_bytes(repo), "repo %r" % r.repo
    assert r.outcomes == [as_bytes(o) for o in outcomes], "outcomes %r" % r.outcomes
    assert r.script == script, "script differs (%d bytes received)" % len(r.script)


def answering(index):
    def reply(proxy, conn, request):
        conn.sendall(encode_response(index))

    return reply


def sending(data):
    def reply(proxy, conn, request):
        conn.sendall(data)

    return reply


def ask(reply, args=None, stdin=SCRIPT, timeout="5", read_request=True):
    """Runs the client once against a fake proxy; returns (run, proxy)."""
    with FakeProxy(reply, read_request=read_request) as proxy:
        run = run_client(args if args is not None else probe_args(), stdin, proxy.path, timeout)
    return run, proxy


# Happy paths.


def check_answers(index, outcomes=OUTCOMES, repo=REPO, script=SCRIPT):
    run, proxy = ask(answering(index), probe_args(repo, outcomes), script)
    check_contract(run, answer_line(outcomes[index - 1]))
    check_forwarded(proxy, repo, outcomes, script)


@test
def answer_index_1_prints_first_outcome():
    check_answers(1)


@test
def answer_index_2_prints_second_outcome():
    check_answers(2)


@test
def answer_index_3_prints_third_outcome():
    check_answers(3)


@test
def non_ascii_outcome_is_forwarded_and_printed_verbatim():
    outcomes = ["ÉTÉ", "是", "\U0001F600 maybe"]
    for i in (1, 2, 3):
        check_answers(i, outcomes)


@test
def outcome_with_quote_and_backslash_is_printed_with_canonical_escaping():
    outcomes = ['say "yes"', "back\\slash", 'both \\"']
    for i in (1, 2, 3):
        check_answers(i, outcomes)
    run, _ = ask(answering(3), probe_args(REPO, outcomes))
    check_contract(run, b'{"result":"both \\\\\\""}\n')


@test
def outcomes_at_their_bound_and_largest_script_are_forwarded_exactly():
    outcomes = ["a" * 64, "\U0001F600" * 16, "b" * 63 + "c"]
    script = bytes(range(256)) * 256  # 65536 bytes, every byte value
    check_answers(2, outcomes, "o" * 39 + "/" + "r" * 100, script)


@test
def script_with_any_bytes_is_forwarded_exactly():
    check_answers(1, script=b"\x00\xff\xc0\x80\r\n" + CANARY + b"\x00")


@test
def flags_in_any_order_keep_outcome_order():
    args = ["--outcome", "A", "--outcome", "B", "--repo", REPO, "--outcome", "C"]
    run, proxy = ask(answering(3), args)
    check_contract(run, answer_line("C"))
    check_forwarded(proxy, REPO, ["A", "B", "C"], SCRIPT)


@test
def outcome_that_looks_like_a_flag_is_a_value():
    outcomes = ["--repo", "--outcome", "-h"]
    for i in (1, 2, 3):
        check_answers(i, outcomes)


@test
def repo_is_forwarded_unjudged_for_the_proxy_to_check():
    check_answers(1, repo="Not/Allowed..?")


@test
def timeout_of_3600_seconds_is_accepted():
    run, proxy = ask(answering(1), timeout="3600")
    check_contract(run, answer_line("YES"))


@test
def response_sent_in_pieces_is_accepted():
    def reply(proxy, conn, request):
        frame = encode_response(2)
        for b in frame:
            conn.sendall(bytes([b]))
            time.sleep(0.01)

    run, proxy = ask(reply)
    check_contract(run, answer_line("NO"))


@test
def canary_in_script_never_reaches_client_output():
    script = b"# " + CANARY + b"\nprint('" + CANARY + b"')\n"
    run, proxy = ask(answering(2), stdin=script)
    check_contract(run, answer_line("NO"))
    check_forwarded(proxy, REPO, OUTCOMES, script)
    assert CANARY not in run.stdout and CANARY not in run.stderr


@test
def canary_in_proxy_reply_never_reaches_client_output():
    for data in (CANARY, encode_response(1) + CANARY, b"SPRB" + CANARY):
        run, _ = ask(sending(data))
        check_contract(run)
        assert CANARY not in run.stdout and CANARY not in run.stderr


# The proxy misbehaves: always ERROR.


def check_error_reply(reply, read_request=True):
    run, proxy = ask(reply, read_request=read_request)
    check_contract(run)
    if read_request:
        check_forwarded(proxy, REPO, OUTCOMES, SCRIPT)
    # Fails at once rather than waiting out its 5 s deadline.
    assert run.elapsed < 4, "took %.1f s" % run.elapsed


@test
def answer_index_0_prints_error():
    check_error_reply(answering(0))


@test
def answer_index_4_prints_error():
    check_error_reply(answering(4))


@test
def answer_index_255_prints_error():
    check_error_reply(answering(255))


@test
def proxy_closing_without_answering_prints_error():
    check_error_reply(sending(b""))


@test
def proxy_closing_before_reading_the_request_prints_error():
    check_error_reply(sending(b""), read_request=False)


@test
def proxy_closing_mid_response_prints_error():
    for cut in (1, 4, 5, 10):
        check_error_reply(sending(encode_response(1)[:cut]))


@test
def proxy_answering_garbage_prints_error():
    check_error_reply(sending(b"HELLO WORLD"))  # 11 bytes, like a response
    check_error_reply(sending(b'{"result":"YES"}\n'))


@test
def oversized_reply_prints_error():
    check_error_reply(sending(encode_response(1) * 400))


@test
def reply_with_an_extra_byte_prints_error():
    check_error_reply(sending(encode_response(1) + b"\x00"))


@test
def reply_with_wrong_magic_prints_error():
    check_error_reply(sending(encode_response(1, magic=b"SPRQ")))


@test
def reply_with_wrong_version_prints_error():
    check_error_reply(sending(encode_response(1, version=2)))


@test
def reply_with_wrong_kind_prints_error():
    check_error_reply(sending(encode_response(1, kind=1)))


@test
def reply_with_wrong_body_length_prints_error():
    check_error_reply(sending(encode_response(1, body_length=2)))
    check_error_reply(sending(encode_response(1, body_length=0)))


# The upper bounds only tell "gave up near its deadline" from "hung until the
# harness killed it" (RUN_TIMEOUT); they are generous for loaded CI machines.
def check_gives_up(reply, timeout="1", bound=6.0):
    run, proxy = ask(reply, timeout=timeout)
    check_contract(run)
    assert 0.8 <= run.elapsed <= bound, "finished after %.2f s" % run.elapsed


@test
def slow_proxy_makes_the_client_give_up_by_its_timeout():
    def reply(proxy, conn, request):
        proxy.stop.wait(RUN_TIMEOUT)

    check_gives_up(reply, "1")


@test
def slow_proxy_with_two_second_timeout_is_bounded():
    def reply(proxy, conn, request):
        proxy.stop.wait(RUN_TIMEOUT)

    run, _ = ask(reply, timeout="2")
    check_contract(run)
    assert 1.8 <= run.elapsed <= 7.0, "finished after %.2f s" % run.elapsed


@test
def proxy_stalling_mid_response_makes_the_client_give_up():
    def reply(proxy, conn, request):
        conn.sendall(encode_response(1)[:6])
        proxy.stop.wait(RUN_TIMEOUT)

    check_gives_up(reply)


@test
def proxy_stalling_after_a_full_response_makes_the_client_give_up():
    # Without EOF the client cannot know no twelfth byte follows.
    def reply(proxy, conn, request):
        conn.sendall(encode_response(1))
        proxy.stop.wait(RUN_TIMEOUT)

    check_gives_up(reply)


@test
def proxy_that_never_accepts_makes_the_client_give_up():
    d = tempfile.mkdtemp(prefix="sp-contract-")
    path = os.path.join(d, "probe.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fillers = []
    try:
        s.bind(path)
        s.listen(0)
        # Fill the backlog so that connect would block (EAGAIN when non-blocking).
        for _ in range(4):
            f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            f.setblocking(False)
            try:
                f.connect(path)
            except BlockingIOError:
                pass
            fillers.append(f)
        run = run_client(probe_args(), socket_path=path, timeout="1")
        check_contract(run)
        assert 0.8 <= run.elapsed <= 6.0, "finished after %.2f s" % run.elapsed
    finally:
        for f in fillers:
            f.close()
        s.close()
        os.unlink(path)
        os.rmdir(d)


@test
def stdin_that_never_ends_makes_the_client_give_up():
    r, w = os.pipe()
    try:
        os.write(w, b"print(1)\n")
        start = time.monotonic()
        p = subprocess.run(
            [CLIENT] + probe_args(),
            stdin=r,
            capture_output=True,
            env=client_env("/nonexistent/probe.sock", "1"),
            timeout=RUN_TIMEOUT,
        )
        run = Run(p.stdout, p.stderr, p.returncode, time.monotonic() - start)
    finally:
        os.close(r)
        os.close(w)
    check_contract(run)
    assert 0.8 <= run.elapsed <= 6.0, "finished after %.2f s" % run.elapsed


# No proxy at all.


@test
def missing_socket_path_prints_error():
    run = run_client(probe_args(), socket_path="/nonexistent/sealed-probe/probe.sock", timeout="5")
    check_contract(run)
    assert run.elapsed < 4, "waited out its deadline"


@test
def socket_file_with_nobody_listening_prints_error():
    d = tempfile.mkdtemp(prefix="sp-contract-")
    path = os.path.join(d, "probe.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        s.close()  # the file stays; nobody listens
        run = run_client(probe_args(), socket_path=path, timeout="5")
        check_contract(run)
        assert run.elapsed < 4, "waited out its deadline"
    finally:
        os.unlink(path)
        os.rmdir(d)


@test
def socket_path_that_is_a_regular_file_prints_error():
    with tempfile.NamedTemporaryFile(prefix="sp-contract-") as f:
        run = run_client(probe_args(), socket_path=f.name, timeout="5")
    check_contract(run)


@test
def default_socket_path_is_used_when_unset():
    # No proxy runs at the default path in the test environment; if one did,
    # its answer would still be a single valid line.
    run = run_client(probe_args(), env=client_env(timeout="2"))
    assert run.stderr == b"" and run.status == 0
    assert run.stdout.endswith(b"\n") and run.stdout.count(b"\n") == 1


# Bad arguments, environment and stdin: ERROR, and the proxy never hears of it.


def check_rejected_locally(args, stdin=SCRIPT, timeout="5", socket_path=None, env_extra=None):
    with FakeProxy(answering(1)) as proxy:
        env = client_env(socket_path if socket_path is not None else proxy.path, timeout, env_extra)
        run = run_client(args, stdin, env=env)
    check_contract(run)
    assert proxy.connections == 0, "the proxy was contacted"


@test
def no_arguments_print_error():
    check_rejected_locally([])


@test
def missing_repo_prints_error():
    check_rejected_locally(["--outcome", "A", "--outcome", "B", "--outcome", "C"])


@test
def two_repos_print_error():
    check_rejected_locally(probe_args() + ["--repo", "acme/gadgets"])
    check_rejected_locally(["--repo", REPO] + probe_args())


@test
def no_outcomes_print_error():
    check_rejected_locally(["--repo", REPO])


@test
def two_outcomes_print_error():
    check_rejected_locally(probe_args(outcomes=["YES", "NO"]))


@test
def four_outcomes_print_error():
    check_rejected_locally(probe_args(outcomes=["YES", "NO", "UNKNOWN", "MAYBE"]))


@test
def duplicate_outcomes_print_error():
    check_rejected_locally(probe_args(outcomes=["YES", "NO", "YES"]))
    check_rejected_locally(probe_args(outcomes=["NO", "NO", "YES"]))


@test
def outcome_error_prints_error():
    check_rejected_locally(probe_args(outcomes=["YES", "ERROR", "NO"]))


@test
def empty_outcome_prints_error():
    check_rejected_locally(probe_args(outcomes=["YES", "", "NO"]))


@test
def outcome_of_65_bytes_prints_error():
    check_rejected_locally(probe_args(outcomes=["YES", "a" * 65, "NO"]))
    check_rejected_locally(probe_args(outcomes=["YES", "a" * 63 + "é", "NO"]))


@test
def invalid_utf8_outcome_prints_error():
    for bad in (
        os.fsencode("YES\udcff"),  # surrogateescape: a lone 0xFF byte
        b"\xc0\xaf",  # overlong '/'
        b"\xed\xa0\x80",  # surrogate U+D800
        b"\xf4\x90\x80\x80",  # above U+10FFFF
        b"YES\xe2\x82",  # truncated
    ):
        check_rejected_locally([b"--repo", REPO, b"--outcome", bad, b"--outcome", b"NO", b"--outcome", b"X"])


@test
def outcome_with_control_character_prints_error():
    for bad in ("A\nB", "\tA", "\x1b[31mRED", "A\x7f", "A\u0085", "A\u2028B", "\u202eSEY", "\u2066A", "\u200fA"):
        check_rejected_locally(probe_args(outcomes=["YES", bad, "NO"]))


@test
def repo_equals_form_prints_error():
    check_rejected_locally(["--repo=" + REPO, "--outcome", "A", "--outcome", "B", "--outcome", "C"])
    check_rejected_locally(["--repo", REPO, "--outcome=A", "--outcome", "B", "--outcome", "C"])


@test
def unknown_flag_prints_error():
    for flag in (["--timeout", "99"], ["--image", "x"], ["--socket", "/tmp/x"], ["-h"], ["--help"], ["--"]):
        check_rejected_locally(probe_args() + flag)
        check_rejected_locally(flag + probe_args())


@test
def positional_argument_prints_error():
    check_rejected_locally(probe_args() + ["probe.py"])
    check_rejected_locally(["probe.py"] + probe_args())


@test
def flag_without_value_prints_error():
    check_rejected_locally(probe_args() + ["--outcome"])
    check_rejected_locally(probe_args(outcomes=["A", "B"]) + ["--outcome"])


@test
def empty_repo_prints_error():
    check_rejected_locally(probe_args(repo=""))


@test
def repo_over_140_bytes_prints_error():
    check_rejected_locally(probe_args(repo="o" * 40 + "/" + "r" * 100))


@test
def too_many_arguments_print_error():
    check_rejected_locally(probe_args() + ["--repo", REPO] * 4)


@test
def script_over_65536_bytes_prints_error():
    check_rejected_locally(probe_args(), stdin=b"#" * 65537)
    check_rejected_locally(probe_args(), stdin=b"#" * (1 << 20))


@test
def empty_script_prints_error():
    check_rejected_locally(probe_args(), stdin=b"")


@test
def stdin_that_is_a_tty_prints_error():
    master, slave = pty.openpty()
    try:
        with FakeProxy(answering(1)) as proxy:
            os.write(master, b"print(1)\n\x04")
            p = subprocess.run(
                [CLIENT] + probe_args(),
                stdin=slave,
                capture_output=True,
                env=client_env(proxy.path, "2"),
                timeout=RUN_TIMEOUT,
            )
        check_contract(Run(p.stdout, p.stderr, p.returncode, 0))
        assert proxy.connections == 0, "the proxy was contacted"
    finally:
        os.close(master)
        os.close(slave)


@test
def invalid_timeout_prints_error():
    for bad in ("", "0", "-1", "+5", " 5", "5 ", "1.5", "5s", "abc", "3601", "99999999999999999999", "0x10"):
        check_rejected_locally(probe_args(), timeout=bad)


@test
def relative_socket_path_prints_error():
    with FakeProxy(answering(1)) as proxy:
        env = client_env(os.path.basename(proxy.path), "5")
        p = subprocess.run(
            [CLIENT] + probe_args(),
            input=SCRIPT,
            capture_output=True,
            env=env,
            cwd=proxy.dir,  # the relative path would resolve to the live proxy
            timeout=RUN_TIMEOUT,
        )
    check_contract(Run(p.stdout, p.stderr, p.returncode, 0))
    assert proxy.connections == 0, "the proxy was contacted"


@test
def empty_socket_path_prints_error():
    check_rejected_locally(probe_args(), socket_path="")


@test
def overlong_socket_path_prints_error():
    check_rejected_locally(probe_args(), socket_path="/" + "s" * 107)  # 108 bytes: no room for NUL
    check_rejected_locally(probe_args(), socket_path="/" + "s" * 4096)


# Process hygiene.


@test
def closed_stdout_and_stderr_never_become_the_socket():
    """With fds 1 and 2 closed at start, the socket must not land on them.
    The proxy holds the connection while the test looks at the client's fds."""
    seen = {}

    def reply(proxy, conn, request):
        proxy.release.wait(RUN_TIMEOUT)
        conn.sendall(encode_response(1))

    with FakeProxy(reply) as proxy:
        p = subprocess.Popen(
            ["/bin/sh", "-c", 'exec "$0" "$@" 1>&- 2>&-', CLIENT] + probe_args(),
            stdin=subprocess.PIPE,
            env=client_env(proxy.path, "5"),
        )
        try:
            p.stdin.write(SCRIPT)
            p.stdin.close()
            deadline = time.monotonic() + 5
            while not proxy.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            fd_dir = "/proc/%d/fd" % p.pid
            for name in os.listdir(fd_dir):
                try:
                    seen[int(name)] = os.readlink(os.path.join(fd_dir, name))
                except OSError:
                    pass
            proxy.release.set()
            status = p.wait(RUN_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert proxy.requests, "the request never arrived"
    assert status == 0, "exit status %d" % status
    assert seen.get(1) == "/dev/null", "fd 1 is %r" % seen.get(1)
    assert seen.get(2) == "/dev/null", "fd 2 is %r" % seen.get(2)
    sockets = [fd for fd, target in seen.items() if target.startswith("socket:")]
    assert sockets and min(sockets) > 2, "socket fds %r" % sockets


@test
def client_links_only_libc():
    out = subprocess.run(["readelf", "-d", CLIENT], capture_output=True, timeout=RUN_TIMEOUT, check=True)
    needed = []
    for line in out.stdout.decode().splitlines():
        if "(NEEDED)" in line:
            needed.append(line.split("[", 1)[1].rstrip("]"))
    allowed = {"libc.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
    # A sanitizer build links its runtimes; that is the build, not the code.
    sanitizer = {n for n in needed if n.startswith(("libasan.so", "libubsan.so"))}
    extra = set(needed) - allowed - sanitizer
    assert "libc.so.6" in needed, "NEEDED %r" % needed
    assert not extra, "links %r beyond libc" % sorted(extra)


def main():
    failed = 0
    for n, fn in enumerate(TESTS, 1):
        try:
            fn()
            print("ok %d - %s" % (n, fn.__name__))
        except Exception as e:  # every failure is reported, never fatal
            failed += 1
            print("not ok %d - %s" % (n, fn.__name__))
            detail = str(e) if isinstance(e, AssertionError) and str(e) else traceback.format_exc()
            for line in detail.rstrip().splitlines():
                print("# " + line)
        sys.stdout.flush()
    print("1..%d" % len(TESTS))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
