"""Each operator-facing refusal says what to do, not only what is wrong
(docs/operations.md, "Troubleshooting"; issue 30, item 7): the real program
is run in each situation and the what-to-do words are checked.

  a missing rootfs          serve, check, bundle: `sealed-probe-rootfs build`
  a missing state directory serve, check, bundle, status: run `stage` first;
                            unstage: nothing is staged there
  a hardlinked clone        stage: `git clone --no-hardlinks`
  docker unreachable        check: start dockerd / --docker-socket PATH
  the state directory held  check: the holder's verb and pid, and `kill PID`
  the budget ledger held    check: the holder's pid (from /proc/locks)
  a relative --runc/--runsc/--sbx   the option named, never sealedProbes.runtime
  stage as non-root         "not root", said once, before any token complaint
  status/bundle/unstage as non-root the state directory is root's: run as root
  uncommitted changes       stage warns, naming the repository and HEAD, with
                            a count and no path or content of the clone

Nothing here starts a sandbox: every case stops in preflight or staging, so
it runs once, on the first backend (tests/meson.build), from one staged
state directory shared by the cases that need one."""

import fcntl
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
NOBODY = 65534
CANARY_NAME = "canary-name-7f3a9c.txt"
CANARY_TEXT = "canary-content-5b1e42"

tap = Tap()
work = S.Work("sp-messages-")


def run(*argv, user=None, env=None):
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user is not None else []
    return subprocess.run(prefix + [S.PROXY, *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120, env=env or ENV)


def says(r, verb, *words, code=None):
    """Exit code (non-zero unless given), the verb's own prefix, and every
    one of words in stderr."""
    ok_code = r.returncode != 0 if code is None else r.returncode == code
    return ok_code and f"sealed-probe-proxy: {verb}: " in r.stderr and all(w in r.stderr for w in words)


def script_file():
    path = work.path("script") + ".py"
    with open(path, "w") as f:
        f.write("print('YES')\n")
    return path


def bundle_argv(config, state, script, *extra):
    return ["bundle", "--dry-run", "--config", config, "--repo", "acme/one", "--script", script,
            "--out", work.path("bundle"), "--state", state, *extra]


try:
    clone = work.make_clone("one", {"README.md": b"messages\n", CANARY_NAME: b"committed\n"})
    config = work.write_config(["acme/one"])
    state = work.staged_state(config, [("acme/one", clone)])
    rootfs = work.rootfs
    script = script_file()
    missing = os.path.join(work.dir, "missing")

    # ---- a missing rootfs: how to build one ----------------------------------
    for verb in ("serve", "check"):
        r = run(verb, "--config", config, "--state", state, "--rootfs", missing, *B.proxy_args())
        tap.ok(says(r, verb, f"--rootfs: `{missing}`", "sealed-probe-rootfs build", f"--out {missing}"),
               f"{verb} with --rootfs pointing nowhere says to build it with `sealed-probe-rootfs build`", r.stderr)
    r = run(*bundle_argv(config, state, script, "--rootfs", missing))
    tap.ok(says(r, "bundle", "--rootfs", "sealed-probe-rootfs build"),
           "bundle --dry-run with --rootfs pointing nowhere says to build it", r.stderr)
    r = run("check", "--config", config, "--state", state, "--rootfs", work.dir, *B.proxy_args())
    tap.ok(says(r, "check", "sealed-probe-rootfs build --out DIR", "holding `root` and `digest`"),
           "check with --rootfs at a directory that is no rootfs says what a rootfs directory holds", r.stderr)
    default_rootfs = "/var/lib/sealed-probe/rootfs"
    if os.path.exists(default_rootfs):
        tap.skip("check without --rootfs, the default absent, says to build it",
                 f"{default_rootfs} exists on this machine (the case is the same code as --rootfs above)")
    else:
        r = run("check", "--config", config, "--state", state, *B.proxy_args())
        tap.ok(says(r, "check", f"`{default_rootfs}`", "sealed-probe-rootfs build"),
               "check without --rootfs, the default absent, says to build it", r.stderr)

    # ---- a missing state directory: stage first ------------------------------
    for verb in ("serve", "check"):
        r = run(verb, "--config", config, "--state", missing, "--rootfs", rootfs, *B.proxy_args())
        tap.ok(says(r, verb, f"`{missing}`", "run `sealed-probe-proxy stage` first"),
               f"{verb} with a missing state directory says to run stage first", r.stderr)
    r = run(*bundle_argv(config, missing, script, "--rootfs", rootfs))
    tap.ok(says(r, "bundle", f"`{missing}`", "run `sealed-probe-proxy stage` first"),
           "bundle --dry-run --state with a missing state directory says to run stage first", r.stderr)
    r = run("status", "--state", missing)
    tap.ok(says(r, "status", f"`{missing}`", "run `sealed-probe-proxy stage` first"),
           "status with a missing state directory says to run stage first", r.stderr)
    r = run("unstage", "--state", missing)
    tap.ok(says(r, "unstage", f"`{missing}`", "nothing is staged there", "check --state")
           and "stage` first" not in r.stderr,
           "unstage with a missing state directory says nothing is staged there (not: stage first)", r.stderr)

    # ---- a hardlinked clone: --no-hardlinks ----------------------------------
    linked = os.path.join(work.dir, "clones", "linked")
    subprocess.run(["git", "clone", "-q", os.path.join(work.dir, "src", "one"), linked], check=True,
                   capture_output=True, env=work.git_env)
    linked_state = work.new_state()
    r = work.stage(linked_state, config, [("acme/one", linked)])
    tap.ok(says(r, "stage", f"`{linked}`", "is a hardlink", "clone it again with `git clone --no-hardlinks`"),
           "stage refuses a clone whose objects are hard links and says to clone with --no-hardlinks", r.stderr)

    # ---- docker unreachable: start it or name its socket ---------------------
    docker_config = work.path("config-docker") + ".json"
    with open(docker_config, "w") as f:
        f.write('{"sealedProbes": {"enabled": true, "privateRepos": ["acme/one"], "runtime": "docker"}}')
    nosock = os.path.join(work.dir, "no-docker.sock")
    r = run("check", "--config", docker_config, "--state", state, "--rootfs", rootfs, "--docker-socket", nosock)
    tap.ok(says(r, "check", "--docker-socket: the Docker daemon is not reachable", "start dockerd",
                "give the socket it listens on with --docker-socket PATH") and nosock not in r.stderr,
           "check with no daemon at --docker-socket says to start dockerd or give its socket (never its path)",
           r.stderr)

    # ---- the state directory held: who, and how to stop it -------------------
    # A classic POSIX lock conflicts with the proxy's OFD lock; the content
    # names the holder as a serve would.
    holder = os.open(os.path.join(state, "owner.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(holder, f"serve {os.getpid()}\n".encode())
        r = run("check", "--config", config, "--state", state, "--rootfs", rootfs, *B.proxy_args())
        tap.ok(says(r, "check", f"is in use by `serve` (pid {os.getpid()})", f"kill {os.getpid()}"),
               "check on a held state directory names the holder's pid and says to wait or stop it", r.stderr)
    finally:
        os.unlink(os.path.join(state, "owner.lock"))
        os.close(holder)

    # ---- the budget ledger held: its pid -------------------------------------
    ledger_lock = os.open(os.path.join(state, "budget.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(ledger_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = run("check", "--config", config, "--state", state, "--rootfs", rootfs, *B.proxy_args())
        tap.ok(says(r, "check", f"the budget ledger is in use by pid {os.getpid()}", "stop it"),
               "check on a held budget ledger names the holder's pid and says to stop it", r.stderr)
    finally:
        os.close(ledger_lock)

    # ---- a relative runtime binary: the option is blamed ---------------------
    for option, runtime in (("--runc", "runc"), ("--runsc", "gvisor"), ("--sbx", "sbx")):
        cfg = work.path(f"config-{runtime}") + ".json"
        with open(cfg, "w") as f:
            f.write('{"sealedProbes": {"enabled": true, "privateRepos": ["acme/one"], "runtime": "%s"}}' % runtime)
        name = option[2:]
        extra = ["--sbx-template", "t@sha256:" + "0" * 64] if runtime == "sbx" else []
        r = run("check", "--config", cfg, "--state", state, "--rootfs", rootfs, option, name, *extra)
        tap.ok(says(r, "check", f"{option}: `{name}` is not an absolute path", f"`command -v {name}`", code=2)
               and "sealedProbes.runtime" not in r.stderr,
               f"check {option} {name} blames {option}, not sealedProbes.runtime, and says to give the full path",
               r.stderr)
    r = run(*bundle_argv(config, state, script, "--rootfs", rootfs, "--runc", "runc"))
    tap.ok(says(r, "bundle", "--runc: `runc` is not an absolute path", code=2)
           and "sealedProbes.runtime" not in r.stderr,
           "bundle --runc runc blames --runc, not sealedProbes.runtime", r.stderr)

    # ---- as non-root ---------------------------------------------------------
    if shutil.which("setpriv") is None:
        for name in ("stage as non-root says `not root` once, before the token",
                     "status, bundle and unstage as non-root say the state directory is root's"):
            tap.skip(name, "`setpriv` is not installed")
    else:
        remote_config = work.write_config(["acme/one", "acme/remote"])
        r = run("stage", "--config", remote_config, "--state", work.path("state-nobody"),
                "--clone", f"acme/one={clone}", user=NOBODY)
        tap.ok(says(r, "stage", "not root", "run it as root") and "stage: stage" not in r.stderr
               and "credentials" not in r.stderr and "token" not in r.stderr,
               "stage as non-root says `not root` and to run it as root, once, before any token complaint",
               r.stderr)
        for verb, argv in (("status", ["status", "--state", state]),
                           ("unstage", ["unstage", "--state", state]),
                           ("bundle", bundle_argv(config, state, script, "--rootfs", rootfs))):
            r = run(*argv, user=NOBODY)
            tap.ok(says(r, verb, "Permission denied", "it is root's", "run this as root"),
                   f"{verb} as non-root says the state directory is root's and to run it as root", r.stderr)
        tap.ok(os.path.exists(os.path.join(state, "staged.json")), "the non-root unstage left the staged run alone")

    # ---- uncommitted changes: staged without them, and said ------------------
    with open(os.path.join(clone, CANARY_NAME), "w") as f:
        f.write(CANARY_TEXT + "\n")
    with open(os.path.join(clone, "added.txt"), "w") as f:
        f.write(CANARY_TEXT + "\n")
    work.git(clone, "add", "added.txt")
    head = work.git(clone, "rev-parse", "HEAD")
    dirty_state = work.new_state()
    r = work.stage(dirty_state, config, [("acme/one", clone)])
    tap.ok(r.returncode == 0 and "sealed-probe-proxy: stage: warning: acme/one: " in r.stderr
           and f"`{clone}` has uncommitted changes (2 path(s))" in r.stderr
           and f"only its committed HEAD {head} is staged" in r.stderr,
           "stage of a clone with uncommitted changes stages HEAD and warns, naming the repository and the count",
           r.stderr)
    tap.ok(not any(c in r.stdout + r.stderr for c in (CANARY_NAME, CANARY_TEXT, "added.txt")),
           "the warning names no changed path and no content of the clone", r.stdout + r.stderr)
    work.git(clone, "reset", "-q", "--hard")  # removes added.txt too: it was only ever in the index
    work.git(clone, "status", "--short")  # refreshes the index's stat data, as an operator's `git status` does
    clean_state = work.new_state()
    r = work.stage(clean_state, config, [("acme/one", clone)])
    tap.ok(r.returncode == 0 and "warning" not in r.stderr,
           "stage of a clean clone prints no warning", r.stderr)
    # Stat data that differs from the index with the same content (a file
    # touched, or one written in the same second as the index, whose size git
    # zeroes there): as for git, the content decides, and it is unchanged.
    tracked = os.path.join(clone, CANARY_NAME)
    later = os.stat(tracked).st_mtime + 5
    os.utime(tracked, (later, later))
    touched_state = work.new_state()
    r = work.stage(touched_state, config, [("acme/one", clone)])
    tap.ok(r.returncode == 0 and "warning" not in r.stderr,
           "stage of a clone with a file touched but unchanged (stat data differs, content the same) prints no "
           "warning", r.stderr)
    # A directory on a tracked path swapped for a symlink out of the clone, to
    # a copy of the same file: the lookup never goes through it (for git too
    # the file is gone), so it counts, whatever lies outside.
    two = work.make_clone("two", {"sub/inner.txt": b"inside\n"})
    outside = work.path("outside-sub")
    os.makedirs(outside)
    shutil.copy2(os.path.join(two, "sub", "inner.txt"), os.path.join(outside, "inner.txt"))
    shutil.rmtree(os.path.join(two, "sub"))
    os.symlink(outside, os.path.join(two, "sub"))
    r = work.stage(work.new_state(), work.write_config(["acme/two"]), [("acme/two", two)])
    tap.ok(r.returncode == 0 and f"`{two}` has uncommitted changes (1 path(s))" in r.stderr,
           "a tracked file behind a directory swapped for a symlink out of the clone counts as changed: its "
           "lookup stops at the symlink, even where the same file lies outside", r.stderr)
finally:
    work.close()
tap.finish()
