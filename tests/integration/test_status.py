"""`sealed-probe-proxy status [--state DIR] [--json]` (docs/operations.md,
"status") against a real serve on the backend the test runs on: after
probes with known outcomes (answers, a probe's exit, an invalid /probe/out,
an unknown repository), with serve live (status takes no lock, blocks
nothing, writes nothing), after a clean restart (SIGTERM: the budget goes
on, a new run begins), and after kill -9 with a probe in flight (its
admission unfinished; a torn last line tolerated; the spent budget refused
by the next serve); human and JSON output agree with the ledger and the
audit log.  Against a live serve with --pool 1, --bit-budget and
--run-bit-budget: the holder (pid, run, backend, release mode), the waiting
sandboxes, a seed's drift from its clone (a commit made after staging) and
the ceilings, in text and JSON; a stale serve.json (a kill -9 left it) is
said and ignored; serve's stderr, under JOURNAL_STREAM, carries a priority
on every line and one debug line per request; STATUS= counts a result only
once it is released, and holds counts only.  The canary: the scripts, the
outcomes, the probes' output, the repository and the staging credential
carry ghp_CANARY-style tokens, and no output of status, and no line of
serve's stderr, holds any of them."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-status-")
nonce = uuid.uuid4().hex[:16]

ALPHA, BETA, NOPE = "acme/alpha", "acme/beta", "acme/nope"
SCRIPT_CANARY = f"ghp_CANARYscript{nonce}"
OUTCOME_CANARY = f"ghp_CANARYoutcome{nonce}"
OUTPUT_CANARY = f"ghp_CANARYoutput{nonce}"
REPO_CANARY = f"ghp_CANARYrepo{nonce}"
STAGE_CANARY = f"ghp_CANARYstage{nonce}"
CANARIES = [SCRIPT_CANARY, OUTCOME_CANARY, OUTPUT_CANARY, REPO_CANARY, STAGE_CANARY, "CANARY"]
OUTCOMES = (f"YES-{OUTCOME_CANARY}", "NO", "UNKNOWN")
LIMIT = 6
MILLIBITS_PER_CALL = 2000  # immediate release: 2 content bits, timing unbounded
OUTCOME_KEYS = ["answered", "refused", "probe", "timed_out", "runtime", "environment", "internal", "cancelled"]


def answering(index, tag):
    """Answers OUTCOMES[index], after printing canaries (stdout is discarded)."""
    return (f"# {SCRIPT_CANARY} {tag}\nimport json\nprint({OUTPUT_CANARY!r})\n"
            f"json.dump({{'result': {OUTCOMES[index]!r}}}, open('/probe/out', 'w'))\n")


EXITING = f"# {SCRIPT_CANARY} exit\nimport sys\nprint({OUTPUT_CANARY!r})\nsys.exit(3)\n"
BAD_OUTPUT = (f"# {SCRIPT_CANARY} bad output\nimport json\n"
              f"json.dump({{'result': {OUTPUT_CANARY!r}}}, open('/probe/out', 'w'))\n")
SLEEPING = f"# {SCRIPT_CANARY} sleep\nimport time\ntime.sleep(60)\n"

outputs = []  # every status output, for the canary check at the end
serve_stderrs = []  # every serve's stderr, for the same check
DEFAULT_STATE = "/var/lib/sealed-probe/state"


def status(state, *extra):
    r = subprocess.run([S.PROXY, "status", "--state", state, *extra], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    outputs.append(r.stdout + r.stderr)
    return r


def both(state):
    """(human stdout, parsed JSON or None, detail) of status run twice."""
    h = status(state)
    j = status(state, "--json")
    try:
        doc = json.loads(j.stdout) if j.returncode == 0 and j.stdout.count("\n") == 1 else None
    except ValueError:
        doc = None
    return h.stdout if h.returncode == 0 else None, doc, f"human rc {h.returncode}: {h.stdout}{h.stderr}\n" \
        f"json rc {j.returncode}: {j.stdout}{j.stderr}"


def human_fields(text):
    """What the human lines say: budget, repositories, latest run, counts."""
    out = {"repos": {}, "failures": []}
    for line in (text or "").splitlines():
        m = re.match(r"^budget\s+(\d+) used, (\d+) left, of (\d+) ", line)
        if m:
            out["budget"] = tuple(int(x) for x in m.groups())
        m = re.match(r"^run bits\s+([0-9]+\.[0-9]{3}) carried by every repository's calls together", line)
        if m:
            out["run_bits"] = float(m.group(1))
        m = re.match(r"^repository\s+(\S+)\s+(\d+) invocations, ([0-9]+\.[0-9]{3}) bits carried by its calls",
                     line)
        if m:
            out["repos"][m.group(1)] = (int(m.group(2)), float(m.group(3)))
        m = re.match(r"^latest run\s+([0-9a-z]+), ", line)
        if m:
            out["latest"] = m.group(1)
        for label, key in (("  outcomes", "latest_counts"), ("all runs", "all_counts")):
            if line.startswith(label):
                out[key] = {k: int(v) for k, v in re.findall(r"([a-z_]+) (\d+)", line)}
        m = re.match(r"^audit log\s+(\d+) records in (\d+) runs", line)
        if m:
            out["records"], out["runs"] = int(m.group(1)), int(m.group(2))
        m = re.match(r"^  (\S+Z)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m:
            out["failures"].append(m.groups())
    return out


def expected(state):
    """What status should say, computed here from budget.json and the audit
    log independently of status."""
    with open(os.path.join(state, "budget.json")) as f:
        ledger = json.load(f)
    recs = S.audit_lines(state, admissions=True)
    runs = []
    for r in recs:
        if not runs or runs[-1] != r["run"]:
            runs.append(r["run"])

    def counts(rs):
        c = {k: 0 for k in OUTCOME_KEYS}
        for r in rs:
            if r["status"] != "admitted":
                c[r["status"]] += 1
        adm = len([r for r in rs if r["status"] == "admitted"])
        done = len([r for r in rs if r["status"] != "admitted" and r["debited"]])
        return {"outcomes": c, "admitted": adm, "unfinished": max(adm - done, 0)}

    per_run = [counts([r for r in recs if r["run"] == run]) for run in runs]
    all_runs = counts(recs)
    all_runs["unfinished"] = sum(c["unfinished"] for c in per_run)
    invocations = {}
    for r in recs:
        if r["status"] == "admitted":
            invocations[r["repo"]] = invocations.get(r["repo"], 0) + 1
    repos = sorted(set(invocations) | set(ledger["repositories"]))
    failures = [r for r in recs if r["status"] not in ("admitted", "answered")]
    return {
        "budget": {"limit": ledger["limit"], "used": ledger["used"], "left": ledger["limit"] - ledger["used"],
                   "ledger_version": ledger["version"], "run_bit_budget": ledger.get("run_bit_budget"),
                   # The run's: every repository's calls together.
                   "run_bits_carried": sum(r["millibits"] for r in ledger["repositories"].values()) / 1000,
                   "run_unbounded_calls": sum(r["unbounded_calls"] for r in ledger["repositories"].values())},
        "repositories": [{"repo": n, "invocations": invocations.get(n, 0),
                          "bits": ledger["repositories"][n]["millibits"] / 1000,
                          "unbounded_calls": ledger["repositories"][n]["unbounded_calls"]} for n in repos],
        "records": len(recs), "runs": len(runs), "latest_run": runs[-1] if runs else None,
        "latest": per_run[-1] if per_run else None, "all_runs": all_runs,
        "failures": [(r["finished"], r["id"], r["repo"], r["status"]) for r in failures][-10:],
        "failures_total": len(failures),
    }


def check(state, label, want_latest=None, want_causes=None, want_used=None):
    """Runs status (human and JSON) and checks every number against the
    files; want_*: what the scenario itself says must hold."""
    h, doc, detail = both(state)
    exp = expected(state)
    hf = human_fields(h)
    ok = doc is not None and h is not None
    if ok:
        # What the ledger and the audit log say; what a live serve adds
        # (ceilings, waiting sandboxes) is checked against one below.
        got = {
            "budget": {k: v for k, v in doc["budget"].items() if k != "run_bits_left"} if doc["budget"] else None,
            "repositories": [{k: r[k] for k in ("repo", "invocations", "bits", "unbounded_calls")}
                             for r in doc["repositories"]],
            "records": doc["audit"]["records"], "runs": doc["audit"]["runs"],
            "latest_run": (doc["latest_run"] or {}).get("id"),
            "latest": (doc["latest_run"] or {}).get("counts"),
            "all_runs": doc["all_runs"],
            "failures": [(f["time"], f["id"], f["repo"], f["status"]) for f in doc["failures"]],
            "failures_total": doc["failures_total"],
        }
        tap.ok(got == exp and doc["audit"]["read_from"] == 0,
               f"{label}: --json agrees with budget.json and the audit log", f"got {got}\nwant {exp}\n{detail}")
        b = exp["budget"]
        tap.ok(hf.get("budget") == (b["used"], b["left"], b["limit"]) and hf.get("run_bits") == b["run_bits_carried"]
               and hf["repos"] == {r["repo"]: (r["invocations"], r["bits"]) for r in exp["repositories"]}
               and hf.get("latest") == exp["latest_run"] and hf.get("records") == exp["records"]
               and hf.get("runs") == exp["runs"]
               and hf.get("latest_counts") == dict(exp["latest"]["outcomes"], admitted=exp["latest"]["admitted"],
                                                   unfinished=exp["latest"]["unfinished"])
               and hf.get("all_counts") == dict(exp["all_runs"]["outcomes"], admitted=exp["all_runs"]["admitted"],
                                                unfinished=exp["all_runs"]["unfinished"])
               and [(f[0], f[1], None if f[2] == "-" else f[2], f[3]) for f in hf["failures"]] == exp["failures"],
               f"{label}: the human lines say the same", f"{hf}\n{exp}\n{detail}")
    else:
        tap.ok(False, f"{label}: status succeeds, human and --json", detail)
        tap.ok(False, f"{label}: the human lines say the same", detail)
        return None
    if want_latest is not None:
        tap.ok({k: doc["latest_run"]["counts"]["outcomes"][k] for k in want_latest} == want_latest,
               f"{label}: the latest run's outcomes are the probes' known ones {want_latest}",
               doc["latest_run"])
    if want_causes is not None:
        tap.ok([f["cause"] for f in doc["failures"]][-len(want_causes):] == want_causes,
               f"{label}: the last failures' causes are {want_causes}", doc["failures"])
    if want_used is not None:
        tap.ok(doc["budget"]["used"] == want_used and doc["budget"]["limit"] == LIMIT,
               f"{label}: budget used {want_used} of {LIMIT}", doc["budget"])
    return doc


def settled_file(state, requests, waiting, timeout=60):
    """Waits until serve's serve.json counts requests results and waiting
    sandboxes in all, then for one more write's interval."""
    def done():
        try:
            with open(os.path.join(state, "serve.json")) as f:
                d = json.load(f)
        except (OSError, ValueError):
            return False
        return (d["answered"] + d["refused"] + d["failed"] == requests
                and sum(r["waiting"] for r in d["repositories"]) == waiting)
    ok = S.wait_for(done, timeout=timeout)
    time.sleep(0.5)
    return ok


def tree_state(top):
    """Every entry under top: (path, type, size, mtime): what status must not change."""
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out.append((p, st.st_mode, st.st_size, st.st_mtime_ns))
    return sorted(out)


def stage_with_credential(config, clones):
    """Stages with a credential in the environment, as an operator would
    (it is unused for local clones, and must show up nowhere)."""
    state = work.new_state()
    argv = [S.PROXY, "stage", "--config", config, "--state", state]
    for repo, path in clones:
        argv += ["--clone", f"{repo}={path}"]
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GH_TOKEN": STAGE_CANARY})
    if r.returncode != 0:
        raise RuntimeError(f"stage failed: {r.stderr.strip()}")
    return state


try:
    t_start = time.monotonic()
    # ---- usage ------------------------------------------------------------------
    r = subprocess.run([S.PROXY, "status", "--help"], capture_output=True, text=True)
    tap.ok(r.returncode == 0 and r.stdout.startswith("usage: sealed-probe-proxy status [--state DIR] [--json]\n\noptions:\n"),
           "--help prints the usage line with exactly --state and --json, then the options, exit 0", r)
    r = subprocess.run([S.PROXY, "status"], capture_output=True, text=True)
    tap.ok((r.returncode == 0 and f"\nstate         {DEFAULT_STATE}\n" in r.stdout)
           or (r.returncode == 1 and f"`{DEFAULT_STATE}`" in r.stderr and r.stdout == ""),
           f"no --state: the default {DEFAULT_STATE}, as every other verb (shown, or named in the error)", r)
    missing = os.path.join(work.dir, "no-such-state")
    r = subprocess.run([S.PROXY, "status", "--state", missing], capture_output=True, text=True)
    tap.ok(r.returncode == 1 and r.stdout == "" and missing in r.stderr and "No such file" in r.stderr,
           "a missing state directory: exit 1, naming it and why", r)
    empty = os.path.join(work.dir, "empty-state")
    os.mkdir(empty, 0o700)
    r = subprocess.run([S.PROXY, "status", "--state", empty], capture_output=True, text=True)
    tap.ok(r.returncode == 1 and "not a state directory" in r.stderr and not os.listdir(empty),
           "a directory that is no state directory: exit 1, and nothing is made in it", r)

    # ---- stage, with a credential in the environment ------------------------------
    alpha = work.make_clone("alpha", {"README.md": f"{REPO_CANARY}\n".encode()})
    beta = work.make_clone("beta", {"README.md": b"beta\n"})
    config = work.write_config([ALPHA, BETA], timeout=30, maxInvocations=LIMIT)
    state = stage_with_credential(config, [(ALPHA, alpha), (BETA, beta)])
    h, doc, detail = both(state)
    tap.ok(doc is not None and doc["budget"] is None and doc["audit"]["present"] is False
           and "none yet: serve has not run" in (h or ""),
           "staged, never served: no budget yet, no audit log", detail)

    # ---- serve 1: known outcomes ------------------------------------------------------
    srv = S.Serve(work, config, state)
    if not srv.start():
        raise S.ServeFailed(srv.stderr()[-800:])
    base = srv.probe_id_base
    try:
        got = [srv.probe(answering(0, "a1"), ALPHA, OUTCOMES),
               srv.probe(answering(1, "b1"), BETA, OUTCOMES),
               srv.probe(EXITING, ALPHA, OUTCOMES),
               srv.probe(BAD_OUTPUT, ALPHA, OUTCOMES),
               srv.probe(answering(0, "nope"), NOPE, OUTCOMES)]
        want = [S.answer(OUTCOMES[0]), S.answer("NO"), S.ERROR_LINE, S.ERROR_LINE, S.ERROR_LINE]
        tap.ok(got == want, "serve 1: two answers, a probe's exit, an invalid /probe/out, an unknown repository",
               got)
        run1 = S.audit_lines(state)[-1]["run"]
        # serve's own changes settle first: the last answer's sandbox goes
        # after it (immediate release), and the pool refills.
        S.leaks(state, srv.run, serve_pid=srv.pid)
        S.wait_pool_full(srv, repos=2)
        # serve.json too: its last change written (at most 200 ms after it).
        settled_file(state, 5, S.pool_expected(2))
        before = tree_state(state)
        t0 = time.monotonic()
        doc = check(state, "live serve", want_latest={"answered": 2, "probe": 2, "refused": 1},
                    want_causes=["probe_exit", "probe_output", "unknown_repository"], want_used=4)
        took = time.monotonic() - t0
        tap.ok(doc is not None and doc["latest_run"]["id"] == run1 and doc["audit"]["runs"] == 1
               and [r["invocations"] for r in doc["repositories"]] == [3, 1]
               and [r["bits"] for r in doc["repositories"]] == [3 * MILLIBITS_PER_CALL / 1000,
                                                                MILLIBITS_PER_CALL / 1000],
               "live serve: per repository 3 and 1 invocations, 2 bits each (immediate release)",
               doc and doc["repositories"])
        failure = doc and doc["failures"][0]
        tap.ok(failure is not None and failure["exit"] == 3 and failure["repo"] == ALPHA
               and failure["status"] == "probe" and doc["failures"][2]["repo"] is None,
               "live serve: the probe's failure shows its exit status 3 and repository; the refusal none",
               doc and doc["failures"])
        tap.ok(tree_state(state) == before and took < 20,
               f"live serve: status (human and JSON) wrote nothing under the state directory, and took {took:.1f} s",
               took)
        tap.ok(os.path.exists(os.path.join(state, "budget.lock")) and srv.alive()
               and srv.probe(answering(1, "after-status"), BETA, OUTCOMES) == S.answer("NO"),
               "live serve: status ran beside serve's ledger lock, and serve still answers after it")
        rc = srv.stop()
        tap.ok(rc == 0, "serve 1 stops cleanly (SIGTERM)", srv.stderr()[-300:])
    finally:
        serve_stderrs.append(srv.stderr())
        srv.cleanup()
    check(state, "after SIGTERM", want_used=5)

    # ---- serve 2: a clean restart on the same state --------------------------------------
    srv = S.Serve(work, config, state, probe_id_base=base)
    if not srv.start():
        raise S.ServeFailed(srv.stderr()[-800:])
    try:
        doc = check(state, "restarted, nothing asked yet", want_used=5)
        tap.ok(doc is not None and doc["latest_run"]["id"] == run1 and doc["budget"]["left"] == 1,
               "restarted: the budget goes on (5 used, 1 left), and the latest run in the log is still run 1",
               doc and (doc["budget"], doc["latest_run"]))
        # The last invocation: admitted, then serve is killed while it runs.
        holder = {}
        th = threading.Thread(target=lambda: holder.setdefault(
            "out", srv.probe(SLEEPING, ALPHA, OUTCOMES, timeout=90)), daemon=True)
        th.start()
        admitted = S.wait_for(lambda: any(r["status"] == "admitted" and r["run"] != run1
                                          for r in S.audit_lines(state, admissions=True)), timeout=60)
        run2 = admitted and S.audit_lines(state, admissions=True)[-1]["run"]
        doc = check(state, "a probe in flight", want_used=6)
        tap.ok(admitted and doc is not None and doc["latest_run"]["id"] == run2 != run1
               and doc["latest_run"]["counts"]["unfinished"] == 1 and doc["budget"]["left"] == 0,
               "a probe in flight: a new latest run, its invocation admitted and unfinished, the budget spent",
               doc and doc["latest_run"])
        srv.kill9()
        th.join(120)
    finally:
        serve_stderrs.append(srv.stderr())
        srv.cleanup()
    doc = check(state, "after kill -9", want_used=6)
    tap.ok(doc is not None and doc["all_runs"]["unfinished"] == 1 and doc["latest_run"]["id"] == run2
           and doc["audit"]["runs"] == 2,
           "after kill -9: the killed invocation stays unfinished in run 2", doc and doc["all_runs"])

    # A crash in the middle of a write leaves a partial last line: tolerated,
    # counted, not read (serve itself refuses to start on it; it is removed).
    log = S.audit_path(state)
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b'{"id":"' + run2.encode() + b'-99","run":"' + run2.encode() + b'","received":"2026')
    h, tdoc, detail = both(state)
    tap.ok(tdoc is not None and tdoc["audit"]["torn_tail_bytes"] == os.path.getsize(log) - size
           and tdoc["audit"]["records"] == doc["audit"]["records"] and "no whole line" in (h or ""),
           "a torn last line (a crash mid-write): tolerated, counted in torn_tail_bytes and not read", detail)
    os.truncate(log, size)

    # ---- serve 3: after kill -9, the spent budget is refused ------------------------------
    srv = S.Serve(work, config, state, probe_id_base=base)
    if not srv.start():
        raise S.ServeFailed(srv.stderr()[-800:])
    try:
        got = srv.probe(answering(0, "spent"), ALPHA, OUTCOMES)
        tap.ok(got == S.ERROR_LINE, "serve 3: the spent budget answers ERROR", got)
        doc = check(state, "after the restart that followed kill -9", want_latest={"refused": 1},
                    want_causes=["budget_spent"], want_used=6)
        tap.ok(doc is not None and doc["audit"]["runs"] == 3 and doc["latest_run"]["id"] not in (run1, run2),
               "after kill -9 and a restart: a third run, the latest", doc and doc["latest_run"])
    finally:
        serve_stderrs.append(srv.stderr())
        srv.cleanup()

    # ---- a live serve: holder, waiting sandboxes, drift, ceilings ---------------------------
    live_state = stage_with_credential(config, [(ALPHA, alpha), (BETA, beta)])
    staged_alpha = json.load(open(os.path.join(live_state, "staged.json")))["seeds"]
    tap.ok([(x["repo"], x["clone"]) for x in staged_alpha] == [(ALPHA, alpha), (BETA, beta)],
           "stage records each local seed's clone in staged.json (version 3)", staged_alpha)
    # The clone moves on after staging: its HEAD is no longer the seed's.
    with open(os.path.join(alpha, "NEW.md"), "w") as f:
        f.write("after staging\n")
    work.git(alpha, "add", "-A")
    work.git(alpha, "commit", "-q", "-m", "after staging")
    alpha_head = work.git(alpha, "rev-parse", "HEAD")
    # Bucketed release (a bit budget needs a bounded timing channel): each
    # answer leaves at its bucket, 1 s at the least.
    BIT_BUDGET, RUN_BIT_BUDGET = 20, 40
    WAITING = 1 if S.CREATES_AHEAD else 0  # --pool 1
    srv = S.Serve(work, config, live_state, probe_id_base=base,
                  extra=["--release", "bucketed", "--pool", "1", "--bit-budget", str(BIT_BUDGET), "--run-bit-budget", str(RUN_BIT_BUDGET)])
    # stderr as the journal sees it: JOURNAL_STREAM names the file serve's
    # stderr is (the same inode: start() truncates it, and does not replace it).
    open(srv.stderr_path, "wb").close()
    st_err = os.stat(srv.stderr_path)
    # STATUS= as systemd would get it, each datagram with when it came.
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(os.path.join(work.dir, "notify-live"))
    notify.settimeout(0.1)
    notified, notify_stop = [], threading.Event()

    def listen():
        while not notify_stop.is_set():
            try:
                data = notify.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            notified.append((time.monotonic(), data.decode(errors="replace")))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    srv.env = dict(srv.env, JOURNAL_STREAM=f"{st_err.st_dev}:{st_err.st_ino}",
                   NOTIFY_SOCKET=os.path.join(work.dir, "notify-live"))
    if not srv.start():
        raise S.ServeFailed(srv.stderr()[-800:])
    serve_file = os.path.join(live_state, "serve.json")
    try:
        first_sent = time.monotonic()
        got = [srv.probe(answering(0, "live-a"), ALPHA, OUTCOMES), srv.probe(answering(1, "live-b"), BETA, OUTCOMES),
               srv.probe(BAD_OUTPUT, ALPHA, OUTCOMES), srv.probe(answering(0, "live-nope"), NOPE, OUTCOMES)]
        tap.ok(got == [S.answer(OUTCOMES[0]), S.answer("NO"), S.ERROR_LINE, S.ERROR_LINE],
               "live serve: two answers, an invalid /probe/out, an unknown repository", got)
        live_run = S.audit_lines(live_state)[-1]["run"]

        tap.ok(settled_file(live_state, 4, 2 * WAITING) and [
                   r["waiting"] for r in json.load(open(serve_file))["repositories"]] == [WAITING, WAITING],
               f"live serve: serve.json settles at 4 results and {WAITING} sandbox(es) waiting per repository "
               f"(--pool 1{'' if S.CREATES_AHEAD else f'; {B.name} cannot create ahead'})",
               open(serve_file).read() if os.path.exists(serve_file) else "no serve.json")
        st_file = os.stat(serve_file)
        tap.ok(st_file.st_uid == 0 and st_file.st_mode & 0o777 == 0o600, "serve.json is root's, mode 0600",
               oct(st_file.st_mode))
        h, doc, detail = both(live_state)
        ledger = json.load(open(os.path.join(live_state, "budget.json")))
        bits = {n: r["millibits"] / 1000 for n, r in ledger["repositories"].items()}
        want_serve = {"pid": srv.pid, "run": live_run, "backend": B.runtime, "release": "bucketed", "pool": WAITING,
                      "bit_budget": BIT_BUDGET, "run_bit_budget": RUN_BIT_BUDGET, "answered": 2, "refused": 1,
                      "failed": 1}
        tap.ok(doc is not None and doc["state"] == live_state and doc["owner"] == {"verb": "serve", "pid": srv.pid}
               and {k: doc["serve"][k] for k in want_serve} == want_serve and doc["stale_serve_pid"] is None,
               "live serve --json: the holder's pid, run, backend, release mode, pool and bit budgets", detail)
        repos = {r["repo"]: r for r in (doc or {}).get("repositories", [])}
        tap.ok(doc is not None and all(repos[n]["waiting"] == WAITING and repos[n]["bit_budget"] == BIT_BUDGET
                                       and abs(repos[n]["bits_left"] - (BIT_BUDGET - bits[n])) < 1e-9
                                       for n in (ALPHA, BETA))
               and abs(doc["budget"]["run_bits_left"] - (RUN_BIT_BUDGET - sum(bits.values()))) < 1e-9
               and doc["budget"]["run_bit_budget"] == RUN_BIT_BUDGET,
               f"live serve --json: per repository {WAITING} sandbox(es) waiting, its bits left of --bit-budget; the run's "
               "bits left of --run-bit-budget", (repos, doc and doc["budget"], bits))
        seeds = {x["repo"]: x for x in ((doc or {}).get("staged") or {}).get("seeds", [])}
        tap.ok(seeds.get(ALPHA, {}).get("drift") is True and seeds[ALPHA]["clone_head"] == alpha_head
               and seeds[ALPHA]["commit"] != alpha_head and seeds[ALPHA]["clone"] == alpha
               and seeds.get(BETA, {}).get("drift") is False and seeds[BETA]["clone_head"] == seeds[BETA]["commit"],
               "live serve --json: the clone committed after staging drifts (its HEAD named), the other does not",
               seeds)
        lines = (h or "").splitlines()
        serve_line = next((x for x in lines if x.startswith("serve ")), "")
        tap.ok(serve_line.startswith(f"serve         pid {srv.pid}, run {live_run}, backend {B.runtime}, "
                                     "release bucketed, ")
               and any(x.startswith("owner") and f"serve (pid {srv.pid}) holds" in x for x in lines)
               and any(x.startswith("requests") and "2 answered, 1 refused, 1 failed" in x for x in lines),
               "live serve, text: the holder's pid, run, backend and release mode, and its requests", h)
        tap.ok(all(any(x.startswith("repository") and n in x and f"left of {BIT_BUDGET} (--bit-budget)" in x
                       and x.endswith(f", {WAITING} sandboxes waiting") for x in lines) for n in (ALPHA, BETA))
               and any(x.startswith("run bits") and f"left, of {RUN_BIT_BUDGET} (--run-bit-budget" in x
                       for x in lines),
               f"live serve, text: per repository its bits left of --bit-budget and {WAITING} sandbox(es) waiting; the run's "
               "bits left of --run-bit-budget", h)
        tap.ok(any(x.startswith("commit") and ALPHA in x and f"drift: its clone's HEAD is {alpha_head} now" in x
                   for x in lines)
               and any(x.startswith("commit") and BETA in x and "its clone's HEAD is the same" in x for x in lines),
               "live serve, text: drift said for the clone that moved on, with its HEAD; the same for the other", h)
        # STATUS= is open to every user: a result may show there only once
        # its answer is released (bucketed: 1 s after acceptance at the
        # least), never when its probe ends, which would tell the agent the
        # probe's duration past the ladder.
        counted = [(t, text) for t, text in notified
                   if (m := re.search(r"STATUS=.*?(\d+) answered", text)) and int(m.group(1)) >= 1]
        tap.ok(counted and counted[0][0] >= first_sent + 1.0
               and any(re.search(r"STATUS=2 repositories; 2 answered, 1 refused, 1 failed; budget ", x)
                       for _, x in notified)
               and not any("waiting" in x or any(c in x for c in CANARIES) for _, x in notified),
               "STATUS=: the first answer counted no sooner than its release (1 s after it was sent, at least), "
               "the final counts, no waiting sandboxes, counts only",
               [(round(t - first_sent, 3), x) for t, x in notified])
        rc = srv.stop()
        notify_stop.set()
        listener.join(timeout=5)
        notify.close()
        err_text = srv.stderr()
        serve_stderrs.append(err_text)
        err_lines = err_text.splitlines()
        tap.ok(rc == 0 and not os.path.exists(serve_file), "live serve stops cleanly and removes serve.json",
               err_text[-400:])
        tap.ok(err_lines and all(re.match(r"^<[3-7]>sealed-probe-proxy: ", x) for x in err_lines)
               and any(x.startswith("<5>sealed-probe-proxy: serve: ready: ") for x in err_lines)
               and err_lines[-1] == "<5>sealed-probe-proxy: serve: stopped",
               "JOURNAL_STREAM names serve's stderr: every line has its priority, ready and stopped at notice (5)",
               err_text[-1500:])
        requests = [x for x in err_lines if ": serve: request " in x]
        tap.ok(len(requests) == 4 and all(x.startswith(f"<7>sealed-probe-proxy: serve: request {live_run}-")
                                          for x in requests)
               and sorted(x.split(": ", 3)[3].split(",")[0] for x in requests)
               == ["answered", "answered", "probe", "refused"],
               "one line per request, at debug (7) only: its id and status (the audit log's), nothing more of it",
               requests)
    finally:
        srv.cleanup()
    h, doc, detail = both(live_state)
    tap.ok(doc is not None and doc["serve"] is None and doc["owner"] is None and "serve         none running" in h
           and all(r["waiting"] is None and r["bit_budget"] is None for r in doc["repositories"]),
           "after the stop: no serve, no waiting sandboxes, the per-repository ceiling unknown (serve's option)",
           detail)
    # A serve.json that no serve holds (kill -9 leaves one): said, ignored.
    with open(serve_file, "w") as f:
        json.dump({"version": 1, "pid": 2 ** 22 + 7, "run": "stale", "started": "2026-01-01T00:00:00.000Z",
                   "backend": B.runtime, "release": "immediate", "snapshot": "overlay", "socket": "/nonexistent",
                   "pool": 1, "bit_budget": None, "run_bit_budget": None, "answered": 0, "refused": 0, "failed": 0,
                   "repositories": [{"repo": ALPHA, "waiting": 1}]}, f)
    os.chmod(serve_file, 0o600)
    h, doc, detail = both(live_state)
    tap.ok(doc is not None and doc["serve"] is None and doc["stale_serve_pid"] == 2 ** 22 + 7
           and "serve         none running" in h and f"names pid {2 ** 22 + 7}, which does not hold" in h,
           "a stale serve.json (its pid holds nothing): said, and nothing of it shown as live", detail)
    os.unlink(serve_file)

    # ---- the canary ------------------------------------------------------------------------
    with open(log, "rb") as f:
        raw_log = f.read()
    tap.ok(OUTCOME_CANARY.encode() in raw_log,
           "canary: the audit log holds the outcome canary (so status had it to leak)")
    leaked = [(c, i) for i, out in enumerate(outputs) for c in CANARIES if c in out]
    tap.ok(not leaked and len(outputs) >= 16,
           f"canary: no output of status ({len(outputs)}, human and JSON, stdout and stderr) holds a script, "
           "outcome, output, repository or staging-credential canary", leaked)
    leaked = [(c, i) for i, out in enumerate(serve_stderrs) for c in CANARIES if c in out]
    tap.ok(not leaked and len(serve_stderrs) >= 4,
           f"canary: no line of serve's stderr ({len(serve_stderrs)} serves, every priority, debug included) "
           "holds a script, outcome, output or repository canary", leaked)
    print(f"# status: {time.monotonic() - t_start:.0f} s", flush=True)
finally:
    work.close()
tap.finish()
