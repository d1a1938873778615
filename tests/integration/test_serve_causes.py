"""`serve` tells the causes of a failure apart in the audit log
(docs/audit.md, "status"; docs/runtimes.md, "One run"), while the agent gets
the same ERROR bytes for each: the runtime (runc, runsc) failing to create
the sandbox is `runtime`, a runtime binary made unusable under a running
serve is `environment`, and the probe's own exit 1 (the status runc itself
exits with when it fails) is `probe`.

Under docker there is no binary: the daemon refusing the create (a
container of the test's own already holds the name serve gives, so the
Engine API answers 409) is `runtime`, and the unusable runtime is the daemon
going away under a running serve: serve talks to it through a forwarding
socket the test owns, which stops answering (its listener closed, as a dead
daemon leaves its socket file) for one request.

Under sbx (its TEST DOUBLE, tests/doubles/sbx/sbx, in a copy of its own):
`sbx create` failing (a VM of the test's own already holds the name serve
gives) is `runtime`, the sbx binary made unusable under a running serve is
`environment`, as for runc; and the CLI running but refusing every command
(the double's `unauthenticated` mode: signed out, or its daemon not
answering, which the CLI reports only by exiting 1) is `environment`, as
docker's unreachable daemon: after a failed create serve asks `sbx ls`, and
when that fails too, nothing can have been launched."""

import contextlib
import json
import os
import shutil
import socket
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()


def made_ahead(rec):
    """Whether the record's probe was given a sandbox made ahead of its
    request (`sandbox` pN, docs/audit.md): its container was created then."""
    return bool(rec and S.POOL_NAME.fullmatch(rec.get("sandbox") or ""))
work = S.Work("sp-serve-causes-")
YES = S.answer("YES")
QUICK = S.answer_script("YES")
EXIT1 = "import sys\nsys.exit(1)\n"
# The runtime binary's copy lives where verify accepts it: every directory up
# to / root's and not writable by others (/tmp is not).
bindir = f"/run/sp-causes-{uuid.uuid4().hex[:12]}"


class Forwarder:
    """A Unix socket that forwards every connection to the daemon's socket
    (upstream) while it is up; down() closes its listener, so that a connect
    is refused, as at a dead daemon's socket file; up() listens again."""

    def __init__(self, path, upstream):
        self.path, self.upstream = path, upstream
        self.listener = None
        self.up()

    def up(self):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(self.path)
        os.chmod(self.path, 0o600)
        ls.listen(64)
        self.listener = ls
        threading.Thread(target=self._accept, args=(ls,), daemon=True).start()

    def down(self):
        ls, self.listener = self.listener, None
        if ls is not None:
            with contextlib.suppress(OSError):
                ls.shutdown(socket.SHUT_RDWR)
            ls.close()

    def _accept(self, ls):
        while True:
            try:
                conn, _ = ls.accept()
            except OSError:
                return
            try:
                up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                up.connect(self.upstream)
            except OSError:
                conn.close()
                continue
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self):
        self.down()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def last_result(state, run):
    lines = S.audit_lines(state, run)
    return lines[-1] if lines else None


def ask(srv, script):
    """(client line, raw response frame, the result record of the raw one)."""
    line = srv.client(script, "acme/alpha", timeout=60).stdout
    raw = srv.raw(S.request_frame("acme/alpha", S.OUTCOMES, script))
    rec = last_result(srv.state, srv.run)
    return line, raw, (rec if rec and not S.audit_key_problems(rec) else {"problems": S.audit_key_problems(rec or {}),
                                                                         "record": rec})


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=10, maxInvocations=1000)
    state = work.staged_state(config, [("acme/alpha", alpha)])
    os.makedirs(os.path.join(bindir, "bin"), mode=0o755)
    if B.runtime_is_daemon:
        # The daemon, through a socket of the test's own that can go away.
        runtime = os.path.join(bindir, "docker.sock")
        forwarder = Forwarder(runtime, B.socket)
        name = "docker"
    else:
        runtime = os.path.join(bindir, "bin", B.binary_name)
        shutil.copy2(B.binary, runtime)
        os.chmod(runtime, 0o755)
        name = B.binary_name
        if B.double:
            # The launcher imports the double from beside itself.
            shutil.copy2(os.path.join(os.path.dirname(B.binary), "sbx_double.py"), os.path.join(bindir, "bin"))
            # The double reads double.json beside itself: the copy's is the
            # installed one's (the same VMs, log and template), its mode the
            # test's to change.
            with open(os.path.join(os.path.dirname(B.binary), "double.json")) as f:
                double_conf = json.load(f)

            def copy_mode(mode):
                tmp = os.path.join(bindir, "bin", ".double.json.tmp")
                with open(tmp, "w") as f:
                    json.dump(dict(double_conf, mode=mode), f)
                os.replace(tmp, os.path.join(bindir, "bin", "double.json"))
            copy_mode("capable")
    errors = set()
    # --pool 0: the create failures below need a request's own create (a
    # sandbox made ahead was created before the id was taken).  A sandbox
    # made ahead whose runtime stops working is test_pool.py's.
    with S.serving(work, config, state, binary=runtime, extra=["--pool", "0"]) as srv:
        tap.ok(srv.probe(QUICK, "acme/alpha") == YES, "control: a probe answers")

        # The probe's own failure: exit 1.
        line, raw, rec = ask(srv, EXIT1)
        errors |= {line, raw}
        tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME, "probe exits 1: the agent gets ERROR",
               (line, raw))
        tap.ok(rec and rec["status"] == "probe" and rec["exit"] == 1 and rec["launched"],
               "probe exits 1: audited status probe, exit 1", rec)

        # The runtime fails to create the sandbox: the container id it is
        # given is taken (its --root already holds state for it).  Two
        # requests: the client's and the raw frame's, in that order.
        last = S.audit_id_inv(S.audit_lines(srv.state, srv.run)[-1])
        taken = [B.occupy(B.run_root(state, srv.run), f"sp-{srv.run}-{last + k}") for k in (1, 2)]
        line, raw, rec = ask(srv, EXIT1)
        errors |= {line, raw}
        for t in taken:
            B.release(t)
        tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME, f"{name} create fails: the agent gets ERROR",
               (line, raw))
        # (docker's reason: "docker: create `sp-<run>-<inv>`: ...", the daemon's 409)
        create_words = B.create_reason
        tap.ok(rec and rec["status"] == "runtime" and create_words in (rec["reason"] or "")
               and rec["exit"] is None,
               f"{name} create fails: audited status runtime, naming {name} create, with no exit status of a probe",
               rec)
        tap.ok(srv.probe(QUICK, "acme/alpha") == YES, f"{name} create fails: the next probe answers")

        if B.runtime_is_daemon:
            # The daemon goes away under the running serve: its socket stops
            # answering (connections refused) for one request.
            forwarder.down()
            try:
                line, raw, rec = ask(srv, EXIT1)
            finally:
                forwarder.up()
            errors |= {line, raw}
            tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME,
                   "docker: the daemon stops answering: the agent gets ERROR", (line, raw))
            # The docker form of "the runtime binary cannot be executed any
            # more" (docs/audit.md, "environment"): the host's, not the
            # runtime's; and as there, nothing reached the runtime.
            tap.ok(rec and rec["status"] == "environment" and "environment:" in (rec["reason"] or "")
                   and "daemon" in (rec["reason"] or "") and rec["exit"] is None,
                   "docker: the daemon stops answering: audited status environment, the reason naming the daemon, "
                   "no exit status of a probe", rec)
            tap.ok(rec and rec["launched"] is made_ahead(rec),
                   "docker: the daemon stops answering: nothing launched (no request reached it), but for the "
                   "container made ahead of the request, while it still answered", rec)
            tap.ok(rec and runtime not in (rec["reason"] or "") and B.socket not in (rec["reason"] or ""),
                   "docker: the daemon stops answering: the reason names no socket path", rec)
            tap.ok(srv.probe(QUICK, "acme/alpha") == YES, "docker: the daemon answers again: the next probe answers")
        else:
            # The runtime binary is made unusable under the running serve.
            os.chmod(runtime, 0o644)
            try:
                line, raw, rec = ask(srv, EXIT1)
            finally:
                os.chmod(runtime, 0o755)
            errors |= {line, raw}
            tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME,
                   "runtime binary unusable: the agent gets ERROR", (line, raw))
            tap.ok(rec and rec["status"] == "environment" and runtime in (rec["reason"] or "")
                   and rec["launched"] is made_ahead(rec),
                   "runtime binary unusable: audited status environment, naming the binary, nothing launched "
                   "(but the container made ahead of the request, while the binary still ran)", rec)
            tap.ok(srv.probe(QUICK, "acme/alpha") == YES, "runtime binary usable again: the next probe answers")
        if B.double:
            # The CLI runs but refuses every command, as when it is signed
            # out or its daemon does not answer: it says so only by exiting 1
            # (`Error: not signed in`), so serve sees a failed create.
            copy_mode("unauthenticated")
            try:
                line, raw, rec = ask(srv, EXIT1)
            finally:
                copy_mode("capable")
            errors |= {line, raw}
            tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME,
                   "sbx refuses every command (signed out, or its daemon down): the agent gets ERROR", (line, raw))
            tap.ok(rec and rec["status"] == "environment" and "sbx create" in (rec["reason"] or "")
                   and "`sbx ls` fails too" in (rec["reason"] or "") and rec["launched"] is False
                   and rec["exit"] is None,
                   "sbx refuses every command: audited status environment, naming sbx create and the failing "
                   "`sbx ls` (its daemon or sign-in unreachable), nothing launched, no exit status", rec)
            tap.ok(srv.probe(QUICK, "acme/alpha") == YES, "sbx answers again: the next probe answers")
        tap.ok(errors == {S.ERROR_LINE.encode(), S.ERROR_FRAME},
               "every cause gives the agent the same bytes (one client line, one raw frame)", errors)
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
finally:
    if B.runtime_is_daemon and "forwarder" in globals():
        forwarder.close()
    shutil.rmtree(bindir, ignore_errors=True)
    work.close()
tap.finish()
