"""`serve`'s isolation, from inside the sandbox: each probe answers SEEN if it
can reach the thing and must answer NOTSEEN; each carries a control (a marker
that really is where the probe looks) and answers BROKEN when the control is
not found, so a NOTSEEN cannot come from a detector that sees nothing.  Repo-
level cases run in both snapshot modes.  Also: symlinks in the fixture don't
escape, and stage refuses FIFOs, sockets, devices and outside hardlinks in a
clone's .git."""

import os
import socket
import stat
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-iso-")
nonce = uuid.uuid4().hex[:12]
ALPHA, BETA = f"ALPHA-MARK-{nonce}", f"BETA-MARK-{nonce}"
GH_CANARY = f"ghp_SERVECANARY{nonce}0123456789"
SECRET_CANARY = f"SECRET-X-CANARY-{nonce}"
host_tmp = f"/tmp/sp-hosttmp-{nonce}"
HOSTTMP = f"HOSTTMP-MARK-{nonce}"
PARENT = f"PARENT-MARK-{nonce}"
WORKSPACE = f"WORKSPACE-MARK-{nonce}"
FO = S.FINDER_OUTCOMES
SEEN, NOTSEEN = S.answer("SEEN"), S.answer("NOTSEEN")


def parallel(*calls):
    results = [None] * len(calls)

    def run(i, fn):
        results[i] = fn()
    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def both_running(srv):
    return S.wait_for(lambda: len(S.probe_containers(srv.state, srv.run, srv.pid)) >= 2, timeout=20)


try:
    os.makedirs(host_tmp)
    with open(os.path.join(host_tmp, f"marker-{nonce}"), "w") as f:
        f.write(HOSTTMP + "\n")
    with open(os.path.join(work.dir, f"parent-{nonce}"), "w") as f:
        f.write(PARENT + "\n")
    workspace = os.path.join(work.dir, f"workspace-{nonce}")
    os.makedirs(workspace)
    with open(os.path.join(workspace, f"checkout-{nonce}.txt"), "w") as f:
        f.write(WORKSPACE + "\n")

    state = work.new_state()
    alpha = work.make_clone("alpha", {"README.md": (ALPHA + "\n").encode(), "src/a.py": b"x = 1\n"})
    beta = work.make_clone("beta", {"SECRET.txt": (BETA + "\n").encode()})
    links = work.make_clone("links", {"README.md": (ALPHA + "\n").encode()}, symlinks={
        "inner-link": "README.md",                       # the control: a link inside the repo
        "tmp-link": f"{host_tmp}/marker-{nonce}",        # absolute, to a host /tmp file
        "tmpdir-link": host_tmp,
        "up-link": "../../../../../../../../..",         # relative, far above the repo
        "parent-link": work.dir,                          # absolute, the state dir's parent
        "seeds-link": os.path.join(state, "seeds"),      # absolute, every seed of the state
        "passwd-link": "/etc/passwd",
    })
    repos = ["acme/alpha", "acme/beta", "acme/links"]
    config = work.write_config(repos, timeout=10, maxInvocations=1000)
    r = work.stage(state, config, [("acme/alpha", alpha), ("acme/beta", beta), ("acme/links", links)])
    if not tap.ok(r.returncode == 0, "stage three fixture repositories", r.stderr):
        raise SystemExit
    record = S.staged(state)
    seeds_run = record["run"]
    launch_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GH_TOKEN": GH_CANARY, "SECRET_X": SECRET_CANARY}

    for mode in ("overlay", "copy"):
        with S.serving(work, config, state, snapshot=mode, concurrency=2, env=launch_env) as srv:
            run = srv.run or "RUN-UNKNOWN"
            tap.ok(srv.probe(S.finder([BETA], [BETA]), "acme/beta", FO) == SEEN,
                   f"{mode}: control: the finder sees repo B's marker from repo B")
            tap.ok(srv.probe(S.finder([BETA], [ALPHA]), "acme/alpha", FO) == NOTSEEN,
                   f"{mode}: repo A's probe can't see repo B's marker (scanning /)")

            seed_paths = [state, os.path.join(state, "seeds"), os.path.join(state, "seeds", seeds_run)] + \
                [os.path.join(state, "seeds", seeds_run, str(i)) for i in range(3)]
            exists_check = f"""
for p in {seed_paths!r}:
    if os.path.lexists(p):
        hits.append("exists: " + p)
"""
            a = srv.probe(S.finder([BETA, "staged.json", seeds_run, os.path.basename(state)], [ALPHA],
                                   extra=exists_check), "acme/alpha", FO)
            tap.ok(a == NOTSEEN, f"{mode}: the seed parent: no STATE/seeds path exists, by name or by scanning /", a)

            writer = f"""import json, os
open("/probe/repo/PRIOR-{mode}-{nonce}", "w").write("PRIOR-CONTENT-{nonce}")
try:
    open("/tmp/PRIOR-{mode}-{nonce}", "w").write("PRIOR-CONTENT-{nonce}")
except OSError:
    pass
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES"}}, f)
"""
            w = srv.probe(writer, "acme/alpha")
            tap.ok(w == S.answer("YES"), f"{mode}: a probe writes a unique file into its repo and /tmp", w)
            for repo, control in (("acme/alpha", ALPHA), ("acme/beta", BETA)):
                a = srv.probe(S.finder([f"PRIOR-{mode}-{nonce}", f"PRIOR-CONTENT-{nonce}"], [control]), repo, FO)
                tap.ok(a == NOTSEEN, f"{mode}: the next probe ({repo}) finds nothing of that earlier probe", a)

            conc_writer = f"""import json, os, time
open("/probe/repo/CONC-{mode}-{nonce}", "w").write("CONC-CONTENT-{nonce}")
try:
    open("/tmp/CONC-{mode}-{nonce}", "w").write("CONC-CONTENT-{nonce}")
except OSError:
    pass
time.sleep(4)
ok = os.path.exists("/probe/repo/CONC-{mode}-{nonce}")
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if ok else "NO"}}, f)
"""
            conc_search = "import time\ntime.sleep(1.5)\n" + S.finder(
                [f"CONC-{mode}-{nonce}", f"CONC-CONTENT-{nonce}"], [ALPHA],
                extra="time.sleep(0.5)\nscan(['/probe', '/tmp'])\n")
            res = {}
            t = threading.Thread(target=lambda: res.setdefault("w", srv.probe(conc_writer, "acme/alpha")))
            t.start()
            S.wait_for(lambda: S.probe_containers(state, run, srv.pid), timeout=20)
            res["s"] = srv.probe(conc_search, "acme/alpha", FO)
            t.join(timeout=60)
            lines = [rec for rec in S.audit_lines(state, run)][-2:]
            overlapped = len(lines) == 2 and lines[0].get("started") and lines[1].get("started") and \
                max(x["started"] for x in lines) < min(x["finished"] for x in lines)
            tap.ok(res.get("w") == S.answer("YES") and overlapped,
                   f"{mode}: precondition: the writer kept its markers while both probes ran at once (concurrency 2)",
                   f"{res} {[(x.get('started'), x.get('finished')) for x in lines]}")
            tap.ok(res.get("s") == NOTSEEN, f"{mode}: a concurrent probe can't see the writer's files", res)

            if mode == "overlay":
                same_path = """import json, os, time
mine = b"OWN-%s" + os.urandom(16).hex().encode()
with open("/probe/repo/README.md", "wb") as f:
    f.write(mine)
time.sleep(3)
back = open("/probe/repo/README.md", "rb").read()
result = "OWN" if back == mine else ("OTHER" if back.startswith(b"OWN-") else "BROKEN")
with open("/probe/out", "w") as f:
    json.dump({"result": result}, f)
"""
                out = parallel(lambda: srv.probe(same_path % "A", "acme/alpha", ("OWN", "OTHER", "BROKEN")),
                               lambda: srv.probe(same_path % "B", "acme/alpha", ("OWN", "OTHER", "BROKEN")))
                tap.ok(out == [S.answer("OWN")] * 2,
                       "overlay: two concurrent writers of the same path each read back their own bytes", out)

            proxy_names = ["audit.jsonl", "probe.sock", "budget.json", "staged.json", os.path.basename(state),
                           os.path.basename(srv.dir), run, state, srv.socket]
            a = srv.probe(S.finder(proxy_names, [ALPHA]), "acme/alpha", FO)
            tap.ok(a == NOTSEEN, f"{mode}: the proxy's state, audit log, socket and run id are nowhere in the "
                                 "sandbox's filesystem", a)
            meta = f"""
for p in ["/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/cgroup"] + \\
        [f"/proc/{{pid}}/{{part}}" for pid in os.listdir("/proc") if pid.isdigit() for part in ("environ", "cmdline")]:
    try:
        look(p, open(p, "rb").read())
    except OSError:
        pass
"""
            a = srv.probe(S.finder([state, work.dir, run], ["/probe/repo"], roots=(), extra=meta), "acme/alpha", FO)
            tap.ok(a == NOTSEEN, f"{mode}: /proc (mountinfo, mounts, cgroup, environ, cmdline) names no host path of "
                                 "the state directory and not the run id",
                   f"{a} (an overlay's mountinfo shows its lowerdir/upperdir options; mount it with relative paths)")

            cred = f"""
look("os.environ", "\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items()).encode())
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                look(part, open(f"/proc/{{pid}}/{{part}}", "rb").read())
            except OSError:
                pass
"""
            a = srv.probe(S.finder([GH_CANARY, SECRET_CANARY, "GH_TOKEN", "SECRET_X"], ["HOME=/tmp", ALPHA],
                                   extra=cred), "acme/alpha", FO)
            tap.ok(a == NOTSEEN, f"{mode}: credentials: serve's GH_TOKEN / SECRET_X canaries are not in the sandbox's "
                                 "environment, any /proc/*/environ or cmdline it can read, or any file", a)

            if mode == "overlay":
                a = srv.probe(S.finder([HOSTTMP, f"marker-{nonce}", f"sp-hosttmp-{nonce}"], [ALPHA]), "acme/alpha", FO)
                tap.ok(a == NOTSEEN, "host /tmp: the test's marker in the host's /tmp is nowhere in the sandbox", a)
                a = srv.probe(S.finder([WORKSPACE, f"checkout-{nonce}", f"workspace-{nonce}"], [ALPHA]),
                              "acme/alpha", FO, cwd=workspace)
                tap.ok(a == NOTSEEN, "workspace: the client's working directory (the agent's checkout) is nowhere "
                                     "in the sandbox", a)

            through = f"""
for p in ["/probe/repo/tmp-link", "/probe/repo/tmpdir-link/marker-{nonce}",
          "/probe/repo/up-link{host_tmp}/marker-{nonce}", "/probe/repo/up-link{work.dir}/parent-{nonce}",
          "/probe/repo/parent-link/parent-{nonce}", "/probe/repo/passwd-link", "/probe/repo/inner-link"]:
    try:
        look(p, open(p, "rb").read())
    except OSError:
        pass
for d in ["/probe/repo/seeds-link", "/probe/repo/parent-link", "/probe/repo/tmpdir-link", "/probe/repo/up-link"]:
    try:
        for name in os.listdir(d):
            look(d + "/" + name, name.encode())
    except OSError:
        pass
scan(["/probe/repo/seeds-link", "/probe/repo/parent-link", "/probe/repo/tmpdir-link"], follow=True)
"""
            a = srv.probe(S.finder([HOSTTMP, PARENT, BETA, f"parent-{nonce}", f"marker-{nonce}", seeds_run], [ALPHA],
                                   roots=("/probe/repo",), extra=through), "acme/links", FO)
            tap.ok(a == NOTSEEN, f"{mode}: symlinks (absolute to host /tmp and the state's parent and seeds, relative "
                                 "far up, to /etc/passwd) never yield host content; a link inside the repo does", a)

            left = S.leaks(state, run, serve_pid=srv.pid)
            tap.ok(not left, f"{mode}: between requests nothing is left", left)
            rc = srv.stop()
            tap.ok(rc == 0 and not S.leaks(state, run, after_exit=True, srv=srv), f"{mode}: serve stops cleanly",
                   f"exit {rc} {S.leaks(state, run, after_exit=True, srv=srv)}")

    # ---- stage refuses special files and outside hardlinks -------------------
    # Only a clone's .git is copied (the tree comes from the commit's
    # objects), so each is planted there.
    def refused(name, prepare, needle):
        clone = work.make_clone(name, {"README.md": b"x\n"})
        prepare(clone)
        s = work.new_state()
        cfg = work.write_config([f"acme/{name}"])
        res = work.stage(s, cfg, [(f"acme/{name}", clone)])
        tap.ok(res.returncode == 1 and needle in res.stderr and not os.path.exists(os.path.join(s, "staged.json")),
               f"stage refuses {name}, naming {needle!r}, and records nothing", f"exit {res.returncode}: {res.stderr}")

    refused("fifo", lambda c: os.mkfifo(os.path.join(c, ".git/pipe")), "pipe")

    def make_socket(c):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(c, ".git/sock"))
        s.close()
    refused("socket", make_socket, "sock")
    refused("device", lambda c: os.mknod(os.path.join(c, ".git/null"), stat.S_IFCHR | 0o666, os.makedev(1, 3)),
            "null")
    outside = os.path.join(work.dir, "outside-secret")
    with open(outside, "w") as f:
        f.write("OUTSIDE\n")
    refused("hardlink", lambda c: os.link(outside, os.path.join(c, ".git/linked")), "linked")
finally:
    subprocess.run(["rm", "-rf", host_tmp])
    work.close()
tap.finish()
