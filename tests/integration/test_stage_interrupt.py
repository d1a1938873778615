"""An interrupted stage leaves nothing (docs/staging.md, "Interrupted"):
SIGINT, SIGTERM or SIGHUP during `stage` of a 50,000-file clone removes what
that run made, ends the progress line with one line saying so, and exits
128 + the signal's number.  The state directory is then exactly as it was
before: every entry's type, mode, owner, size and content digest, and every
mount at or below it, compared before and after; an earlier staged run stays
recorded and usable (`bundle --dry-run --state` verifies and copies its
seed).  Nothing is left where staging keeps anything temporary: its TMPDIR
(a directory of the test's own, empty after), and the clone is unchanged;
the GitHub tarball's scratch file is anonymous (O_TMPFILE or a memfd) and
goes with the process.  A download stalled by the server is interrupted too,
and the token reaches no output.

Progress never stands over work it does not count: the removal of a clone's
loose objects, after the pack is written, is a phase of its own with its
count; `unstage` shows its removal on a terminal, and nothing with stderr a
pipe.

The clone is written by the test as loose objects (one file per object, as
`git add` and `git commit` leave them), on a tmpfs of its own, so that the
old object store's removal is real work."""

import fcntl
import hashlib
import os
import re
import select
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import (Tap, backend, bail_out, cached_rootfs, env_path, remove_bundle, require_root_and,  # noqa: E402
                        sanitized_build)

PROXY = env_path("SP_PROXY")
# It starts no sandbox: it runs once, on the first backend (tests/meson.build).
B = backend()
require_root_and("git", "openssl", "mount", "umount")
from sp_github_fake import FakeGitHub, tarball  # noqa: E402
from sp_progress import foreign_words, leaks, live_lines, pieces  # noqa: E402
from sp_stage import StageWork  # noqa: E402

# Under ASan the proxy stages about 5 times slower (a whole stage of this
# clone: 138 s, against 30 s): a quarter of the objects keeps each phase as
# long, in wall time, as the whole clone in a plain build, and the test well
# inside its timeout (with the whole clone it once ran past it).
SCALE = 4 if sanitized_build() else 1
FILES = 50000 // SCALE
DIRS = 250
# Loose objects no ref reaches, as rebases and amends leave them: staging
# packs only what is reachable and removes them with the old store, whose
# removal (a phase of its own) they make long enough to be seen on any
# machine (drawn 3 times for the 50,000 reachable ones alone, unloaded).
UNREACHABLE = 50000 // SCALE
CANARY = "ghp_CANARYinterrupt"
TOKEN = "ghp_INTERRUPTCANARY0123456789abcdefABCD"
MARKER = b"SMALL-MARKER-0451\n"
TIMEOUT = 600
# The codeload server's stall before it answers.  Without the stop in
# libcurl's transfer callback, only libcurl's low-speed abort
# (SP_GITHUB_LOW_SPEED_SECONDS, 60) or the server would end the wait; with
# it, libcurl sees the stop within its callback's second (measured: under
# 0.1 s on the loaded test machine).  A quarter of the abort's time tells the
# two apart on any machine.
STALL = 120
LOW_SPEED_SECONDS = 60
STOP_WITHIN = LOW_SPEED_SECONDS / 4

tap = Tap()
w = StageWork(PROXY, None, "sp-stage-interrupt-")


# ---- the clone: loose objects written directly ---------------------------

def loose(gitdir, kind, body):
    data = f"{kind} {len(body)}\0".encode() + body
    oid = hashlib.sha1(data).hexdigest()
    folder = os.path.join(gitdir, "objects", oid[:2])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, oid[2:])
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(zlib.compress(data, 1))
    return oid


def tree(gitdir, entries):
    """entries: (mode, name, oid); git sorts a tree's entries by name, a
    subtree's as if its name ended in '/'."""
    key = lambda e: e[1] + ("/" if e[0] == "40000" else "")  # noqa: E731
    body = b"".join(f"{mode} {name}\0".encode() + bytes.fromhex(oid) for mode, name, oid in sorted(entries, key=key))
    return loose(gitdir, "tree", body)


def big_clone(top):
    """A clone whose HEAD holds FILES files in DIRS directories, every object
    loose, and UNREACHABLE loose objects besides; some names and contents
    carry the canary.  Returns its path and every path component in it."""
    path = os.path.join(top, "big")
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True, capture_output=True, env=w.git_env)
    gitdir = os.path.join(path, ".git")
    dirs = [f"d{j:03d}" + (f"_{CANARY}" if j % 50 == 7 else "") for j in range(DIRS)]
    names = set(dirs)
    files = [[] for _ in range(DIRS)]
    for i in range(FILES):
        marked = i % 1000 == 7
        name = f"f{i:06d}" + (f"_{CANARY}" if marked else "") + ".txt"
        names.add(name)
        data = ((f"{CANARY} " if marked else "") + f"content {i}\n").encode()
        files[i % DIRS].append(("100644", name, loose(gitdir, "blob", data)))
    for i in range(UNREACHABLE):
        loose(gitdir, "blob", f"rebased away {i}\n".encode())
    root = tree(gitdir, [("40000", d, tree(gitdir, files[j])) for j, d in enumerate(dirs)])
    commit = loose(gitdir, "commit", f"tree {root}\nauthor t <t@example.invalid> 0 +0000\n"
                                     "committer t <t@example.invalid> 0 +0000\n\nbig\n".encode())
    with open(os.path.join(gitdir, "refs", "heads", "main"), "w") as f:
        f.write(commit + "\n")
    return path, names


# ---- what "as it was" compares -------------------------------------------

def mounts_at(top):
    """Every mount at or below top: its id, root, point, options and
    filesystem, from /proc/self/mountinfo."""
    top = os.path.realpath(top)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].replace("\\040", " ")
            if point == top or point.startswith(top + "/"):
                fstype = fields[fields.index("-") + 1]
                found.append((fields[0], fields[3], os.path.relpath(point, top), fields[5], fstype))
    return sorted(found)


def listing(top):
    """Every entry at or below top, top too: its path, type, mode, owner and
    group, and for a file its size and sha256, for a symlink its target;
    then every mount at or below it.  None when top does not exist."""
    if not os.path.lexists(top):
        return None
    entries = []

    def visit(path, rel):
        st = os.lstat(path)
        item = (rel, stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
        if stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                item += (st.st_size, hashlib.sha256(f.read()).hexdigest())
        elif stat.S_ISLNK(st.st_mode):
            item += (os.readlink(path),)
        entries.append(item)
        if stat.S_ISDIR(st.st_mode):
            for name in sorted(os.listdir(path)):
                visit(os.path.join(path, name), rel + "/" + name)

    visit(top, ".")
    return entries, mounts_at(top)


def differences(before, after):
    if before is None or after is None:
        return (before, after)
    gone = sorted(set(before[0]) - set(after[0]))[:5]
    new = sorted(set(after[0]) - set(before[0]))[:5]
    return {"gone": gone, "new": new, "mounts before": before[1], "mounts after": after[1]}


# ---- running stage, on a terminal or not, with a signal on a cue ---------

class Run:
    pass


def default_stop_signals():
    """stage keeps a signal that was ignored when it started ignored (nohup,
    a script's background job, as a CI runner may start the suite): each
    stage here starts with them at their defaults, as from a terminal."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def run(argv, env, when=None, sig=None, tty=True):
    """Runs argv with stderr on a pseudo-terminal (no output processing, so
    the bytes read are the bytes written) or a pipe, stdout a pipe.  Once
    `when` holds (a regex found in stderr, or a function of nothing), sends
    sig.  Returns a Run: status, err, out, sent (seconds from the start, or
    None), took, and reads: (seconds, bytes) of every read of stderr."""
    r = Run()
    r.sent, r.reads = None, []
    started = time.monotonic()
    if tty:
        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env,
                                preexec_fn=default_stop_signals)
        os.close(slave)
        err_fd = master
    else:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, preexec_fn=default_stop_signals)
        err_fd = proc.stderr.fileno()
    out_fd = proc.stdout.fileno()
    err, out, open_fds = b"", b"", {err_fd, out_fd}
    try:
        while open_fds:
            if time.monotonic() - started > TIMEOUT:
                proc.kill()
                bail_out(f"`{' '.join(argv[:2])}` took more than {TIMEOUT} s")
            ready, _, _ = select.select(list(open_fds), [], [], 0.05)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    data = b""
                if not data:
                    open_fds.discard(fd)
                elif fd == err_fd:
                    err += data
                    r.reads.append((time.monotonic() - started, data))
                else:
                    out += data
            if when is not None and r.sent is None and proc.poll() is None:
                if when() if callable(when) else re.search(when, err):
                    proc.send_signal(sig)
                    r.sent = time.monotonic() - started
    finally:
        if tty:
            os.close(master)
    r.status = proc.wait()
    r.took = time.monotonic() - started
    r.err, r.out = err, out
    return r


def stage_argv(config, state, clones, *extra):
    argv = [PROXY, "stage", "--config", config, "--state", state, *extra]
    for repo, path in clones:
        argv += ["--clone", f"{repo}={path}"]
    return argv


def interrupted_line(sig, repo):
    return (f"sealed-probe-proxy: stage: interrupted by {sig} while staging {repo}: removed what this run made; "
            "nothing of it is left\n").encode()


try:
    fast = os.path.join(w.work, "fast")
    os.makedirs(fast)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,nr_inodes=1m,mode=0711", "tmpfs", fast], check=True,
                   capture_output=True)
    made = time.monotonic()
    clone, names = big_clone(fast)
    print(f"# {FILES}-file clone of loose objects ({UNREACHABLE} unreachable besides) written in "
          f"{time.monotonic() - made:.1f} s", flush=True)
    small = w.make_clone("small", {"README.md": MARKER})
    clone_before = listing(clone)
    tmpdir = os.path.join(w.work, "tmp")
    os.makedirs(tmpdir, mode=0o700)
    env = {"PATH": os.environ["PATH"], "TERM": "xterm", "TMPDIR": tmpdir}
    both = w.write_config(["acme/small", "acme/big"])
    only_small = w.write_config(["acme/small"])
    only_big = w.write_config(["acme/big"])
    clones = [("acme/small", small), ("acme/big", clone)]
    rootfs = cached_rootfs()

    def empty_state(name):
        state = os.path.join(fast, name)
        os.mkdir(state, 0o700)
        w.states.append(state)
        return state

    def small_staged(name):
        state = empty_state(name)
        r = w.stage(state, only_small, [("acme/small", small)])
        if r.returncode != 0:
            bail_out(f"staging the small clone failed: {r.stderr}")
        return state

    def as_before(r, state, before, what, sig_name, code, repo="acme/big", tty=True):
        """The checks every interrupted run gets."""
        line = interrupted_line(sig_name, repo)
        if tty:
            ended = pieces(r.err)[-1:] == [b"\x1b[K" + line] and r.err.count(b"sealed-probe-proxy:") == 1
        else:
            ended = r.err == line
        tap.ok(r.sent is not None and r.status == code and ended and r.out == b"",
               f"{what}: exits {code} with one line saying it was interrupted and that nothing is left"
               + (", after the progress line is cleared" if tty else ", and nothing else on stderr"),
               (r.sent, r.status, r.out, r.err[-400:]))
        after = listing(state)
        tap.ok(after == before, f"{what}: the state directory is exactly as it was (entries, modes, owners, "
               "contents and mounts)", differences(before, after))
        tap.ok(os.listdir(tmpdir) == [], f"{what}: nothing is left in stage's TMPDIR", os.listdir(tmpdir))

    # ---- a whole stage on a terminal: no work hides behind a line ------------
    state = empty_state("state-whole")
    r = run(stage_argv(only_big, state, [("acme/big", clone)]), env)
    print(f"# the whole stage on a terminal took {r.took:.1f} s", flush=True)
    tap.ok(r.status == 0 and b"staged run " in r.out, f"control: the {FILES:,}-file clone stages whole", r.err[-300:])
    removed = [int(m.group(1)) for line in live_lines(r.err)
               for m in [re.fullmatch(rb"acme/big: remove the old objects: (\d+) files?, [\d.]+ (B|KiB|MiB)", line)]
               if m]
    print(f"# the old objects' removal was drawn {len(removed)} times, at most one per 100 ms", flush=True)
    tap.ok(removed and all(a < b for a, b in zip(removed, removed[1:])) and 0 < removed[-1] <= FILES + DIRS + 2 + UNREACHABLE,
           "the loose objects' removal after the pack is a phase of its own, its count of files shown "
           "(the pack's line does not stand over it)", removed)
    # How long each line stood, for the log: steps (normalize, digest) are
    # the only work not counted.
    stood = sorted(((b - a, pieces(d)[-1][:60]) for (a, _), (b, d) in zip(r.reads, r.reads[1:])), reverse=True)
    print("# longest silences: " + "; ".join(f"{s:.2f} s before {line!r}" for s, line in stood[:4]), flush=True)
    bad = foreign_words(r.err, [rb"acme/big"])
    tap.ok(not bad, "every progress line holds only the repository's name, phase and unit words, and numbers", bad[:5])

    # unstage on a terminal: the removal of 100,000 files is counted.
    run_id = w.staged(state)["run"]
    r = run([PROXY, "unstage", "--state", state], env)
    subject = f"seeds/{run_id}".encode()
    counts = [int(m.group(1)) for line in live_lines(r.err)
              for m in [re.fullmatch(re.escape(subject) + rb": remove: (\d+) files?, [\d.]+ (B|KiB|MiB)", line)] if m]
    tap.ok(r.status == 0 and r.out == f"unstaged every seed in {state}\n".encode() and len(counts) >= 2
           and all(a < b for a, b in zip(counts, counts[1:])) and r.err.endswith(b"\r\x1b[K")
           and not foreign_words(r.err, [re.escape(subject)]),
           "unstage on a terminal shows its removal, `seeds/RUN: remove: N files, B`, the count growing, and "
           "clears the line at the end", (r.status, r.out, counts, r.err[-300:]))

    # ---- SIGINT while a re-stage writes the tree: the earlier run stays ------
    state = small_staged("state-restage")
    before = listing(state)
    r = run(stage_argv(both, state, clones), env, rb"acme/big: write the tree: [1-9]", signal.SIGINT)
    as_before(r, state, before, "SIGINT while a re-stage writes the tree", "SIGINT", 130)
    bad = foreign_words(r.err, [rb"acme/small", rb"acme/big", rb"seeds/[0-9a-f]{12}"]) + leaks(r.err, names)
    tap.ok(not bad, "canary: the terminal holds no name from the repository; every progress line only names, "
           "phase and unit words, and numbers", bad[:5])
    script = os.path.join(w.work, "probe.py")
    with open(script, "w") as f:
        f.write("print(1)\n")
    bundle = os.path.join(w.work, "bundle-restage")
    b = subprocess.run([PROXY, "bundle", "--dry-run", "--config", only_small, "--repo", "acme/small", "--script",
                        script, "--out", bundle, "--rootfs", rootfs, "--state", state, *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    try:
        with open(os.path.join(bundle, "repo", "README.md"), "rb") as f:
            copied = f.read()
    except OSError as e:
        copied = str(e)
    remove_bundle(bundle)
    tap.ok(b.returncode == 0 and copied == MARKER,
           "the run staged before is still recorded and usable: bundle --dry-run --state verifies its seed and "
           "copies it", (b.returncode, b.stderr, copied))
    r = run([PROXY, "unstage", "--state", state], env, tty=False)
    tap.ok(r.status == 0 and r.err == b"" and r.out == f"unstaged every seed in {state}\n".encode(),
           "unstage with stderr a pipe writes nothing to stderr", (r.status, r.err))

    # ---- SIGTERM while the pack is written, into an empty state directory ----
    state = empty_state("state-pack")
    before = listing(state)
    r = run(stage_argv(only_big, state, [("acme/big", clone)]), env, rb"acme/big: write the pack: [1-9]",
            signal.SIGTERM)
    as_before(r, state, before, "SIGTERM while the pack is written (seeds/ made by this run goes too)", "SIGTERM",
              143)

    # ---- SIGINT while the loose objects are removed --------------------------
    state = empty_state("state-old-objects")
    before = listing(state)
    r = run(stage_argv(only_big, state, [("acme/big", clone)]), env, rb"acme/big: remove the old objects: ",
            signal.SIGINT)
    as_before(r, state, before, "SIGINT while the old object store is removed", "SIGINT", 130)

    # ---- SIGTERM during the digest: the run is sealed, a read-only mount -----
    state = small_staged("state-digest")
    before = listing(state)
    r = run(stage_argv(both, state, clones), env, rb"acme/big: digest", signal.SIGTERM)
    as_before(r, state, before, "SIGTERM during the digest, once the run is mounted read-only (the earlier run's "
              "mount stays, with its id)", "SIGTERM", 143)

    # ---- SIGHUP (a dropped terminal) while the git directory is copied -------
    state = small_staged("state-hangup")
    before = listing(state)
    r = run(stage_argv(both, state, clones), env, rb"acme/big: copy the git directory: [1-9]", signal.SIGHUP)
    as_before(r, state, before, "SIGHUP while the git directory is copied", "SIGHUP", 129)

    # ---- stderr a pipe (systemd's stop): SIGTERM once the tree is begun ------
    state = small_staged("state-pipe")
    before = listing(state)
    seeds = os.path.join(state, "seeds")
    old_runs = set(os.listdir(seeds))

    def tree_begun():
        return any(os.path.exists(os.path.join(seeds, run_dir, "1", "d000")) for run_dir in os.listdir(seeds)
                   if run_dir not in old_runs)

    r = run(stage_argv(both, state, clones), env, tree_begun, signal.SIGTERM, tty=False)
    as_before(r, state, before, "SIGTERM with stderr a pipe, once the tree is being written", "SIGTERM", 143,
              tty=False)

    # ---- a GitHub download the server stalls: SIGINT stops it at once --------
    members = {f"dir_{CANARY}/blob{i:02d}_{CANARY}.bin": CANARY.encode() + os.urandom(4096) for i in range(8)}
    fake = FakeGitHub(w.work, {"acme/remote": ("0123456789abcdef0123456789abcdef01234567",
                                               tarball(f"acme-remote-{CANARY}", members))}, token=TOKEN, delay=STALL)
    try:
        state = small_staged("state-github")
        before = listing(state)
        remote = w.write_config(["acme/small", "acme/remote"])
        argv = stage_argv(remote, state, [("acme/small", small)], "--github-api", fake.api_base,
                          "--github-codeload", fake.codeload_host, "--github-ca", fake.ca)
        # Sent once codeload has the request, and so is stalling it: the
        # download's progress line can come first, while the TLS handshake
        # still runs (an ASan build on a loaded host), and a SIGINT then
        # stops no stalled download.
        r = run(argv, dict(env, GH_TOKEN=TOKEN), lambda: any(h == "codeload" for h, _, _ in fake.requests),
                signal.SIGINT)
        stopped = r.took - r.sent if r.sent is not None else None
        print(f"# the stalled download stopped {stopped} s after the signal", flush=True)
        as_before(r, state, before, "SIGINT while the codeload server stalls the tarball", "SIGINT", 130,
                  repo="acme/remote")
        tap.ok(stopped is not None and stopped < STOP_WITHIN,
               f"the stalled download stops within {STOP_WITHIN:.0f} s of the signal, without waiting for the server "
               f"({STALL} s stall) or libcurl's low-speed abort ({LOW_SPEED_SECONDS} s)", stopped)
        found = leaks(r.err + r.out, [f"dir_{CANARY}"], also=(TOKEN, CANARY, "ghp_", "https", fake.codeload_host,
                                                              fake.api_base, "legacy.tar.gz"))
        tap.ok(not found and not foreign_words(r.err, [rb"acme/remote", rb"seeds/[0-9a-f]{12}"]),
               "canary: neither the token, nor a URL or host, nor a name from the tarball is in the output", found)
        tap.ok(any(h == "codeload" for h, _, _ in fake.requests)
               and all("Authorization" not in headers for h, _, headers in fake.requests if h == "codeload"),
               "the interrupted request reached codeload, without the token", [h for h, _, _ in fake.requests])
    finally:
        fake.close()

    after = listing(clone)
    tap.ok(after == clone_before, "the clone is exactly as it was after every interrupted stage",
           differences(clone_before, after))
finally:
    w.close()
tap.finish()
