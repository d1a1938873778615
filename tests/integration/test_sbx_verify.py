"""The sbx backend refuses, before anything runs for an agent, every sbx that
cannot give the sandbox it promises (docs/runtimes.md, "sbx"), against the
test double's modes (tests/doubles/sbx; a TEST DOUBLE, since Docker
Sandboxes cannot run here):

    missing binary   --sbx names no file                 the path, "No such file"
    incapable        0.37.1: create lacks five controls   each of the five flags, with why
    unaudited        0.38.0                               "0.38.0", "not one this project has audited"
    unauthenticated  `sbx ls` fails                       "`sbx ls` failed", "signed in"
    hostile-ls       `ls -q` lists `--all`, `-rf`         "is not a sandbox name"
    hanging-create   create never returns                 "create", the canary
    unstoppable      stop fails, the VM stays             "stop", the canary

For each, `check` exits 1 with nothing on stdout and a message holding every
needle; the double's argv log shows that no probe ran (no `exec` but the
canary's, in the modes that get that far) and that nothing else was tried
after the cause (no fallback: no later step, no second create).  `serve`
refuses the same way (no ready file).  An unpinned template and a relative
--sbx are usage errors naming the option; an sbx option with another
runtime is refused, naming both.

Registered once, on the sbx backend (tests/meson.build's
integration_backend_own_tests)."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test("runc")
from sp_sbx import SbxDouble  # noqa: E402

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
FIVE = ("--network", "--pids-limit", "--disk-limit", "--ulimit-fsize", "--mount-target")
PREFLIGHT = [["version"], ["ls", "-q"], ["create", "--help"], ["exec", "--help"]]

tap = Tap()
work = S.Work("sp-sbx-verify-")
doubles = []


def double(mode):
    d = SbxDouble(work.rootfs, mode=mode)
    doubles.append(d)
    return d


def check(config, state, *args, timeout=300):
    argv = [S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs, "--probe-ids",
            S.probe_ids(), "--run-dir", B.run_dir, *args]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, env=ENV)
    return r, time.monotonic() - t0


def verbs(d):
    """The double's calls (argv after the binary), in order."""
    return [argv for argv, _ in d.argv_log()]


def runs(d, verb):
    """The calls of verb that act (not its --help)."""
    return [c for c in verbs(d) if c[:1] == [verb] and "--help" not in c]


def refused(name, r, needles):
    msg = r.stderr
    tap.ok(r.returncode == 1 and r.stdout == "" and all(n in msg for n in needles),
           f"{name}: check exits 1, prints nothing on stdout, and its message names {needles}", msg[-800:])


# mode, needles, the calls the log must hold exactly (None: checked below)
CASES = [
    ("incapable", ["0.37.1", "lacks 5 controls"] + [f"create {f} (" for f in FIVE], PREFLIGHT),
    ("unaudited", ["0.38.0", "is not one this project has audited", "0.37.1"], PREFLIGHT),
    ("unauthenticated", ["`sbx ls` failed", "signed in"], PREFLIGHT[:2]),
    ("hostile-ls", ["sbx ls: line", "is not a sandbox name"], PREFLIGHT[:2]),
]

try:
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"], timeout=5)
    state = work.staged_state(config, [("acme/app", clone)])

    # ---- verify's refusals: each names its cause, and nothing ran after it ----
    for mode, needles, calls in CASES:
        d = double(mode)
        r, _ = check(config, state, *d.proxy_args())
        refused(mode, r, needles + [d.path])
        tap.ok(verbs(d) == calls, f"{mode}: the double got exactly the preflight's calls up to the cause "
                                  f"({[' '.join(c) for c in calls]}): no VM was made, no probe ran", verbs(d))
        tap.ok(d.vms() == [], f"{mode}: no VM is left", d.vms())

    # An incapable release under serve: no ready file, exit 1, the same message.
    d = double("incapable")
    srv = S.Serve(work, config, state, binary=d.path, extra=["--sbx-template", d.template])
    try:
        started = srv.start(ready_timeout=60)
        rc = srv.proc.wait(timeout=60) if not started else None
        tap.ok(not started and rc == 1 and all(f"create {f} (" in srv.stderr() for f in FIVE),
               "incapable: serve refuses to start (exit 1, no ready file), naming the five missing controls",
               (started, rc, srv.stderr()[-600:]))
        tap.ok(runs(d, "exec") == [] and runs(d, "create") == [],
               "incapable: serve made no VM and ran nothing", verbs(d))
    finally:
        srv.cleanup()

    # ---- a missing binary ----
    missing = os.path.join(work.dir, "no-such-sbx")
    r, _ = check(config, state, "--sbx", missing, "--sbx-template", doubles[0].template)
    refused("missing binary", r, [missing, "No such file"])

    # ---- the canary's VM: created, but create never returns / stop fails ----
    d = double("hanging-create")
    r, took = check(config, state, *d.proxy_args())
    refused("hanging-create", r, ["canary", "create"])
    tap.ok(len(runs(d, "create")) == 1 and runs(d, "exec") == [],
           "hanging-create: one create (the canary's), killed at its timeout; no exec, no second try",
           (round(took, 1), verbs(d)))
    tap.ok(d.vms() == [], "hanging-create: no VM is left", d.vms())

    d = double("unstoppable")
    r, _ = check(config, state, *d.proxy_args())
    refused("unstoppable", r, ["canary", "stop"])
    tap.ok(len(runs(d, "exec")) == 1 and len(runs(d, "create")) == 1 and runs(d, "stop") != [],
           "unstoppable: one VM, the canary's, one exec, then a stop that failed; nothing after it ran a probe",
           verbs(d))
    left = d.vms()
    tap.ok(len(left) == 1 and left[0].startswith("sp-"),
           "unstoppable: the VM that will not stop is the one left, for the operator (and the next start's "
           "orphan sweep) to find", left)

    # ---- operator errors before any backend call ----
    d = double("capable")
    for template, why in (("sealed-probe/rootfs:latest", "a tag alone"),
                          ("sealed-probe/rootfs@sha256:abc", "a short digest")):
        r, _ = check(config, state, "--sbx", d.path, "--sbx-template", template)
        tap.ok(r.returncode != 0 and "--sbx-template" in r.stderr and "pinned by digest" in r.stderr,
               f"--sbx-template with {why} is refused, naming the option and why", r.stderr[-300:])
    r, _ = check(config, state, "--sbx", "relative/sbx", "--sbx-template", d.template)
    tap.ok(r.returncode != 0 and "--sbx: `" in r.stderr and "is not an absolute path" in r.stderr, "a relative --sbx is refused",
           r.stderr[-300:])
    r, _ = check(config, state, "--sbx", d.path)
    tap.ok(r.returncode == 1 and "--sbx-template" in r.stderr and "pinned by digest" in r.stderr,
           "runtime sbx without --sbx-template is refused, naming it", r.stderr[-300:])
    runc_config = work.write_config(["acme/app"], runtime="runc")
    r, _ = check(runc_config, state, "--sbx", d.path, "--sbx-template", d.template)
    tap.ok(r.returncode == 1 and "--sbx: sealedProbes.runtime is `runc`, not `sbx`" in r.stderr,
           "--sbx with runtime runc is refused, naming both (never silently unused)", r.stderr[-300:])
    tap.ok(verbs(d) == [], "none of these operator errors called the sbx binary", verbs(d))

    # ---- control: the capable double passes the whole preflight ----
    r, _ = check(config, state, *d.proxy_args())
    tap.ok(r.returncode == 0 and '"canary":"confined"' in r.stdout and '"kernel":"microvm"' in r.stdout,
           "control: the capable double passes check (canary confined, kernel microvm)", r.stderr[-500:])
    tap.ok(d.vms() == [], "control: the canary's VM is gone afterwards", d.vms())
finally:
    for d in doubles:
        d.close()
    work.close()
tap.finish()
