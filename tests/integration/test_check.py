"""`sealed-probe-proxy check`: serve's whole preflight, canary included, then
one JSON line of what it verified.  It leaves nothing behind, refuses what
serve refuses, and refuses to run beside a serve of the same state
directory (the ledger's lock)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-check-")


def check(config, state, *extra, env=None):
    argv = [S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs, "--probe-ids",
            S.probe_ids(), *extra, *B.serve_args(extra)]
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                          env=env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


try:
    clone = work.make_clone("one", {"README.md": b"check me\n"})
    config = work.write_config(["acme/one"], maxInvocations=7)
    state = work.staged_state(config, [("acme/one", clone)])
    seed = S.seed_record(state, "acme/one")

    for mode in ("overlay", "copy"):
        r = check(config, state, "--snapshot", mode)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            report = None
        tap.ok(r.returncode == 0 and r.stderr == "" and report is not None,
               f"check passes the whole preflight and prints one JSON line ({mode})", r.stderr + r.stdout)
        report = report or {}
        tap.ok(report.get("runtime") == B.runtime and report.get("snapshot") == mode
               and report.get("canary") == "confined" and report.get("budget_remaining") == 7,
               f"check reports the runtime, the snapshot mode, the canary and the budget ({mode})", r.stdout)
        evidence = report.get("kernel_evidence")
        tap.ok(report.get("kernel") == B.kernel and isinstance(evidence, list) and evidence
               and all(isinstance(e, str) and e for e in evidence),
               f"check reports whose kernel the canary found ({B.kernel}) and its evidence ({mode})", r.stdout)
        tap.ok(report.get("seeds") == [{"repo": "acme/one", "commit": seed["commit"], "digest": seed["digest"],
                                        "bits_carried": 0, "unbounded_calls": 0}],
               f"check reports each seed's repository, commit and digest as staged, and no bits carried yet ({mode})",
               r.stdout)
        tap.ok(report.get("release") == "bucketed" and report.get("call_bits") == {"content": 2, "timing": 2.808}
               and report.get("bit_budget") is None and report.get("run_bit_budget") is None
               and report.get("run_bits_carried") == 0 and report.get("run_unbounded_calls") == 0,
               f"check reports the default release mode, bucketed, and what one call may disclose: 2 content bits "
               f"and log2(7) timing bits under the 30 s timeout ({mode})", r.stdout)
        tap.ok(report.get("rootfs", "").startswith("sha256:")
               and open(os.path.join(work.rootfs, "digest")).read().strip() == report.get("rootfs"),
               f"check reports the verified rootfs digest ({mode})", r.stdout)
        if mode == "overlay":
            # --json, as status takes it: the same one JSON line (it is all check prints).
            rj = check(config, state, "--snapshot", mode, "--json")
            try:
                same = json.loads(rj.stdout) == report
            except ValueError:
                same = False
            tap.ok(rj.returncode == 0 and rj.stderr == "" and same and rj.stdout.count("\n") == 1,
                   "check --json: accepted, and the same one JSON line", rj.stderr + rj.stdout)
        left = [p for p in (S.work_dir(state), os.path.join(state, B.state_subdir))
                if os.path.isdir(p) and os.listdir(p)]
        tap.ok(left == [] and S.mounts_under(S.work_dir(state)) == [],
               f"check leaves no workspace, {B.binary_name} state or mount behind ({mode})", left)

    r = check(config, state, B.option, "/bin/true")
    tap.ok(r.returncode == 1 and r.stdout == "" and B.option in r.stderr,
           f"check refuses a {B.binary_name} that is not {B.binary_name}, naming {B.option}", r.stderr)

    # A runc that ignores maskedPaths, as runsc 2022 does: the probe would
    # read host-wide state, and the canary refuses it (docs/threat-model.md,
    # "Host-wide state").  runc only: the other backends' runtimes are a
    # daemon, runsc (test_gvisor_verify.py) and sbx's double.
    if B.name == "runc":
        import sp_backend  # noqa: E402
        bins = sp_backend.FakeBins()
        real = sp_backend.real_binary("runc")
        try:
            unmasked = bins.script("runc", "#!/usr/bin/python3\n"
                                   "import json, os, sys\n"
                                   "args = sys.argv[1:]\n"
                                   "if 'create' in args and '--bundle' in args:\n"
                                   "    path = os.path.join(args[args.index('--bundle') + 1], 'config.json')\n"
                                   "    c = json.load(open(path))\n"
                                   "    c['linux']['maskedPaths'] = []\n"
                                   "    c['linux']['readonlyPaths'] = []\n"
                                   "    os.chmod(path, 0o644)\n"
                                   "    json.dump(c, open(path, 'w'))\n"
                                   f"os.execv({real!r}, [{real!r}] + args)\n")
            r = check(config, state, "--runc", unmasked)
            tap.ok(r.returncode == 1 and r.stdout == "" and "UNCONFINED" in r.stderr,
                   "check refuses a runc that ignores maskedPaths: the canary sees /proc/sys and /sys", r.stderr)
        finally:
            bins.close()

    other = work.write_config(["acme/one", "acme/two"], maxInvocations=7)
    r = check(other, state)
    tap.ok(r.returncode == 1 and "acme/two" in r.stderr and "no staged seed" in r.stderr,
           "check refuses a configured repository with no staged seed, naming it", r.stderr)

    with S.serving(work, config, state) as srv:
        r = check(config, state)
        tap.ok(r.returncode == 1 and r.stdout == "" and f"is in use by `serve` (pid {srv.pid})" in r.stderr,
               "check refuses while a serve holds the same state directory, naming it and its pid", r.stderr)

    secret = "CHECK-CANARY-" + os.urandom(8).hex()
    r = check(config, state, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GH_TOKEN": secret})
    tap.ok(r.returncode == 0 and secret not in r.stdout + r.stderr,
           "a token in check's environment appears in none of its output", r.stderr)

    r = subprocess.run([S.PROXY, "check"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    tap.ok(r.returncode == 2 and "--config is required" in r.stderr, "check without --config is a usage error",
           r.stderr)
    r = subprocess.run([S.PROXY, "check", "--config", config, "--socket", "/tmp/x"], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    tap.ok(r.returncode == 2, "check refuses serve-only flags such as --socket", r.stderr)
finally:
    work.close()
tap.finish()
