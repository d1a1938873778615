"""The gVisor backend refuses, before anything is launched, a `--runsc` that
is not root's runsc, and a runsc that does not give the sandbox it promises
(docs/runtimes.md): `check` and `serve` alike exit 1 with a message naming
the cause, write no ready file, leave no container in STATE/runsc and no
audit line.  The cases: runc copied as runsc, a runsc owned by another uid,
a missing file, a wrapper that drops `--oci-seccomp` (the canary finds no
seccomp), runc in disguise (it answers `--version` as runsc does), and a
wrapper that drops the bundle's covers (the canary finds /proc/sys).  The
real runsc passes `check`, which shows the kernel evidence."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, require_root_and  # noqa: E402

require_root_and("runc", "git")  # runsc: sp_backend (sp_harness.backend())
import sp_backend as B  # noqa: E402
import sp_serve as S  # noqa: E402

RUNSC = B.real_binary("runsc")
RUNC = B.real_binary("runc")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

tap = Tap()
work = S.Work("sp-gvisor-verify-")
bins = B.FakeBins()


def check(config, state, *extra):
    argv = [S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs, "--probe-ids",
            S.probe_ids(), "--run-dir", S.B.run_dir, *extra]
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, env=ENV)


def processes_naming(path):
    """Live processes whose command line names path (a runsc sandbox or
    gofer of this state directory names its --root)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if path.encode() in cmd and st != "Z":
            found.append((int(pid), cmd.replace(b"\0", b" ")[:160]))
    return found


def nothing_launched(state, message=""):
    """What a refused start left: [] when nothing.  A container id in the
    message (sp-RUN-N) names a run whose cgroups must be gone too."""
    found = B.leftover_containers(state)
    for run in set(re.findall(r"\bsp-([a-z0-9]{12})-[0-9]+", message)):
        found += [f"cgroup {d}" for d in S.cgroup_dirs(run)]
        found += [f"process {p} in run {run}'s cgroups" for p in S.processes_in_run_cgroups(run)]
    found += [f"root {r}" for r in B.runtime_roots(state, "runsc") + B.runtime_roots(state, "runc")
              if os.listdir(r)]
    lines = S.audit_lines(state, admissions=True)
    if lines:
        found.append(f"audit lines: {lines}")
    procs = processes_naming(state)
    if procs:
        found.append(f"processes: {procs}")
    if os.path.isdir(S.work_dir(state)) and os.listdir(S.work_dir(state)):
        found.append(f"{S.work_dir(state)} holds {os.listdir(S.work_dir(state))}")
    return found


def refused_both(case, binary, needles, staged_config, config, clone):
    """check and serve with --runsc binary: each exits 1, naming the cause
    (every string of needles in its message), with nothing launched."""
    state = work.staged_state(staged_config, [("acme/one", clone)])
    r = check(config, state, "--runsc", binary)
    msg = r.stderr
    tap.ok(r.returncode == 1 and r.stdout == "" and all(n in msg for n in needles),
           f"check refuses {case}, naming {needles}", f"exit {r.returncode}: {msg}{r.stdout}")
    left = nothing_launched(state, msg)
    tap.ok(left == [], f"check refusing {case} launched nothing and left nothing", left)

    state = work.staged_state(staged_config, [("acme/one", clone)])
    srv = S.Serve(work, config, state, extra=("--runsc", binary))
    try:
        ready = srv.start(ready_timeout=120)
        rc = srv.stop() if ready else srv.proc.wait(timeout=60)
        msg = srv.stderr()
        tap.ok(not ready and rc == 1 and all(n in msg for n in needles),
               f"serve refuses {case}, naming {needles}", f"ready {ready}, exit {rc}: {msg}")
        tap.ok(srv.ready_content() is None and not os.path.lexists(srv.socket),
               f"serve refusing {case} writes no ready file and leaves no socket", srv.ready_content())
        left = nothing_launched(state, msg)
        tap.ok(left == [], f"serve refusing {case} launched nothing and left nothing", left)
    finally:
        srv.cleanup()
        B.force_delete(state)


try:
    clone = work.make_clone("one", {"README.md": b"verify me\n"})
    # stage takes a runc config only (verb_stage.c); serve and check then
    # run the same repositories on gvisor.
    staged_config = work.write_config(["acme/one"], maxInvocations=50)
    config = work.write_config(["acme/one"], maxInvocations=50, runtime="gvisor")

    # Positive: the real runsc.
    state = work.staged_state(staged_config, [("acme/one", clone)])
    r = check(config, state, "--runsc", RUNSC)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = {}
    tap.ok(r.returncode == 0 and report.get("runtime") == "gvisor" and report.get("canary") == "confined",
           "check passes with the real runsc: runtime gvisor, canary confined", r.stderr + r.stdout)
    evidence = report.get("kernel_evidence")
    tap.ok(report.get("kernel") == "gvisor" and isinstance(evidence, list) and evidence
           and all(isinstance(e, str) and e for e in evidence) and any("/proc/version" in e for e in evidence),
           "check prints kernel gvisor and non-empty kernel_evidence naming /proc/version", r.stdout)
    left = nothing_launched(state)
    tap.ok(left == [], "check with the real runsc leaves no container, root or process behind", left)

    # (a) runc, root's, in a root-only directory, named runsc.
    runc_copy = bins.copy(RUNC, "runsc")
    version = subprocess.run([RUNC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    refused_both("a copy of runc named runsc", runc_copy, [runc_copy, f"`{version}`", "--runsc"],
                 staged_config, config, clone)

    # (b) the real runsc, owned by a uid other than root.
    foreign = bins.copy(RUNSC, "runsc", owner=65534)
    refused_both("a runsc not owned by root", foreign, [foreign, "not owned by root"], staged_config, config,
                 clone)

    # (c) a file that does not exist.
    missing = os.path.join(bins.new_dir(), "runsc")
    refused_both("a missing runsc", missing, [missing, "No such file or directory"], staged_config, config,
                 clone)

    # (d) the real runsc behind a wrapper that drops --oci-seccomp: the
    # sandbox runs with no seccomp filter, and the canary says so.
    no_seccomp = bins.script("runsc", "#!/bin/sh\n"
                             "for a; do shift; [ \"$a\" = --oci-seccomp ] || set -- \"$@\" \"$a\"; done\n"
                             f"exec {RUNSC} \"$@\"\n")
    refused_both("a runsc that drops --oci-seccomp", no_seccomp,
                 ["canary: the sandbox is not confined", "UNCONFINED"], staged_config, config, clone)

    # (e) runc in disguise: it answers --version as runsc, and runs runc
    # without the flags runc does not know.
    disguise = bins.script("runsc", "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then\n"
                           "  echo 'runsc version 0.0~20221219.0'; echo 'spec: 1.0.2-dev'; exit 0\n"
                           "fi\n"
                           "for a; do shift; case \"$a\" in\n"
                           "  --network=none|--oci-seccomp|--platform=*) ;;\n"
                           "  *) set -- \"$@\" \"$a\" ;;\n"
                           "esac; done\n"
                           f"exec {RUNC} \"$@\"\n")
    refused_both("runc disguised as runsc", disguise, ["canary", disguise], staged_config, config, clone)

    # (f) a runsc that runs the bundle without its covers (the empty mounts
    # over /proc/sys, /sys and /dev's extras, docs/bundle.md): the sentry's
    # /proc/sys shows, and the canary finds host-wide state.
    uncovered = bins.script("runsc", "#!/usr/bin/python3\n"
                            "import json, os, sys\n"
                            "args = sys.argv[1:]\n"
                            "if 'create' in args and '--bundle' in args:\n"
                            "    path = os.path.join(args[args.index('--bundle') + 1], 'config.json')\n"
                            "    c = json.load(open(path))\n"
                            "    c['mounts'] = [m for m in c['mounts'] if m['type'] != 'tmpfs' or m['destination'] in "
                            "('/dev', '/tmp')]\n"
                            "    os.chmod(path, 0o644)\n"
                            "    json.dump(c, open(path, 'w'))\n"
                            f"os.execv({RUNSC!r}, [{RUNSC!r}] + args)\n")
    refused_both("a runsc that drops the bundle's covers of /proc/sys and /sys", uncovered,
                 ["canary: the sandbox is not confined", "UNCONFINED"], staged_config, config, clone)

    # Options that do not fit the backend.
    state = work.staged_state(staged_config, [("acme/one", clone)])
    r = check(config, state, "--runc", RUNC)
    tap.ok(r.returncode in (1, 2) and r.stdout == "" and "--runc" in r.stderr and "gvisor" in r.stderr,
           "check refuses --runc when the runtime is gvisor, naming --runc", f"exit {r.returncode}: {r.stderr}")
    srv = S.Serve(work, config, state, extra=("--runc", RUNC))
    try:
        ready = srv.start()
        rc = srv.stop() if ready else srv.proc.wait(timeout=60)
        tap.ok(not ready and rc in (1, 2) and "--runc" in srv.stderr() and srv.ready_content() is None,
               "serve refuses --runc when the runtime is gvisor, naming --runc", f"exit {rc}: {srv.stderr()}")
    finally:
        srv.cleanup()
    r = check(config, state, "--gvisor-platform", "bogus")
    tap.ok(r.returncode == 2 and r.stdout == "" and "--gvisor-platform" in r.stderr,
           "check: --gvisor-platform bogus is a usage error naming the option", f"exit {r.returncode}: {r.stderr}")
    srv = S.Serve(work, config, state, extra=("--gvisor-platform", "bogus"))
    try:
        ready = srv.start()
        rc = srv.stop() if ready else srv.proc.wait(timeout=60)
        tap.ok(not ready and rc == 2 and "--gvisor-platform" in srv.stderr() and srv.ready_content() is None,
               "serve: --gvisor-platform bogus is a usage error naming the option", f"exit {rc}: {srv.stderr()}")
    finally:
        srv.cleanup()
    left = nothing_launched(state)
    tap.ok(left == [], "the refused options launched nothing and left nothing", left)
finally:
    made = list(bins.dirs)
    bins.close()
    for s in work.states:
        B.force_delete(s)
    work.close()
tap.ok(made and not any(os.path.lexists(d) for d in made), "every fake binary and its directory is removed",
       [d for d in made if os.path.lexists(d)])
tap.finish()
