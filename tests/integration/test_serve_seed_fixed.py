"""What serve answers from is fixed when it becomes ready (docs/operations.md,
"What serve answers from"): whatever is done by hand to a seed's read-only
mount while serve runs (a forced unmount, the seed's files removed or
swapped once it is gone, a remount read-write), every later probe answers
ERROR, audited as not answered with a reason naming the repository, never an
answer read from a changed seed; the pool gives the repository up, once and
by name, instead of retrying for ever; and with nothing done to the seed,
every probe answers.

Each case stages a fresh state directory and starts its own serve.  The
unmount is done twice: under a parent whose mounts are private (the host's
unmount never reaches serve's own namespace: only serve's view of the host's
namespace sees it) and under a shared one, as on a systemd host (it does).
The seed's content carries a canary that no message may hold."""

import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test("umount")

tap = Tap()
work = S.Work("sp-seed-fixed-")
nonce = uuid.uuid4().hex[:12]
CANARY = f"SEED-FIXED-CANARY-{nonce}"
REPO = "acme/fixed"
MARKER = "marker.txt"
# YES while the seed holds the marker as staged, NO once it is gone or
# changed: the wrong answer a changed seed would give.  The canary is
# spelled in hex, so that the script's own bytes (audited by digest only)
# could not carry it either.
PROBE = ('import json, os\n'
         f'want = bytes.fromhex("{CANARY.encode().hex()}")\n'
         f'p = "/probe/repo/{MARKER}"\n'
         'ok = os.path.exists(p) and open(p, "rb").read() == want\n'
         'json.dump({"result": "YES" if ok else "NO"}, open("/probe/out", "w"))\n')
YES = S.answer("YES")
ERROR = S.ERROR_LINE
# Long enough for a pool that retried to say so again (its first retries
# come 250 ms, 500 ms and 1 s apart: src/serve/pool.c).
POOL_WATCH_SECONDS = 3

clone = work.make_clone("fixed", {MARKER: CANARY.encode(), "src/lib.py": b"x = 1\n"})
config = work.write_config([REPO], timeout=20, maxInvocations=1000)
shared_dirs = []


def shared_parent():
    """A directory that is a shared mount of its own, as a systemd host's
    tree is: a seed mounted below it propagates into serve's namespace."""
    d = tempfile.mkdtemp(prefix="sp-seed-shared-")
    os.chmod(d, 0o711)
    subprocess.run(["mount", "--bind", d, d], check=True, capture_output=True)
    subprocess.run(["mount", "--make-shared", d], check=True, capture_output=True)
    shared_dirs.append(d)
    return d


def fresh_state(parent=None):
    if parent is None:
        return work.staged_state(config, [(REPO, clone)])
    state = os.path.join(parent, "state")
    work.states.append(state)
    r = work.stage(state, config, [(REPO, clone)])
    if r.returncode != 0:
        raise RuntimeError(f"stage failed: {r.stderr.strip()}")
    return state


def seed_run_dir(state):
    return os.path.dirname(S.seed_dir(state, REPO))


def unmount_seed(state):
    subprocess.run(["umount", "-l", seed_run_dir(state)], check=True, capture_output=True)


def pool_lines(srv):
    return [ln for ln in srv.stderr().splitlines() if "pool:" in ln]


def seed_gone_records(state, run, n):
    """The last n audit records of run, each: ERROR, not answered, its
    reason naming the repository and saying the seed is gone."""
    recs = S.audit_lines(state, run)[-n:]
    bad = [(r["status"], r.get("cause"), r["result"], r["reason"]) for r in recs
           if r["result"] != "ERROR" or r["status"] == "answered"
           or f"`{REPO}`" not in (r["reason"] or "") or "no longer mounted where serve verified it" not in
           (r["reason"] or "")]
    return len(recs) == n and not bad, recs if len(recs) != n else bad


def no_canary(srv, state):
    found = [where for where, text in (("stderr", srv.stderr()), ("stdout", srv.stdout()),
                                       ("audit", S.audit_raw(state).decode("utf-8", "replace")))
             if CANARY in text]
    return not found, found


def answers_until_gone(name, change, snapshot=None, parent=None, probes=3):
    """Starts serve on a fresh state, sees it answer YES, applies change
    (state -> None) and asks probes more: each must be ERROR, audited as
    not answered, naming the repository; the pool says so once."""
    state = fresh_state(parent)
    with S.serving(work, config, state, snapshot=snapshot) as srv:
        tap.ok(srv.probe(PROBE, REPO) == YES, f"{name}: the seed answers YES before")
        # Every waiting sandbox made (from the seed as staged) before the change.
        S.wait_pool_full(srv)
        change(state)
        got = [srv.probe(PROBE, REPO) for _ in range(probes)]
        tap.ok(got == [ERROR] * probes, f"{name}: every later probe answers ERROR, never an answer of the "
               "changed seed", got)
        ok, detail = seed_gone_records(state, srv.run, probes)
        tap.ok(ok, f"{name}: each is audited as not answered, its reason naming `{REPO}`", detail)
        first = pool_lines(srv)
        time.sleep(POOL_WATCH_SECONDS)
        later = pool_lines(srv)
        if S.pool_expected() > 0:
            tap.ok(len(later) == 1 and later == first and f"`{REPO}`" in later[0]
                   and "no sandbox is made ahead for it any more" in later[0] and "retrying" not in later[0],
                   f"{name}: the pool gives the repository up once, by name, and retries no more "
                   f"({POOL_WATCH_SECONDS} s watched)", later)
        else:
            tap.ok(later == [], f"{name}: no pool, no pool line", later)
        ok, found = no_canary(srv, state)
        tap.ok(ok, f"{name}: the seed's content is in no message", found)


def remove_marker(state):
    unmount_seed(state)
    os.unlink(os.path.join(S.seed_dir(state, REPO), MARKER))


def swap_marker(state):
    unmount_seed(state)
    with open(os.path.join(S.seed_dir(state, REPO), MARKER), "wb") as f:
        f.write(b"swapped\n")


def remount_rw_and_swap(state):
    """The read-only mount made writable where it is, on the host (the
    remount never reaches serve's own namespace on runc and gvisor), and a
    file changed through it."""
    subprocess.run(["mount", "-o", "remount,bind,rw", seed_run_dir(state)], check=True, capture_output=True)
    with open(os.path.join(S.seed_dir(state, REPO), MARKER), "wb") as f:
        f.write(b"swapped\n")


try:
    # ---- nothing done to the seed: no false positive -------------------------
    state = fresh_state()
    with S.serving(work, config, state) as srv:
        got = [srv.probe(PROBE, REPO) for _ in range(8)]
        recs = S.audit_lines(state, srv.run)
        tap.ok(got == [YES] * 8 and len(recs) == 8 and all(r["status"] == "answered" for r in recs),
               "untouched: every probe answers YES, audited answered (the check never fires on its own)",
               (got, [(r["status"], r["reason"]) for r in recs]))
        tap.ok(pool_lines(srv) == [], "untouched: the pool says nothing", pool_lines(srv))

    # ---- a forced unmount beside a live serve ---------------------------------
    answers_until_gone("unmounted (private parent)", unmount_seed)
    answers_until_gone("unmounted (shared parent, reaching serve's namespace)", unmount_seed,
                       parent=shared_parent())

    # ---- the seed's files changed by hand once its mount is gone ---------------
    for mode in ("overlay", "copy"):
        answers_until_gone(f"{mode}: a file removed after the unmount", remove_marker, snapshot=mode)
    answers_until_gone("a file swapped after the unmount (shared parent)", swap_marker, parent=shared_parent())

    # ---- remounted read-write on the host, a file swapped ----------------------
    answers_until_gone("remounted read-write on the host, a file swapped", remount_rw_and_swap)
finally:
    work.close()
    for d in shared_dirs:
        subprocess.run(["umount", "-R", "-l", d], capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", d], capture_output=True)
tap.finish()
