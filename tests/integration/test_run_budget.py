"""`serve --run-bit-budget` (docs/threat-model.md, "The budget bounds the
total"): one bit budget for every repository's calls together, on the
backend the test runs on.

A call on one repository can carry another's data through shared host state
(issue 26: a probe on X filled the dentry cache, probes on Y read it), so
the per-repository figures say what each repository's calls carried, and
the run's bound is their sum.  This test stages two repositories and:

- spends across both until the run's budget is reached exactly, each
  repository staying within its own --bit-budget;
- shows the next call on either repository refused: ERROR, audited refused
  with cause run_bit_budget_spent, not debited, no admission record,
  budget.json unchanged, and nothing copied or launched (an inotify watch on
  the runtime's root and the workspaces, which sees an answered call's
  creations: the control);
- restarts serve (SIGTERM) and shows the refusal still holds on both; a
  restart that drops or raises the budget is refused before it is ready,
  the ledger untouched;
- shows `check` and `status` (human and --json) printing the run's budget
  and what was carried, per repository and for the run."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-runbudget-")

ALPHA, BETA = "acme/alpha", "acme/beta"
YES = "YES"
# Bucketed release at a 60 s timeout: the reachable boundaries are 1 to
# 128 s, eight of them, so a call carries exactly 2 + log2(8) = 5 bits
# (docs/threat-model.md, "What one call is charged"), and a probe that
# should answer never times out on a loaded host.
TIMEOUT = 60
CALL_MB = 5000
# Three calls fill the run's budget.  Each repository may carry 15 bits on
# its own (one more call on either still fits that), so the run's budget, not
# a repository's, refuses the fourth, whichever repository it names.
RUN_BITS = 15
REPO_BITS = 15
FLAGS = ["--release", "bucketed", "--bit-budget", str(REPO_BITS), "--run-bit-budget", str(RUN_BITS)]


def script(tag):
    return f"# {tag}\nimport json\n" + 'with open("/probe/out", "w") as f:\n    json.dump({"result": "YES"}, f)\n'


def frame(repo, text):
    return S.request_frame(repo, S.OUTCOMES, text)


def request(sock_path, repo, text):
    got = S.send_raw(sock_path, frame(repo, text), timeout=180)
    if len(got) == 11 and got[:10] == b"SPRB\x01\x02\x00\x00\x00\x01":
        return "ERROR" if got[10] == 0 else S.OUTCOMES[got[10] - 1] if got[10] <= 3 else repr(got)
    return repr(got)


def ledger_text(state):
    with open(os.path.join(state, "budget.json")) as f:
        return f.read()


def refused_with_nothing_launched(srv, state, repo, tag, label):
    """One call on repo, expected refused by the run's budget before
    anything is copied or launched."""
    before = ledger_text(state)
    S.wait_pool_full(srv, repos=2)  # the refills are serve's own work, not a launch
    ino = S.launch_watch(state, srv.run)
    text = script(tag)
    got = request(srv.socket, repo, text)
    time.sleep(0.3)
    created = ino.events()
    ino.close()
    rec = S.record_of_script(state, text)
    tap.ok(got == "ERROR" and rec is not None and rec["status"] == "refused"
           and rec["cause"] == "run_bit_budget_spent" and "run's bit budget" in (rec["reason"] or "")
           and rec["debited"] is False and rec["launched"] is False and rec["bits"] is None
           and not S.admissions_of_script(state, text),
           f"{label}: a call on {repo} is ERROR, audited refused with cause run_bit_budget_spent, not debited, "
           "not launched, with no admission record", (got, rec))
    tap.ok(not created, f"{label}: nothing was copied or launched for it (no workspace, no container)", created)
    tap.ok(ledger_text(state) == before, f"{label}: budget.json is unchanged by the refusal", ledger_text(state))


def status(state, *extra):
    return subprocess.run([S.PROXY, "status", "--state", state, *extra], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def check(config, state, *extra):
    argv = [S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs, "--probe-ids",
            S.probe_ids(), *extra, *B.serve_args(extra)]
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    beta = work.make_clone("beta", {"README.md": b"beta\n"})
    config = work.write_config([ALPHA, BETA], timeout=TIMEOUT, maxInvocations=20)

    # ---- bad values name the option and the reason ------------------------------
    state = work.new_state()
    for value, extra in (("0", []), ("1000001", []), ("5bits", []), ("-3", []), ("8", ["--release", "immediate"])):
        sock = os.path.join(work.dir, "usage.sock")
        r = subprocess.run([S.PROXY, "serve", "--config", config, "--state", state, "--rootfs", work.rootfs,
                            "--socket", sock, "--run-bit-budget", value, *extra, *B.proxy_args()],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        why = "--release immediate" if extra else "must be an integer from 1 to 1000000 bits"
        tap.ok(r.returncode == 2 and "--run-bit-budget" in r.stderr and why in r.stderr
               and not os.path.exists(sock) and not os.path.exists(os.path.join(state, "budget.json")),
               f"--run-bit-budget {value} {' '.join(extra)}: a usage error (exit 2) naming the option and why, "
               "before anything is created", (r.returncode, r.stderr[:400]))

    # ---- spend across both repositories up to the run's budget -------------------
    state = work.staged_state(config, [(ALPHA, alpha), (BETA, beta)])
    with S.serving(work, config, state, extra=FLAGS) as srv:
        ledger = json.loads(ledger_text(state))
        tap.ok(ledger.get("version") == 3 and ledger.get("run_bit_budget") == RUN_BITS and ledger["used"] == 0,
               f"the run's budget is pinned in budget.json (version 3, run_bit_budget {RUN_BITS}) once serve is ready",
               ledger)
        got = []
        for i, repo in enumerate((ALPHA, BETA, ALPHA)):
            S.wait_pool_full(srv, repos=2)
            ino = S.launch_watch(state, srv.run)
            got.append(request(srv.socket, repo, script(f"spend-{i}")))
            time.sleep(0.3)
            created = ino.events()
            ino.close()
            if i == 0:
                tap.ok(S.launch_events(state, srv.run, created),
                       "control: the inotify watch sees an answered call's workspace or container created", created)
        ledger = json.loads(ledger_text(state))
        per_repo = {n: r["millibits"] for n, r in ledger["repositories"].items()}
        tap.ok(got == [YES] * 3 and per_repo == {ALPHA: 2 * CALL_MB, BETA: CALL_MB}
               and sum(per_repo.values()) == RUN_BITS * 1000,
               f"three calls answer, alpha, beta, alpha: {CALL_MB / 1000} bits each, {RUN_BITS} bits for the run "
               "(its budget exactly, not past it), each repository within its own", (got, ledger))
        # alpha has carried 10 bits of its 15, beta 5: each one's own budget
        # would let it go on.
        refused_with_nothing_launched(srv, state, BETA, "over-run-beta", "run budget reached")
        refused_with_nothing_launched(srv, state, ALPHA, "over-run-alpha", "run budget reached")
        tap.ok(srv.stop() == 0, "serve stops cleanly (SIGTERM)", srv.stderr()[-300:])
    pinned = ledger_text(state)

    # ---- a restart keeps it ------------------------------------------------------
    with S.serving(work, config, state, extra=FLAGS) as srv:
        refused_with_nothing_launched(srv, state, BETA, "after-restart-beta", "after a restart")
        refused_with_nothing_launched(srv, state, ALPHA, "after-restart-alpha", "after a restart")
        tap.ok(srv.stop() == 0, "restarted serve stops cleanly", srv.stderr()[-300:])

    for label, flags, says in (("without --run-bit-budget", FLAGS[:4], "--run-bit-budget is not given"),
                               ("with a larger --run-bit-budget", FLAGS[:4] + ["--run-bit-budget", "30"],
                                "--run-bit-budget is 30 bits")):
        srv = S.Serve(work, config, state, extra=flags)
        try:
            ready = srv.start()
            err = srv.stderr()
        finally:
            srv.cleanup()
        tap.ok(not ready and srv.returncode == 1 and f"holds a run bit budget of {RUN_BITS} bits" in err
               and says in err and ledger_text(state) == pinned,
               f"a restart {label} is refused before it is ready, naming both budgets; the ledger untouched",
               (ready, srv.returncode, err[-400:]))

    # ---- check and status show it ---------------------------------------------------
    r = check(config, state, *FLAGS)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = {}
    seeds = {s["repo"]: s.get("bits_carried") for s in report.get("seeds", [])}
    tap.ok(r.returncode == 0 and report.get("run_bit_budget") == RUN_BITS
           and report.get("run_bits_carried") == RUN_BITS and report.get("run_unbounded_calls") == 0
           and report.get("bit_budget") == REPO_BITS and seeds == {ALPHA: 10, BETA: 5},
           f"check prints the run's budget ({RUN_BITS}), the bits carried by every call ({RUN_BITS}) and by each "
           "repository's (10, 5)", r.stdout + r.stderr)
    r = check(config, state, *FLAGS[:4])
    tap.ok(r.returncode == 1 and "run bit budget" in r.stderr and r.stdout == "",
           "check without the run's budget is refused as serve is", r.stderr)

    j = status(state, "--json")
    try:
        doc = json.loads(j.stdout)
    except ValueError:
        doc = {}
    b = doc.get("budget") or {}
    tap.ok(j.returncode == 0 and b.get("run_bit_budget") == RUN_BITS and b.get("run_bits_carried") == RUN_BITS
           and b.get("run_unbounded_calls") == 0 and b.get("ledger_version") == 3
           and {x["repo"]: x["bits"] for x in doc.get("repositories", [])} == {ALPHA: 10, BETA: 5}
           and doc.get("failure_causes", {}).get("run_bit_budget_spent") == 4,
           "status --json shows the run's budget, the bits carried for the run and per repository, and the four "
           "refusals by their cause", j.stdout + j.stderr)
    h = status(state)
    tap.ok(h.returncode == 0
           and f"15.000 carried by every repository's calls together, 0.000 left, of {RUN_BITS} " in h.stdout
           and "10.000 bits carried by its calls" in h.stdout and "5.000 bits carried by its calls" in h.stdout,
           "status shows the run's bits carried, what is left and the budget, and each repository's bits as "
           "carried by its calls", h.stdout + h.stderr)
finally:
    work.close()
tap.finish()
