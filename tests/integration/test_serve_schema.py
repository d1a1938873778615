"""Finite answer schemas and sensitivity classes end to end (issue 31;
docs/answer-schemas.md, docs/protocol.md "Version 2", docs/config.md
"Sensitivity classes"), on the backend the test runs on.

One serve, bucketed release at a 60 s timeout (eight reachable boundaries:
3 timing bits a call), three repositories: `acme/plain` (a plain string
entry, unmetered), `acme/conf` (`confidential`: 8 bits) and `acme/sealed`
(`sealed`).  It shows:

- a schema probe (an integer 0..1000) answered through a raw v2 frame and
  through the real client with the true count, in canonical form, whatever
  spacing and escapes the script wrote; charged ceil(log2(1002)) = 10
  content bits plus 3, in the audit (`content_bits`, `bits`, the schema's
  digest, the canonical value as `result`) and in budget.json;
- an object schema's value written noisily comes back canonical;
- outputs outside the schema (out of range, a float, an extra key, no
  envelope) are ERROR, cause probe_output, still charged;
- a schema over the cardinality bound, or malformed, is ERROR, cause
  bad_request, not debited, not launched, budget.json unchanged;
- the three-outcome form on the same serve is unchanged: 2 content bits;
- `confidential`: one 5-bit schema call (N = 20) fits its 8 bits exactly;
  the next call, three outcomes, would pass it: ERROR, bit_budget_spent,
  before anything is copied or launched;
- `sealed`: ERROR, cause sealed, not debited, no admission record, nothing
  launched, no pool sandbox ever made for it;
- serve refuses to start when a metered class meets --release immediate,
  or when every repository is sealed, naming why, before it is ready.

The v2 frames are built here from docs/protocol.md, independently of
protocol.c."""

import hashlib
import json
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-schema-")

PLAIN, CONF, SEALED = "acme/plain", "acme/conf", "acme/sealed"
TIMEOUT = 60
TIMING_MB = 3000  # log2(8 boundaries), in millibits
FLAGS = ["--release", "bucketed"]

COUNT_SCHEMA = '{"type":"integer","minimum":0,"maximum":1000}'
OBJECT_SCHEMA = ('{"type":"object","fields":{"found":{"type":"boolean"},'
                 '"count":{"type":"integer","minimum":0,"maximum":9}}}')
# 64 items of 2^53 values each: far above 2^1024.
HUGE_SCHEMA = ('{"type":"array","length":64,"items":{"type":"integer","minimum":0,'
               '"maximum":9007199254740991}}')
N_FILES = 37


def v2_request(repo, schema, script):
    enc = (lambda v: v.encode() if isinstance(v, str) else v)
    body = S.field(1, enc(repo)) + S.field(4, enc(schema)) + S.field(3, enc(script))
    return S.frame(body, version=2)


def v2_answer(got):
    """The value a v2 response carries, "ERROR", or its repr when it breaks
    the format."""
    if len(got) < 11 or got[:6] != b"SPRB\x02\x02":
        return repr(got)
    (length,) = struct.unpack(">I", got[6:10])
    body = got[10:]
    if length != len(body):
        return repr(got)
    if body == b"\x00":
        return "ERROR"
    if body[:1] == b"\x01" and len(body) > 1:
        return body[1:].decode("utf-8", "replace")
    return repr(got)


def ask(srv, repo, schema, script):
    return v2_answer(S.send_raw(srv.socket, v2_request(repo, schema, script), timeout=180, limit=9000))


def writes(text):
    """A script that writes text to /probe/out, tagged so that its audit
    record is its own."""
    return f"# {hashlib.sha256(text.encode()).hexdigest()[:8]}\nwith open('/probe/out', 'w') as f:\n" \
           f"    f.write({text!r})\n"


COUNT_SCRIPT = """import json, os
n = sum(1 for d, _, fs in os.walk('/probe/repo') if '/.git' not in d for f in fs if f.endswith('.py'))
with open('/probe/out', 'w') as f:
    f.write('{ "\\\\u0072esult" :  %d }\\n' % n)
"""


def line_value(out):
    """The client's line as a value: "ERROR", or the line itself."""
    return "ERROR" if out == S.ERROR_LINE else out


def newest_refusal(state):
    """The newest record: a request refused off the slots is logged before
    its fields are (docs/audit.md), so its script cannot name it."""
    recs = S.audit_lines(state)
    return recs[-1] if recs else None


def ledger(state):
    with open(os.path.join(state, "budget.json")) as f:
        return f.read()


def repo_millibits(state, repo):
    return (json.loads(ledger(state)).get("repositories", {}).get(repo) or {}).get("millibits", 0)


def refused_before_launch(srv, state, send, script, cause, label, why, off_slots=False, repos=2):
    """One call expected refused with cause before anything is debited,
    copied or launched; off_slots: refused with the frame's checks, before
    its fields are logged."""
    before = ledger(state)
    S.wait_pool_full(srv, repos=repos)  # the refills are serve's own work, not a launch
    ino = S.launch_watch(state, srv.run)
    got = send()
    time.sleep(0.3)
    created = S.launch_events(state, srv.run, ino.events())
    ino.close()
    rec = newest_refusal(state) if off_slots else S.record_of_script(state, script)
    tap.ok(got == "ERROR" and rec is not None and rec["status"] == "refused" and rec["cause"] == cause
           and why in (rec["reason"] or "") and rec["debited"] is False and rec["launched"] is False
           and rec["bits"] is None and rec["content_bits"] is None and not S.admissions_of_script(state, script)
           and (not off_slots or (rec["answer_schema"] is None and rec["script_sha256"] is None))
           and not S.audit_key_problems(rec),
           f"{label}: ERROR, audited refused with cause {cause}, not debited, not launched, no admission record",
           (got, rec))
    tap.ok(not created, f"{label}: nothing was copied or launched for it", created)
    tap.ok(ledger(state) == before, f"{label}: budget.json is unchanged", ledger(state))


def start_refused(config, state, extra, says, label):
    srv = S.Serve(work, config, state, extra=extra)
    try:
        ready = srv.start()
        err = srv.stderr()
    finally:
        srv.cleanup()
    tap.ok(not ready and srv.returncode == 1 and says in err, f"{label}: serve refuses to start, saying why",
           (ready, srv.returncode, err[-500:]))


try:
    files = {f"pkg/m{i}.py": b"x = 1\n" for i in range(N_FILES)}
    files["README.md"] = b"not python\n"
    plain = work.make_clone("plain", files)
    conf = work.make_clone("conf", {"a.py": b"a\n"})
    sealed = work.make_clone("sealed", {"s.py": b"SECRET\n"})
    config = work.write_config([PLAIN, {"repo": CONF, "sensitivity": "confidential"},
                                {"repo": SEALED, "sensitivity": "sealed"}], timeout=TIMEOUT, maxInvocations=50)
    state = work.staged_state(config, [(PLAIN, plain), (CONF, conf), (SEALED, sealed)])

    with S.serving(work, config, state, extra=FLAGS) as srv:
        # ---- a schema probe, raw v2 -------------------------------------------------
        S.wait_pool_full(srv, repos=2)
        ino = S.launch_watch(state, srv.run)
        got = ask(srv, PLAIN, COUNT_SCHEMA, COUNT_SCRIPT)
        time.sleep(0.3)
        created = S.launch_events(state, srv.run, ino.events())
        ino.close()
        tap.ok(created, "control: the inotify watch sees an answered call's workspace or container created",
               created)
        rec = S.record_of_script(state, COUNT_SCRIPT)
        want_bits = math.ceil(math.log2(1001 + 1))
        tap.ok(got == str(N_FILES), f"a v2 request counting .py files answers {N_FILES}, canonically "
               "(the script wrote spaces, an escaped key and a newline)", got)
        tap.ok(rec is not None and not S.audit_key_problems(rec) and rec["status"] == "answered"
               and rec["outcomes"] is None and rec["result"] == str(N_FILES)
               and rec["answer_schema"] == S.sha256_tag(COUNT_SCHEMA)
               and rec["content_bits"] == want_bits and rec["bits"] == want_bits + TIMING_MB / 1000
               and rec["timing_bits"] == TIMING_MB / 1000,
               f"its audit record: the schema's digest, the canonical value, {want_bits} content bits "
               "(ceil(log2(N + 1)), N = 1001) plus 3 timing bits", (rec, S.audit_key_problems(rec or {})))
        tap.ok(repo_millibits(state, PLAIN) == want_bits * 1000 + TIMING_MB,
               f"budget.json charges {PLAIN} {want_bits + 3} bits for it", ledger(state))

        # ---- through the real client ------------------------------------------------
        r = srv.client(COUNT_SCRIPT + "# client\n", PLAIN, schema=COUNT_SCHEMA)
        tap.ok(r.returncode == 0 and r.stderr == b"" and r.stdout == b'{"result":%d}\n' % N_FILES,
               "the real client with the schema prints one line {\"result\":37}, exit 0, nothing on stderr",
               (r.returncode, r.stdout, r.stderr))

        # ---- an object's value, written noisily, comes back canonical ---------------
        noisy = writes('{"result": {"count": 7, "found" : true}}')
        got = ask(srv, PLAIN, OBJECT_SCHEMA, noisy)
        rec = S.record_of_script(state, noisy)
        tap.ok(got == '{"found":true,"count":7}' and rec is not None and rec["content_bits"] == 5
               and rec["result"] == got,
               "an object schema (N = 20) answers the canonical value, fields in the schema's order, for 5 "
               "content bits", (got, rec))

        # ---- outputs outside the schema: ERROR, still charged ------------------------
        for label, text in (("out of range", '{"result": 1001}'), ("a float", '{"result": 3.0}'),
                            ("a leading zero", '{"result": 07}'), ("no envelope", "37"),
                            ("an extra key", '{"result": 3, "SECRET": 1}'), ("a string", '{"result": "37"}')):
            script = writes(text)
            before = repo_millibits(state, PLAIN)
            got = ask(srv, PLAIN, COUNT_SCHEMA, script)
            rec = S.record_of_script(state, script)
            tap.ok(got == "ERROR" and rec is not None and rec["status"] == "probe"
                   and rec["cause"] == "probe_output" and rec["debited"] is True
                   and repo_millibits(state, PLAIN) == before + want_bits * 1000 + TIMING_MB
                   and "SECRET" not in json.dumps(rec),
                   f"an output outside the schema ({label}) is ERROR, cause probe_output, charged all the same",
                   (got, rec))

        # ---- schemas refused before the debit ----------------------------------------
        for label, schema, why in (("above 2^1024 answers", HUGE_SCHEMA, "answer schema"),
                                   ("malformed", '{"type":"integer","minimum":5,"maximum":1}', "answer schema"),
                                   ("not JSON", "{'type': 'boolean'}", "answer schema")):
            script = f"# refused {label}\nprint(1)\n"
            refused_before_launch(srv, state, lambda schema=schema, script=script: ask(srv, PLAIN, schema, script),
                                  script, "bad_request", f"a schema {label}", why, off_slots=True)

        # ---- the three-outcome form is unchanged -------------------------------------
        v1 = "# v1\nimport json\nwith open('/probe/out', 'w') as f:\n    json.dump({'result': 'YES'}, f)\n"
        out = srv.probe(v1, PLAIN)
        rec = S.record_of_script(state, v1)
        tap.ok(out == S.answer("YES") and rec is not None and rec["answer_schema"] is None
               and rec["outcomes"] == list(S.OUTCOMES) and rec["result"] == "YES" and rec["content_bits"] == 2,
               "a v1 request on the same serve answers as before, for 2 content bits", (out, rec))

        # ---- confidential: 8 bits ----------------------------------------------------
        script = writes('{"result": {"found": false, "count": 0}}')
        got = ask(srv, CONF, OBJECT_SCHEMA, script)
        rec = S.record_of_script(state, script)
        tap.ok(got == '{"found":false,"count":0}' and rec is not None and rec["bits"] == 8
               and repo_millibits(state, CONF) == 8000,
               f"{CONF} (confidential, 8 bits): a 5-bit schema call plus 3 timing bits fits exactly", (got, rec))
        v1c = v1 + "# conf\n"
        refused_before_launch(srv, state, lambda: line_value(srv.probe(v1c, CONF)), v1c, "bit_budget_spent",
                              f"{CONF}: the next call (5 bits) would pass 8", "bit budget (8 bits)")

        # ---- sealed: never runs ------------------------------------------------------
        sealed_script = "# sealed\nprint(open('/repo/s.py').read())\n"
        refused_before_launch(srv, state, lambda: line_value(srv.probe(sealed_script, SEALED)), sealed_script,
                              "sealed", f"{SEALED} (sealed)", "sealed")
        S.wait_pool_full(srv, repos=2)
        time.sleep(0.5)
        members = S.pool_members(state, srv.run, srv.pid)
        tap.ok(len(members) == S.pool_expected(repos=2),
               "the pool holds sandboxes for the two repositories that may run, none for the sealed one",
               (sorted(members), S.pool_expected(repos=2)))
        tap.ok(SEALED not in json.loads(ledger(state)).get("repositories", {}),
               "budget.json never names the sealed repository", ledger(state))
        tap.ok(srv.stop() == 0, "serve stops cleanly", srv.stderr()[-300:])
        left = S.leaks(state, srv.run, after_exit=True, srv=srv)
        tap.ok(not left, "nothing is left behind", left)

    # ---- the firewall's enclaves document -----------------------------------------
    # Its runtimes are the firewall's (docker, gvisor, sbx); runc is named only
    # in a sealedProbes block (docs/config.md).
    if B.runtime not in ("docker", "gvisor", "sbx"):
        tap.skip("an enclaves document serves a schema probe and holds its maxScriptBytes",
                 f"an enclaves document cannot name the {B.runtime} runtime (the firewall's are docker, gvisor, sbx)")
    else:
        enclaves = work.path("enclaves") + ".json"
        with open(enclaves, "w") as f:
            json.dump({"enclaves": [{"script": {"maxScriptBytes": 400},
                                     "repos": [{"repo": PLAIN, "sensitivity": "internal"}],
                                     "runtime": B.runtime, "timeout": TIMEOUT, "maxInvocations": 10}]}, f)
        state3 = work.staged_state(enclaves, [(PLAIN, plain)])
        with S.serving(work, enclaves, state3, extra=FLAGS) as srv:
            got = ask(srv, PLAIN, COUNT_SCHEMA, COUNT_SCRIPT)
            rec = S.record_of_script(state3, COUNT_SCRIPT)
            tap.ok(got == str(N_FILES) and rec is not None and rec["bits"] == want_bits + 3,
                   "an enclaves document: its repository (internal) answers a schema probe, charged as any",
                   (got, rec))
            long_script = COUNT_SCRIPT + "#" * 400
            refused_before_launch(srv, state3, lambda: ask(srv, PLAIN, COUNT_SCHEMA, long_script), long_script,
                                  "bad_request", "an enclaves document: a script over its maxScriptBytes (400)",
                                  "more than the config's 400", off_slots=True, repos=1)
            tap.ok(srv.stop() == 0, "the enclaves document's serve stops cleanly", srv.stderr()[-300:])

    # ---- refusals at start -----------------------------------------------------------
    start_refused(config, state, ["--release", "immediate"], "leaks timing without bound",
                  "a confidential repository under --release immediate")
    only_sealed = work.write_config([{"repo": SEALED, "sensitivity": "sealed"}], timeout=TIMEOUT)
    state2 = work.staged_state(only_sealed, [(SEALED, sealed)])
    start_refused(only_sealed, state2, FLAGS, "every repository is `sealed`", "a config whose every repository is sealed")
finally:
    work.close()
tap.finish()
