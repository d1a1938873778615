"""The probe's identity exists nowhere else (docs/runtimes.md, "The probe's
identity"), and no host path shows inside the sandbox.

While a probe runs, host processes running as the identity the old design
used (uid 65534) and as the neighbouring host ids try to read and write its
repository through /proc/PID/root and every other door: each is refused,
while root (the control) gets through; even the probe's own host id, which
nothing else may hold, cannot reach the repository.  Two
concurrent probes run as two different host ids.  A probe that reads every
file under /proc/self and /proc/1 finds no host path, under serve in both
snapshot modes and in a dry-run bundle run by hand.  The host's domain name
does not show inside either.

Under gVisor the probe's host process is the sandbox (runsc-sandbox, the
sentry), which runsc runs as host 65534 whatever the bundle says, and the
repository is the gofer's (runsc-gofer, the slot's root id): the host-id
checks that cannot apply are SKIP lines naming that reason, and what does
hold is checked instead (docs/runtimes.md, "The probe's identity under
gVisor").  Under docker and sbx the workspaces live in the host's mount
namespace, by design (B.workspaces_on_host): there the snapshot directories
are checked to be under the root-only state directory instead of empty.  On
sbx the probe runs under the test double's runc with the same user
namespace mappings as under runc, so the runc identity checks apply as they
are, and the double's own host paths are needles too."""

import contextlib
import json
import os
import pwd
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, remove_bundle, serve_test  # noqa: E402

B, S = serve_test("setpriv")

tap = Tap()
work = S.Work("sp-serve-identity-")
YES, NO = S.answer("YES"), S.answer("NO")
MARKER = "IDENTITY-MARKER-5150"

# Writes a marker into its copy, then holds the sandbox open until the test
# drops a file (release()) into its copy or its /tmp (or 60 s pass).
HOLD = f"""import json, os, time
with open("/probe/repo/held.txt", "w") as f:
    f.write("{MARKER}")
for _ in range(600):
    if os.path.exists("/probe/repo/release") or os.path.exists("/tmp/release"):
        break
    time.sleep(0.1)
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES"}}, f)
"""

# Tries every door a host process has into a running sandbox: its root, its
# cwd, its fds, its environment and memory maps.  Prints what worked.
DOORS = r"""import json, os, sys
pid = sys.argv[1]
done = []
def attempt(name, fn):
    try:
        fn()
        done.append(name)
    except OSError:
        pass
attempt("read root", lambda: open(f"/proc/{pid}/root/probe/repo/held.txt").read())
attempt("list root", lambda: os.listdir(f"/proc/{pid}/root/probe/repo"))
attempt("write root", lambda: open(f"/proc/{pid}/root/probe/repo/intruder.txt", "w").write("x"))
attempt("read cwd", lambda: open(f"/proc/{pid}/cwd/held.txt").read())
attempt("list fds", lambda: os.listdir(f"/proc/{pid}/fd"))
attempt("read environ", lambda: open(f"/proc/{pid}/environ").read())
attempt("read maps", lambda: open(f"/proc/{pid}/maps").read())
attempt("read mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1))
# The snapshot directory, in serve's mount namespace: through serve's root,
# and on the host's own path (where it is an empty mount point).
snap = sys.argv[3]
attempt("list snapshot via serve", lambda: os.listdir(f"/proc/{sys.argv[2]}/root{snap}"))
attempt("read snapshot on the host", lambda: open(os.path.join(snap, "held.txt")).read())
print(json.dumps(done))
"""


def probe_pids(base, count):
    """{pid: uid} of host processes whose uid is in [base, base + count)."""
    return {pid: uid for pid, (uid, _) in S.probe_processes(base, count).items()}


GVISOR_IDENTITY = ("runsc runs every sandbox (the sentry) as host uid and gid 65534 in a user namespace of its own, "
                   "whatever the bundle says; the slot's ids are the gofer's and the files' (docs/runtimes.md, "
                   "\"The probe's identity under gVisor\")")
DOCKER_IDENTITY = ("there is no user namespace under Docker (userns-remap is daemon-wide): the probe runs as its "
                   "slot's host probe id directly, so that id, which no other host process or account may hold "
                   "(checked at start, and next), is the only way in (docs/runtimes.md, \"The probe's identity\")")
# docker and sbx (B.workspaces_on_host): the daemon resolves the paths it
# mounts in the host's mount namespace, so serve keeps the workspaces there.
WORKSPACES_ON_HOST = {
    "docker": ("under docker serve unshares no mount namespace (dockerd resolves bind sources in the host's): "
               "the workspaces live in the host's, under the root-only state directory (docs/runtimes.md, "
               "\"The snapshot: what the daemon mounts\"); checked next"),
    "sbx": ("under sbx serve unshares no mount namespace (sbx's daemon, like dockerd, resolves the paths it shares "
            "into the VM in the host's): the workspaces live in the host's, under the root-only state directory "
            "(docs/runtimes.md, sbx, \"How the snapshot gets in\"); checked next"),
}
# The doors that reach a probe's repository (the others show a process's
# own bookkeeping: its fd numbers, environment, maps).
# sbx: the test double's own host paths (its VMs' directories and the
# template's copy under /run/sp-sbx-double, its installation) are host paths
# a real VM never shows either.
DOUBLE_PATHS = [os.path.dirname(B.double.state), B.double.dir] if B.double else []
REPO_DOORS = {"read root", "list root", "write root", "read cwd", "read mem", "list snapshot via serve",
              "read snapshot on the host"}


def gvisor_held(state):
    """Under gVisor, the running sandboxes of state whose gofer serves a
    repository holding held.txt: [(sandbox pid, gofer pid)]."""
    out = []
    for pair in S.gvisor_sandboxes(state).values():
        if "sandbox" in pair and "gofer" in pair and \
                os.path.exists(f"/proc/{pair['gofer']}/root/probe/repo/held.txt"):
            out.append((pair["sandbox"], pair["gofer"]))
    return out


def snapshot_dir(state, run, serve_pid):
    """A running probe's repository as serve mounted it:
    WORK/RUN/INV/bundle/repo (not a sandbox waiting in the pool)."""
    run_dir = os.path.join(S.work_dir(state), run)
    invs = S.probe_workspaces(state, run, serve_pid)
    return os.path.join(run_dir, invs[0], "bundle", "repo") if invs else run_dir


def identity_gvisor(mode, srv, state, base):
    """The identity checks under gVisor, while two HOLD probes run: what holds
    instead of what runc gives (GVISOR_IDENTITY)."""
    held = S.wait_for(lambda: (lambda h: h if len(h) == 2 else None)(gvisor_held(state)), timeout=30) or []
    ids = {}
    for sandbox, gofer in held:
        ids[sandbox], ids[gofer] = S.process_ids(sandbox), S.process_ids(gofer)
    B.not_applicable(tap, f"{mode}: two concurrent probes run as two different host ids of serve's range, each its "
                     "slot's probe id", GVISOR_IDENTITY)
    gofer_uids = sorted({ids[g]["Uid"][0] for _, g in held})
    tap.ok(len(held) == 2 and len(gofer_uids) == 2
           and all(ids[g]["Uid"] == [ids[g]["Uid"][0]] * 4 and ids[g]["Gid"] == [ids[g]["Uid"][0]] * 4
                   and base <= ids[g]["Uid"][0] < base + 34 and (ids[g]["Uid"][0] - base) % 2 == 0 for _, g in held)
           and all(ids[sb]["Uid"] == [65534] * 4 and ids[sb]["Gid"] == [65534] * 4 for sb, _ in held),
           f"{mode}: gvisor: two concurrent probes have two gofers, each running as its own slot's root id "
           "(real, effective, saved and filesystem), and two sandboxes running as 65534: none runs as root",
           {"held": held, "ids": ids})
    if not held:
        return held
    sandbox, gofer = held[0]
    uid = ids[gofer]["Uid"][0]
    snap = snapshot_dir(state, srv.run, srv.pid)
    control = doors_as(0, gofer, srv.pid, snap)
    control_sandbox = doors_as(0, sandbox, srv.pid, snap)
    tap.ok("read root" in control and "list snapshot via serve" in control and "read maps" in control_sandbox,
           f"{mode}: control: root on the host reads the repository through the gofer's /proc/PID/root, lists the "
           "snapshot through serve's root and reads the sandbox's maps (the doors are real)",
           (control, control_sandbox))
    B.not_applicable(tap, f"{mode}: a host process as the old design's uid 65534 (65534) gets through no door into a "
                     "running probe (root, cwd, fds, environ, maps, mem, its snapshot directory)",
                     "65534 is the sandbox's own host id under gVisor, so it may list the sandbox's fd numbers like "
                     "any process of its uid; " + GVISOR_IDENTITY)
    into_sandbox, into_gofer = doors_as(65534, sandbox, srv.pid, snap), doors_as(65534, gofer, srv.pid, snap)
    tap.ok(set(into_sandbox) <= {"list fds"} and into_gofer == [],
           f"{mode}: gvisor: a host process as 65534, the sandbox's own host id, reaches nothing of the repository: "
           "at most the sandbox's fd numbers, and no door into the gofer", (into_sandbox, into_gofer))
    for who, other in (("the neighbouring id below the gofer's", uid - 1),
                       ("the neighbouring id above the gofer's (the slot's probe id, the files' owner)", uid + 1)):
        got = doors_as(other, gofer, srv.pid, snap) + doors_as(other, sandbox, srv.pid, snap)
        tap.ok(got == [], f"{mode}: gvisor: a host process as {who} ({other}) gets through no door into a running "
               "probe's gofer or sandbox (root, cwd, fds, environ, maps, mem, its snapshot directory)", got)
    got = doors_as(uid, gofer, srv.pid, snap)
    tap.ok(not REPO_DOORS & set(got),
           f"{mode}: gvisor: even as the gofer's own host id, which nothing else may hold, the repository cannot be "
           "reached (the gofer's user namespace is root's)", got)
    B.not_applicable(tap, f"{mode}: the probe's real, effective, saved and filesystem uid and gid are its host id",
                     "the probe has no host process of its own; the sandbox's and the gofer's ids are checked above; "
                     + GVISOR_IDENTITY)
    return held


def doors_as(uid, pid, serve_pid, snapshot):
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3", "-c",
                        DOORS, str(pid), str(serve_pid), snapshot], capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else [f"failed: {r.stderr.strip()[-200:]}"]


def release(srv, pid):
    """Ends a HOLD probe: pid is its process (runc, docker, sbx) or its
    gofer (gVisor).  Under gVisor into /tmp, a host tmpfs the sentry keeps
    shared: it caches the repository's mount as its own and would not see a
    file the host adds there (docs/runtimes.md, "The repository's mount is
    exclusive").  Elsewhere into the copy: the sandbox's /tmp is a tmpfs of
    its user namespace, where host root cannot create a file (EOVERFLOW)."""
    where = "tmp" if B.runs_on_sentry else "probe/repo"
    with open(f"/proc/{pid}/root/{where}/release", "w") as f:
        f.write("go")


def proc_finder(needles, controls):
    """A probe that reads every file and link under /proc/self and /proc/1:
    YES when any needle shows (a host path), NO when none does and every
    control does (so the scan really read mountinfo and the rest)."""
    return f"""import json, os
needles = [bytes.fromhex(n) for n in {[n.encode().hex() for n in needles]!r}]
controls = [bytes.fromhex(n) for n in {[c.encode().hex() for c in controls]!r}]
seen = b""
skip = {{"pagemap", "mem", "kcore", "clear_refs", "kpageflags", "kpagecount", "syscall"}}
for top in ("/proc/self", "/proc/1"):
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if dirpath.count("/") > 5:
            dirnames[:] = []
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            try:
                if os.path.islink(path):
                    seen += os.readlink(path).encode() + b"\\n"
                elif name not in skip and os.path.isfile(path):
                    with open(path, "rb") as f:
                        seen += f.read(1 << 20) + b"\\n"
            except OSError:
                pass
found = [n for n in needles if n in seen]
missing = [c for c in controls if c not in seen]
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if found else ("NO" if not missing else "UNKNOWN")}}, f)
"""


try:
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"])
    state = work.staged_state(config, [("acme/app", clone)])

    for mode in ("overlay", "copy"):
        with S.serving(work, config, state, snapshot=mode, concurrency=2) as srv:
            base = srv.probe_id_base
            results = {}
            threads = [threading.Thread(target=lambda i=i: results.setdefault(i, srv.probe(HOLD, "acme/app")))
                       for i in range(2)]
            for t in threads:
                t.start()
            if B.runs_on_sentry:
                held = identity_gvisor(mode, srv, state, base)
                snap = os.path.join(S.work_dir(state), srv.run)
                host_view = [os.path.join(d, n) for d, ds, fs in os.walk(snap) for n in ds + fs]
                tap.ok(held and not any("held.txt" in p for p in host_view),
                       f"{mode}: in the host's mount namespace the snapshot directories are empty", host_view[:10])
                for _, gofer in held:
                    release(srv, gofer)
                held = {}
            else:
                # The probes holding: a sandbox waiting in the pool has a
                # process in the range too (its init, as the slot's root id).
                held = S.wait_for(lambda: (lambda p: p if len(p) == 2 else None)(
                    {pid: uid for pid, uid in probe_pids(base, 64).items()
                     if os.path.exists(f"/proc/{pid}/root/probe/repo/held.txt")}), timeout=30) or {}
                uids = sorted(set(held.values()))
                tap.ok(len(held) == 2 and len(uids) == 2 and all(u % 2 == 1 for u in uids),
                       f"{mode}: two concurrent probes run as two different host ids of serve's range, each its "
                       f"slot's probe id", held)
            if held:
                pid, uid = next(iter(held.items()))
                # The probe's repository as serve mounted it: WORK/RUN/INV/bundle/repo.
                snap = snapshot_dir(state, srv.run, srv.pid)
                control = doors_as(0, pid, srv.pid, snap)
                tap.ok("read root" in control and "list snapshot via serve" in control,
                       f"{mode}: control: root on the host reads the repository through /proc/PID/root and "
                       "lists the snapshot through serve's root (the doors are real)", control)
                for who, other in (("the old design's uid 65534", 65534), ("the neighbouring id below", uid - 1),
                                   ("the neighbouring id above", uid + 1)):
                    got = doors_as(other, pid, srv.pid, snap)
                    tap.ok(got == [], f"{mode}: a host process as {who} ({other}) gets through no door into a "
                           "running probe (root, cwd, fds, environ, maps, mem, its snapshot directory)", got)
                own_name = (f"{mode}: even as the probe's own host id, which nothing else may hold, the repository "
                            "cannot be reached (the sandbox's user namespace is root's)")
                if not B.user_namespace:
                    B.not_applicable(tap, own_name, DOCKER_IDENTITY)
                    # What holds instead: no other host process and no
                    # account holds an id of serve's range.
                    ours = os.readlink("/proc/self/ns/pid")
                    in_range = S.probe_processes(base, 64)
                    outside = {p: u for p, (u, _) in in_range.items()
                               if not os.path.exists(f"/proc/{p}/ns/pid") or os.readlink(f"/proc/{p}/ns/pid") == ours}
                    accounts = []
                    for i in range(64):
                        with contextlib.suppress(KeyError):
                            accounts.append(pwd.getpwuid(base + i).pw_name)
                    tap.ok(in_range and not outside and not accounts and set(held) <= set(in_range),
                           f"{mode}: docker: the probe's own host id is the only way in, and nothing else holds one "
                           "of serve's range: every host process running as one is a probe in a pid namespace of "
                           "its own, and no account has one", {"outside": outside, "accounts": accounts,
                                                               "in range": sorted(in_range)})
                else:
                    got = doors_as(uid, pid, srv.pid, snap)
                    tap.ok(not {"read root", "list root", "write root", "read cwd", "read mem",
                                "list snapshot via serve", "read snapshot on the host"} & set(got), own_name, got)
                with open(f"/proc/{pid}/status") as f:
                    ids = {ln.split(":")[0]: ln.split()[1:] for ln in f if ln.startswith(("Uid:", "Gid:"))}
                tap.ok(ids["Uid"] == [str(uid)] * 4 and ids["Gid"] == [str(uid)] * 4,
                       f"{mode}: the probe's real, effective, saved and filesystem uid and gid are its host id",
                       ids)
                snap = os.path.join(S.work_dir(state), srv.run)
                empty_name = f"{mode}: in the host's mount namespace the snapshot directories are empty"
                if B.workspaces_on_host:
                    B.not_applicable(tap, empty_name, WORKSPACES_ON_HOST[B.name])
                    st = os.stat(state)
                    host_view = [os.path.join(d, n) for d, ds, fs in os.walk(snap) for n in ds + fs]
                    tap.ok(any(p.endswith("/bundle/repo/held.txt") for p in host_view)
                           and all(p.startswith(os.path.realpath(state) + "/") for p in host_view)
                           and st.st_uid == 0 and st.st_mode & 0o7777 == 0o700,
                           f"{mode}: {B.name}: the snapshot directories, which the host's namespace does show, are "
                           f"under STATE/{B.state_subdir}/<run>, and the state directory is root's and 0700 "
                           "(the neighbouring ids and 65534 read nothing there, above)",
                           (oct(st.st_mode), st.st_uid, host_view[:10]))
                else:
                    host_view = [os.path.join(d, n) for d, ds, fs in os.walk(snap) for n in ds + fs]
                    tap.ok(not any("held.txt" in p for p in host_view), empty_name, host_view[:10])
                for p in held:
                    release(srv, p)
            for t in threads:
                t.join(timeout=90)
            tap.ok(results == {0: YES, 1: YES}, f"{mode}: both probes answer", results)

            rootfs_host = os.path.realpath(os.path.join(work.rootfs, "root"))
            needles = [rootfs_host, os.path.realpath(work.rootfs), os.path.realpath(state), S.work_dir(state),
                       work.dir, "/run/sealed-probe", *DOUBLE_PATHS]
            answer = srv.probe(proc_finder(needles, ["/probe/repo", "/probe/probe.py", "python3"]), "acme/app")
            tap.ok(answer == NO, f"{mode}: a probe reading every file and link under /proc/self and /proc/1 finds "
                   "no host path of the rootfs, state, workspace or bundle (and does find /probe/repo)", answer)

    # The range must be free: a host process already running as an id of it
    # (here the third slot's probe id) makes serve refuse, naming it.
    base = int(S.probe_ids())
    holder = subprocess.Popen(["setpriv", f"--reuid={base + 5}", f"--regid={base + 5}", "--clear-groups",
                               "sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        S.wait_for(lambda: base + 5 in S.probe_processes(base, 34).get(holder.pid, (None,))[:1], timeout=10)
        srv = S.Serve(work, config, state, concurrency=4, probe_id_base=base)
        started = srv.start()
        err = srv.stderr()
        srv.cleanup()
        tap.ok(not started and f"host id {base + 5} is held by the running process {holder.pid}" in err
               and "--probe-ids" in err,
               "serve refuses a probe id range a running host process holds, naming the id and the process", err)
    finally:
        holder.kill()
        holder.wait()

    # Two proxies, two states: the second may not take ids the first holds,
    # even while the first runs no probe, and even from a range that only
    # overlaps.
    other_state = work.staged_state(config, [("acme/app", clone)])
    with S.serving(work, config, state) as first:
        for shift in (0, 2):  # the first holds base .. base + 3 (one worker and the canary)
            second = S.Serve(work, config, other_state, probe_id_base=first.probe_id_base + shift)
            started = second.start()
            err = second.stderr()
            second.cleanup()
            held = first.probe_id_base + shift
            tap.ok(not started and f"host id {held} is another proxy's" in err,
                   f"a second proxy whose range {'is' if shift == 0 else 'overlaps'} the first's refuses to start, "
                   "naming the id, while the first is idle", err)
        tap.ok(first.probe("import json\nopen('/probe/out','w').write(json.dumps({'result':'YES'}))\n",
                           "acme/app") == YES, "the first proxy still answers")

    # ... and so does an account: a passwd entry with an id of the range.
    base = int(S.probe_ids())
    account = f"sp-range-{os.getpid() % 100000}"
    if subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--uid", str(base + 1),
                       account], capture_output=True).returncode != 0:
        tap.n += 1
        print(f"ok {tap.n} - serve refuses a probe id range an account holds # SKIP useradd could not add a "
              "temporary account here", flush=True)
    else:
        try:
            srv = S.Serve(work, config, state, probe_id_base=base)
            started = srv.start()
            err = srv.stderr()
            srv.cleanup()
            tap.ok(not started and f"host id {base + 1} is the account `{account}`" in err,
                   "serve refuses a probe id range an account holds, naming the id and the account", err)
        finally:
            subprocess.run(["userdel", account], capture_output=True)

    # The domain name: serve started where the host's domain name is a
    # secret; its probes see the fixed one (bundle.h, SP_BUNDLE_DOMAINNAME).
    # gVisor has no /proc/sys/kernel/domainname: its probe asks uname (via
    # getdomainname), and runsc 20221219 answers with the bundle's hostname,
    # `probe`, ignoring config.json's domainname: a fixed value too.
    secret = "host-secret-domain"
    if B.runs_on_sentry:
        fixed = ("(none)", "probe")
        domain_probe = """import ctypes, json
buf = ctypes.create_string_buffer(256)
value = buf.value.decode() if ctypes.CDLL(None).getdomainname(buf, 256) == 0 else None
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if value in %r else ("NO" if value == %r else "UNKNOWN")}, f)
""" % (fixed, secret)
    else:
        # /proc/sys is masked (docs/threat-model.md, "Host-wide state"):
        # uname's domain name, through getdomainname, is the same field.
        domain_probe = """import ctypes, json
buf = ctypes.create_string_buffer(256)
value = buf.value.decode() if ctypes.CDLL(None).getdomainname(buf, 256) == 0 else None
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if value == "(none)" else ("NO" if value == "%s" else "UNKNOWN")}, f)
""" % secret
    wrap = ["unshare", "--uts", "sh", "-c", f'echo {secret} > /proc/sys/kernel/domainname && exec "$@"', "sh"]
    with S.serving(work, config, state, wrap=wrap) as srv:
        with open(f"/proc/{srv.pid}/cmdline", "rb") as f:
            is_serve = b"serve" in f.read()
        tap.ok(is_serve and srv.probe(domain_probe, "acme/app") == YES,
               "serve started where the host's domain name is a secret: its probe sees the fixed `(none)`"
               + (" (gvisor: or the fixed hostname `probe`, which runsc also makes the domain name)"
                  if B.runs_on_sentry else ""))
    script = work.path("domain") + ".py"
    with open(script, "w") as f:
        f.write(domain_probe)
    bundle = work.path("bundle")
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/app", "--script", script,
                        "--out", bundle, "--rootfs", work.rootfs, "--probe-ids", S.probe_ids(), *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if r.returncode == 0:
        cid = f"sp-domain-{os.getpid()}"
        root = work.path(B.state_subdir)
        subprocess.run(wrap + B.run_argv(root, bundle, cid), capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=120)
        subprocess.run(B.delete_argv(root, cid, bundle), capture_output=True)
        with open(os.path.join(bundle, "out")) as f:
            seen = f.read()
        remove_bundle(bundle)
    else:
        seen = r.stderr
    control_name = ("control: the same bundle run by hand in that namespace sees the secret (runc 1.1 ignores "
                    "config.json's domainname, which is why serve pins it in its own UTS namespace)")
    if B.runtime_is_daemon:
        B.not_applicable(tap, control_name, "under docker the container is made by dockerd, in a UTS namespace of "
                         "Docker's own with the create body's Domainname; the test's UTS namespace holds only the "
                         "replay client, so no bundle run by hand can see its domain name; checked next")
        tap.ok(seen.startswith("{") and json.loads(seen).get("result") == "YES",
               "docker: the same bundle run by hand (replayed through the daemon) sees the fixed `(none)`, not the "
               "secret", seen)
    elif B.runs_on_sentry:
        B.not_applicable(tap, control_name, "the sentry's UTS namespace is its own, so no bundle run by hand sees the "
                         "host's domain name; checked next")
        tap.ok(seen.startswith("{") and json.loads(seen).get("result") == "YES",
               "gvisor: the same bundle run by hand in that namespace sees a fixed domain name, not the secret", seen)
    else:
        tap.ok(seen.startswith("{") and json.loads(seen).get("result") == "NO", control_name, seen)

    # The loginuid: serve pins its own before runc starts, so its probes
    # cannot write one into the host's audit trail.  (gVisor has no
    # /proc/self/loginuid: nothing to set.)
    loginuid_probe = """import json, os
results = []
for uid in ("0", "1000", "65534"):
    try:
        fd = os.open("/proc/self/loginuid", os.O_WRONLY)
        try:
            os.write(fd, uid.encode())
            results.append("set")
        finally:
            os.close(fd)
    except OSError:
        results.append("refused")
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if results == ["refused"] * 3 else "NO"}, f)
"""
    with S.serving(work, config, state) as srv:
        tap.ok(srv.probe(loginuid_probe, "acme/app") == YES,
               "a probe under serve cannot set /proc/self/loginuid to root, a user or its own id")

    # A dry-run bundle, run by hand, shows none either.
    script = work.path("finder") + ".py"
    bundle = work.path("bundle")
    needles = [os.path.realpath(work.rootfs), os.path.realpath(state), os.path.realpath(work.dir), *DOUBLE_PATHS]
    with open(script, "w") as f:
        f.write(proc_finder(needles, ["/probe/repo", "python3"]))
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/app", "--script", script,
                        "--out", bundle, "--rootfs", work.rootfs, "--state", state, "--probe-ids", S.probe_ids(),
                        *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if tap.ok(r.returncode == 0, "a dry-run bundle is written", r.stderr):
        cid = f"sp-identity-{os.getpid()}"
        root = work.path(B.state_subdir)
        run = subprocess.run(B.run_argv(root, bundle, cid), capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=120)
        subprocess.run(B.delete_argv(root, cid, bundle), capture_output=True)
        with open(os.path.join(bundle, "out")) as f:
            out = f.read()
        tap.ok(run.returncode == 0 and json.loads(out or "{}").get("result") == "NO",
               f"the same probe in a dry-run bundle run by hand with {B.binary_name or 'docker (the replay of its requests)'} finds no host path either",
               run.stderr + out)
        remove_bundle(bundle)
finally:
    work.close()
tap.finish()
