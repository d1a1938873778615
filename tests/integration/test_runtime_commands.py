"""What the runtime is asked to do is what the dry run says it would be
(docs/bundle.md, docs/runtimes.md): `bundle --dry-run` writes
runtime-commands.json, and `serve`, with its runtime binary behind a wrapper
that logs every argv, execs create, start, kill (on a timeout) and delete for
a probe with exactly those argv once the run id, container id and bundle path
are put in: same flags, same order, same verbs.  No flag ever comes from a
request: a script that spells `--allow-flag-override`, `--debug` and the like
reaches no argv.  Runs on the backend SP_BACKEND names (runc by default)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, remove_bundle, require_root_and  # noqa: E402

require_root_and("git")
import sp_backend as B  # noqa: E402

REAL = B.require_backend()
import sp_serve as S  # noqa: E402

STEPS = ["create", "start", "kill (on timeout or stop)", "delete"]
VERBS = {"create": "create", "start": "start", "kill (on timeout or stop)": "kill", "delete": "delete"}
NEVER = ("--allow-flag-override", "--debug", "--strace", "--profile")
MARKER = "SP-FLAG-CANARY-" + os.urandom(6).hex()
# Flags a request might try to smuggle, in the script's own text.
SMUGGLED = ("--allow-flag-override", "--debug", "--debug-log=/tmp/sp-x", "--strace", "--profile",
            "--network=host", "--net-raw", "--oci-seccomp=false", "--rootless", "--systemd-cgroup",
            f"--{MARKER}")
SCRIPT = (f"# {MARKER} " + " ".join(SMUGGLED) + "\n" + S.answer_script("YES"))
SLEEPER = "# " + " ".join(SMUGGLED) + "\nimport time\ntime.sleep(600)\n"

tap = Tap()
work = S.Work(f"sp-runtime-commands-{B.BACKEND}-")
bins = B.FakeBins()


def dry_run(config, state, script_text, *extra):
    script = work.path("script") + ".py"
    with open(script, "w") as f:
        f.write(script_text)
    out = work.path("bundle")
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/one", "--script",
                        script, "--out", out, "--rootfs", work.rootfs, "--state", state, *extra,
                        *S.B.proxy_args(extra)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    doc = None
    try:
        with open(os.path.join(out, "runtime-commands.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        pass
    remove_bundle(out)
    return r, doc, out


def after(argv, flag):
    i = argv.index(flag) if flag in argv else -1
    return argv[i + 1] if 0 <= i < len(argv) - 1 else None


def template(argv, run, cid, bundle):
    """argv with what differs per run put as placeholders."""
    out = []
    for a in argv:
        if bundle is not None:
            a = a.replace(bundle, "<BUNDLE>")
        out.append(a.replace(cid, "<CID>").replace(run, "<RUN>"))
    return out


def verb_of(argv):
    return next((a for a in argv[1:] if a in ("create", "start", "kill", "delete", "--version", "state", "list")),
                None)


def forbidden_in(argvs):
    """Every argv element that is a never-flag, or that came from the script."""
    bad = []
    for argv in argvs:
        for a in argv:
            if a.split("=")[0] in NEVER or MARKER in a or a in SMUGGLED:
                bad.append(a)
    return bad


try:
    clone = work.make_clone("one", {"README.md": b"commands\n"})
    staged_config = work.write_config(["acme/one"])
    config = work.write_config(["acme/one"], runtime=B.RUNTIME, timeout=5, maxInvocations=50)
    state = work.staged_state(staged_config, [("acme/one", clone)])
    wrapper, log = bins.logging_wrapper(REAL, B.BINARY_NAME)
    root_dir = os.path.join(state, B.STATE_DIR_NAME)

    # ---- the dry run ----
    r, doc, dry_out = dry_run(config, state, SCRIPT, B.BINARY_OPTION, wrapper)
    tap.ok(r.returncode == 0 and doc is not None, "dry run writes runtime-commands.json beside config.json",
           r.stderr)
    doc = doc or {"commands": []}
    steps = [c.get("step") for c in doc.get("commands", [])]
    tap.ok(doc.get("runtime") == B.RUNTIME and steps == STEPS,
           f"runtime-commands.json names runtime {B.RUNTIME} and the steps create, start, kill, delete in order",
           json.dumps(doc)[:1500])
    dry = {c["step"]: c["argv"] for c in doc.get("commands", []) if "step" in c and "argv" in c}
    create = dry.get("create", [])
    dry_cid = create[-1] if create else ""
    dry_run_id = dry_cid[len("sp-"):].rsplit("-", 1)[0] if dry_cid.startswith("sp-dry-") else ""
    dry_root = os.path.join(root_dir, dry_run_id)
    tap.ok(dry_run_id.startswith("dry-") and dry_cid == f"sp-{dry_run_id}-0"
           and after(create, "--bundle") == dry_out and after(create, "--pid-file") == f"{dry_root}/{dry_cid}.pid"
           and all(after(argv, "--root") == dry_root for argv in dry.values()),
           "dry run: container sp-dry-XXXX-0, the --out bundle, its pid file and --root below --state",
           json.dumps(dry)[:1500])
    tap.ok(all(argv and argv[0] == os.path.realpath(wrapper) for argv in dry.values())
           and all(verb_of(dry.get(s, [])) == VERBS[s] for s in STEPS),
           f"dry run: every command runs the {B.BINARY_OPTION} binary, with its step's verb",
           json.dumps(dry)[:1500])
    bad = forbidden_in(dry.values())
    tap.ok(bad == [] and MARKER not in json.dumps(doc),
           "dry run: no flag from the request, and never --allow-flag-override, --debug, --strace or --profile",
           bad)
    r2, doc2, _ = dry_run(config, state, "print(1)\n")
    steps2 = {c["step"]: c["argv"] for c in (doc2 or {}).get("commands", [])}
    tap.ok(r2.returncode == 0 and steps2 and all(a[0] == REAL for a in steps2.values()),
           f"dry run without {B.BINARY_OPTION}: the installed {B.BINARY_NAME}, {REAL}", json.dumps(doc2)[:800])
    if B.BACKEND == "gvisor":
        flags = create[3:6] if len(create) > 6 else []
        tap.ok(flags == ["--network=none", "--oci-seccomp", "--platform=ptrace"],
               "dry run (gvisor): --network=none --oci-seccomp --platform=ptrace follow --root", create)

    # ---- serve, through the logging wrapper ----
    extra = (B.BINARY_OPTION, wrapper)
    with S.serving(work, config, state, extra=extra) as srv:
        run = B.run_of(state)
        yes = srv.probe(SCRIPT, "acme/one")
        tap.ok(yes == S.answer("YES"), "serve answers a probe through the logging wrapper", yes)
        slept = srv.probe(SLEEPER, "acme/one")
        tap.ok(slept == S.ERROR_LINE, "a probe past the timeout answers ERROR", slept)
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
    records = S.audit_lines(state)
    tap.ok(run is not None and [r["status"] for r in records] == ["answered", "timed_out"],
           "the audit log holds the answered probe and the timed-out one", records)
    logged = B.read_log(log)
    real_wrapper = os.path.realpath(wrapper)
    tap.ok(logged and all(a[0] == real_wrapper for a in logged),
           f"serve runs every {B.BINARY_NAME} command through the binary it verified", logged[:3])

    def commands_of(cid):
        return [a for a in logged if cid in a]

    expect = {"answered": ["create", "start", "delete"], "timed_out": ["create", "start", "kill", "delete"]}
    for rec in records[:2]:
        inv = S.audit_id_inv(rec)
        cid = f"sp-{run}-{inv}"
        cmds = commands_of(cid)
        verbs = [verb_of(a) for a in cmds]
        tap.ok(verbs == expect[rec["status"]],
               f"serve's commands for the {rec['status']} probe: {' -> '.join(expect[rec['status']])}",
               [" ".join(a) for a in cmds])
        bundle = after(cmds[0], "--bundle") if cmds else None
        work_run = os.path.join(S.work_dir(state), run or "")
        tap.ok(bundle is not None and bundle.startswith(work_run + "/")
               and after(cmds[0], "--pid-file") == os.path.join(root_dir, run, cid + ".pid"),
               f"serve's create ({rec['status']}): a bundle in its work directory, the pid file in its --root",
               cmds[:1])
        for argv in cmds:
            step = {"create": "create", "start": "start", "kill": "kill (on timeout or stop)",
                    "delete": "delete"}.get(verb_of(argv))
            want = template(dry.get(step, []), dry_run_id, dry_cid, dry_out)
            got = template(argv, run, cid, bundle)
            tap.ok(step is not None and got == want,
                   f"serve's {verb_of(argv)} ({rec['status']}) is the dry run's, up to run, container and bundle",
                   f"dry:   {want}\nserve: {got}")
    bad = forbidden_in(logged)
    tap.ok(bad == [] and not any(MARKER in " ".join(a) for a in logged),
           "serve: no argv holds a flag from the request, nor --allow-flag-override, --debug, --strace, --profile",
           bad)
    others = [a for a in logged if verb_of(a) not in ("create", "start", "kill", "delete", "--version")]
    tap.ok(others == [], f"serve runs {B.BINARY_NAME} only for --version, create, start, kill and delete",
           others[:5])
    left = B.leftover_containers(state)
    tap.ok(left == [] and S.cgroup_dirs(run or "none") == [], "nothing of the run is left", left)
finally:
    made = list(bins.dirs)
    bins.close()
    B.force_delete(work.states[0] if work.states else "/nonexistent")
    work.close()
tap.ok(made and not any(os.path.lexists(d) for d in made), "the wrapper and its directory are removed")
tap.finish()
