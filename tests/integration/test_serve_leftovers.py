"""A start after kill -9 says what it removed (docs/operations.md, "A start
after kill -9"): serve is killed with a sandbox made ahead and a probe
running, and the next start names, on stderr, one line per kind of thing,
each thing it removed: the stale socket, the ready file and the dead pid it
named, the containers of the earlier run with its run id and their count,
their cgroups, their runtime state directory (runc, gvisor), their
workspaces, and the probe-id lock files nobody held.  After that serve's
clean stop nothing of either run is left, and no empty directory of either;
a second clean start says nothing of the kind."""

import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-leftovers-")
REPO = "acme/left"
SLOW = "import time\ntime.sleep(60)\n" + S.answer_script("YES")
REMOVED = re.compile(r"^sealed-probe-proxy: serve: removed ", re.M)
# The runtime's own state directory of a run: an OCI command line's --root.
HAS_STATE_DIR = B.oci_cli


def removed_lines(srv):
    return [ln for ln in srv.stderr().splitlines() if REMOVED.match(ln)]


def line_with(lines, *words):
    return next((ln for ln in lines if all(w in ln for w in words)), None)


def ids_dir():
    return os.path.join(B.run_dir, "ids")


def id_locks():
    try:
        return sorted(os.listdir(ids_dir()))
    except FileNotFoundError:
        return []


def run_dirs_named(top, runs):
    """Every directory below top named like one of runs (empty or not)."""
    found = []
    for dirpath, dirnames, _ in os.walk(top):
        found += [os.path.join(dirpath, d) for d in dirnames if d in runs]
        dirnames[:] = [d for d in dirnames if d != "seeds"]  # the seeds' read-only mount: not serve's
    return found


servers = []


def serve(**kw):
    srv = S.Serve(work, config, state, **kw)
    servers.append(srv)
    return srv


try:
    clone = work.make_clone("left", {"README.md": b"left\n"})
    config = work.write_config([REPO], timeout=90, maxInvocations=1000)
    state = work.staged_state(config, [(REPO, clone)])

    # ---- the first serve: a sandbox made ahead, a probe running, kill -9 -----
    a = serve()
    if not tap.ok(a.start(), "first serve: ready", a.stderr()):
        raise SystemExit
    pooled = S.wait_pool_full(a)
    slow = threading.Thread(target=lambda: a.probe(SLOW, REPO, timeout=120))
    slow.start()
    running = S.wait_container(state, a.run, timeout=60, serve_pid=a.pid)
    tap.ok(running is not None and (pooled is not None or S.pool_expected() == 0),
           "first serve: a probe runs beside the sandboxes made ahead", (running, pooled))
    a.kill9()
    slow.join(timeout=150)

    left = {
        "socket": os.path.lexists(a.socket),
        "ready": a.ready_content(),
        "containers": sorted(S.containers(B.run_root(state, a.run))),
        "cgroups": S.cgroup_dirs(a.run),
        "workspaces": sorted(os.listdir(os.path.join(S.work_dir(state), a.run))),
        "state_dir": os.path.isdir(B.run_root(state, a.run)),
        "id_locks": id_locks(),
        "mounts": S.mounts_under(os.path.join(S.work_dir(state), a.run)),
    }
    tap.ok(left["socket"] and left["ready"] == f"{a.pid}\n" and len(left["containers"]) >= 1
           and left["workspaces"] and left["id_locks"] and (left["state_dir"] or not HAS_STATE_DIR)
           and (left["mounts"] or not B.workspaces_on_host),
           "kill -9: the socket, the ready file naming the dead pid, containers, workspaces, runtime state and "
           "probe-id locks are left", left)

    # ---- the next start: one line per kind, naming each -----------------------
    b = serve(socket_path=a.socket, ready_path=a.ready_file)
    if not tap.ok(b.start(), "next start: ready", b.stderr()):
        raise SystemExit
    lines = removed_lines(b)
    tap.ok(line_with(lines, f"stale socket `{a.socket}`") is not None,
           "next start: names the stale socket it removed", lines)
    tap.ok(line_with(lines, f"stale ready file `{a.ready_file}`", f"named pid {a.pid}") is not None,
           "next start: names the ready file it removed and the dead pid it named", lines)
    # At least the containers seen: one whose create the kill cut short (the
    # pool's refill) may be listed by the runtime before it shows here.
    n = len(left["containers"])
    m = re.search(r"removed ([0-9]+) containers? of earlier runs, by run: %s \(([0-9]+)\)$" % a.run,
                  "\n".join(lines), re.M)
    tap.ok(m is not None and m.group(1) == m.group(2) and int(m.group(1)) >= n,
           f"next start: names the earlier run's containers by its run id, with their count (at least the {n} seen)",
           (left["containers"], lines))
    # Where the harness sees the run's cgroups (runc's, runsc's), they must
    # be named; docker's sit below another parent, named all the same.
    cg = line_with(lines, "cgroup", "of earlier runs, by run:")
    tap.ok((cg is None or f"{a.run} (" in cg) and (cg is not None or not left["cgroups"]),
           "next start: names the earlier run's cgroups by its run id", (left["cgroups"], lines))
    if HAS_STATE_DIR:
        tap.ok(line_with(lines, "state director", f"`{B.run_root(state, a.run)}`") is not None,
               "next start: names the earlier run's runtime state directory", lines)
    else:
        tap.skip("next start: names the earlier run's runtime state directory",
                 f"not applicable: {B.name} keeps no state directory of its own in STATE")
    ws = line_with(lines, "workspaces of 1 earlier run", f"`{S.work_dir(state)}`",
                   f"{a.run} ({len(left['workspaces'])} entr")
    tap.ok(ws is not None and (("still mounted" in ws) == bool(left["mounts"])),
           "next start: names the earlier run's workspaces, with their count (and mounts when any were left)",
           (left["workspaces"], left["mounts"], lines))
    first_id = min(int(x) for x in left["id_locks"] if x.isdigit())
    tap.ok(line_with(lines, "probe-id lock file", f"`{ids_dir()}`", str(first_id)) is not None,
           "next start: names the probe-id lock files nobody held", (left["id_locks"], lines))
    kinds = ["stale socket", "stale ready file", "containers? of earlier runs", "workspaces of",
             "probe-id lock file"] + (["state director"] if HAS_STATE_DIR else []) + (["cgroups? of"] if cg else [])
    tap.ok(len(lines) == len(kinds) and all(sum(bool(re.search(k, ln)) for ln in lines) == 1 for k in kinds),
           f"next start: one line per kind of thing ({len(kinds)}), no more", lines)
    tap.ok(b.probe(S.answer_script("YES"), REPO) == S.answer("YES"), "next start: answers")

    # ---- its clean stop: nothing of either run is left ------------------------
    b_pid, b_run = b.pid, b.run
    tap.ok(b.stop() == 0, "next start: stops cleanly", b.stderr()[-600:])
    found = S.leaks_now(state, a.run, after_exit=True, srv=b) + S.leaks_now(state, b_run, after_exit=True, srv=b)
    tap.ok(found == [], "after its stop: nothing of either run (containers, cgroups, processes, mounts, "
           "workspaces, runtime state, socket, ready file)", found)
    tap.ok(id_locks() == [], "after its stop: no probe-id lock file", id_locks())
    empty = run_dirs_named(state, {a.run, b_run}) + run_dirs_named(B.run_dir, {a.run, b_run})
    tap.ok(empty == [], "after its stop: no directory of either run, empty or not, in STATE or --run-dir", empty)
    tap.ok(S.mounts_under(state, "/proc/self/mountinfo") == [os.path.dirname(S.seed_dir(state, REPO))]
           and S.mounts_under(B.run_dir) == [],
           "after its stop: no mount but the seeds' below STATE or --run-dir",
           (S.mounts_under(state), S.mounts_under(B.run_dir)))

    # ---- a second clean start: nothing to say --------------------------------
    c = serve(socket_path=a.socket, ready_path=a.ready_file)
    ready = c.start()
    c.stop()
    tap.ok(ready and removed_lines(c) == [], "a clean start after a clean stop says nothing was removed",
           c.stderr()[-800:])
finally:
    for srv in servers:
        srv.cleanup()
    work.close()
tap.finish()
