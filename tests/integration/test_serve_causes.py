"""`serve` tells the causes of a failure apart in the audit log
(docs/audit.md, "status"; docs/runtimes.md, "One run"), while the agent gets
the same ERROR bytes for each: the runtime (runc, runsc) failing to create
the sandbox is `runtime`, a runtime binary made unusable under a running
serve is `environment`, and the probe's own exit 1 (the status runc itself
exits with when it fails) is `probe`."""

import os
import shutil
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, require_root_and  # noqa: E402

B = backend()
require_root_and("git")
import sp_serve as S  # noqa: E402

tap = Tap()
work = S.Work("sp-serve-causes-")
YES = S.answer("YES")
QUICK = S.answer_script("YES")
EXIT1 = "import sys\nsys.exit(1)\n"
# The runtime binary's copy lives where verify accepts it: every directory up
# to / root's and not writable by others (/tmp is not).
bindir = f"/run/sp-causes-{uuid.uuid4().hex[:12]}"


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
    runtime = os.path.join(bindir, "bin", B.binary_name)
    shutil.copy2(B.binary, runtime)
    os.chmod(runtime, 0o755)
    name = B.binary_name
    errors = set()
    with S.serving(work, config, state, binary=runtime) as srv:
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
        tap.ok(rec and rec["status"] == "runtime" and f"{name} create" in (rec["reason"] or "")
               and rec["exit"] is None,
               f"{name} create fails: audited status runtime, naming {name} create, with no exit status of a probe",
               rec)
        tap.ok(srv.probe(QUICK, "acme/alpha") == YES, f"{name} create fails: the next probe answers")

        # The runtime binary is made unusable under the running serve.
        os.chmod(runtime, 0o644)
        try:
            line, raw, rec = ask(srv, EXIT1)
        finally:
            os.chmod(runtime, 0o755)
        errors |= {line, raw}
        tap.ok(line == S.ERROR_LINE.encode() and raw == S.ERROR_FRAME,
               "runtime binary unusable: the agent gets ERROR", (line, raw))
        tap.ok(rec and rec["status"] == "environment" and runtime in (rec["reason"] or "") and not rec["launched"],
               "runtime binary unusable: audited status environment, naming the binary, nothing launched", rec)
        tap.ok(srv.probe(QUICK, "acme/alpha") == YES, "runtime binary usable again: the next probe answers")
        tap.ok(errors == {S.ERROR_LINE.encode(), S.ERROR_FRAME},
               "every cause gives the agent the same bytes (one client line, one raw frame)", errors)
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
finally:
    shutil.rmtree(bindir, ignore_errors=True)
    work.close()
tap.finish()
