"""Staging's progress line (docs/staging.md, "Progress"): `stage` of a local
clone of 100,000 files with stderr on a pseudo-terminal redraws one line in
place, at most once per interval, with growing file counts, and ends with a
final line per repository; with stderr a pipe it prints nothing at all on
stderr, and stdout is what it always was.  A GitHub tarball served slowly by
the fake GitHub (a real HTTPS server on loopback) shows its download's bytes,
of the total when a Content-Length is sent.  No progress output holds a name
or path from the repository, a URL, or the token (canaries in names, contents
and the credential).

The big clone is made by `git fast-import` on a tmpfs of the test's own: an
ext4 that has just deleted many inodes makes each new one slow to allocate,
and the test must not depend on what ran before it."""

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, bail_out, env_path, require_root_and, sanitized_build  # noqa: E402

PROXY = env_path("SP_PROXY")
# It starts no sandbox: it runs once, on the first backend (tests/meson.build).
B = backend()
require_root_and("git", "openssl", "mount", "umount")
from sp_github_fake import FakeGitHub, tarball  # noqa: E402
from sp_progress import foreign_words, leaks, live_lines, pieces  # noqa: E402
from sp_stage import StageWork  # noqa: E402

# Under ASan the proxy stages about 5 times slower: a quarter of the tree
# draws each phase as often, in wall time, as the whole one in a plain build,
# and keeps the test well inside its timeout (the whole one took 9 minutes).
FILES = 100000 // (4 if sanitized_build() else 1)
DIRS = 250
CANARY = "ghp_CANARYfilename"
TOKEN = "ghp_PROGRESSCANARY0123456789abcdefABCD"
INTERVAL = 0.1  # SP_PROGRESS_INTERVAL_MS
# A final line's time: tenths of a second, then minutes (a loaded machine
# takes more than one to stage 100,000 files).
DURATION = rb"(\d+\.\d s|\d+ min \d+ s)"
TIMEOUT = 600

tap = Tap()
w = StageWork(PROXY, None, "sp-stage-progress-")


def big_clone(top):
    """A clone whose HEAD holds FILES small files in DIRS directories; some
    directory and file names and contents carry the canary.  Returns its path
    and every path component in it."""
    path = os.path.join(top, "big")
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True, capture_output=True, env=w.git_env)
    dirs = [f"d{j:03d}" + (f"_{CANARY}" if j % 50 == 7 else "") for j in range(DIRS)]
    names = set(dirs)
    stream = ["commit refs/heads/main\ncommitter t <t@example.invalid> 0 +0000\ndata 4\nbig\n"]
    for i in range(FILES):
        marked = i % 1000 == 7
        name = f"f{i:06d}" + (f"_{CANARY}" if marked else "") + ".txt"
        names.add(name)
        data = (f"{CANARY} " if marked else "") + f"content {i}\n"
        stream.append(f"M 100644 inline {dirs[i % DIRS]}/{name}\ndata {len(data)}\n{data}\n")
    subprocess.run(["git", "-C", path, "fast-import", "--quiet"], input="".join(stream).encode(), check=True,
                   capture_output=True, env=w.git_env)
    return path, names


def on_pty(argv, env, stdout_too=False, columns=200):
    """Runs argv with stderr (and stdout when stdout_too) on a pseudo-terminal
    with no output processing, so the bytes read are the bytes written.
    Returns (exit status, terminal bytes, stdout bytes, seconds)."""
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave if stdout_too else subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    seen = b""
    try:
        while True:
            left = started + TIMEOUT - time.monotonic()
            if left <= 0:
                proc.kill()
                bail_out(f"`{' '.join(argv[:2])}` on a terminal took more than {TIMEOUT} s")
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the slave side is gone
                break
            if not data:
                break
            seen += data
    finally:
        os.close(master)
    out = b"" if stdout_too else proc.stdout.read()
    status = proc.wait()
    return status, seen, out, time.monotonic() - started


# Steps, the phases that count nothing: each is drawn as it begins, interval
# or not (normalize and digest count their files, docs/staging.md).
STEPS = (b"write the index", b"resolve the ref")


def to_bytes(text):
    number, unit = text.split()
    return float(number) * {b"B": 1, b"KiB": 1024, b"MiB": 1 << 20}[unit]


def stdout_re(state, repos):
    lines = "".join(rf"staged {re.escape(r)} from {src}: commit [0-9a-f]{{40}}, sha256:[0-9a-f]{{64}}\n"
                    for r, src in repos)
    return re.compile(rf"{lines}staged run ([0-9a-f]{{12}}): {len(repos)} seed\(s\) in {re.escape(state)}/seeds/\1, "
                      rf"recorded in {re.escape(state)}/staged\.json\n\Z")


try:
    fast = os.path.join(w.work, "fast")
    os.makedirs(fast)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,nr_inodes=1m,mode=0711", "tmpfs", fast], check=True,
                   capture_output=True)
    made = time.monotonic()
    clone, names = big_clone(fast)
    print(f"# {FILES}-file clone made in {time.monotonic() - made:.1f} s", flush=True)
    config = w.write_config(["acme/big"])

    # ---- a local clone of 100,000 files, stderr on a terminal ---------------
    state = os.path.join(fast, "state-pty")
    w.states.append(state)
    env = {"PATH": os.environ["PATH"], "TERM": "xterm"}
    argv = [PROXY, "stage", "--config", config, "--state", state, "--clone", f"acme/big={clone}"]
    status, seen, out, took = on_pty(argv, env)
    print(f"# staged on a terminal in {took:.1f} s", flush=True)
    tap.ok(status == 0 and stdout_re(state, [("acme/big", "local")]).match(out.decode()),
           f"a {FILES:,}-file clone stages with stderr on a terminal, stdout as always", (status, out, seen[-500:]))
    tree = [int(m.group(1)) for line in live_lines(seen)
            for m in [re.fullmatch(rb"acme/big: write the tree: (\d+) files?, \d+(\.\d)? (B|KiB|MiB)", line)] if m]
    tap.ok(len(tree) >= 3 and all(a < b for a, b in zip(tree, tree[1:])) and tree[-1] <= FILES,
           "the terminal shows several redraws of the tree being written, the file count growing each time",
           tree)
    phases = {m.group(1) for line in live_lines(seen) for m in [re.match(rb"acme/big: ([a-z ]+)", line)] if m}
    tap.ok({b"write the tree", b"write the pack", b"normalize", b"digest"} <= phases,
           "the phase is named on the line (the tree, the pack, normalize and the digest)", phases)
    finals = [p for p in pieces(seen) if p.endswith(b"\n")]
    tap.ok(len(finals) == 1 and re.fullmatch(rb"acme/big: staged %d files, [\d.]+ [KM]iB in " % FILES + DURATION
                                             + rb"\x1b\[K\n", finals[0]),
           f"one final line for the repository: its name and all {FILES} files", finals)
    tap.ok(seen.endswith(b"\r\x1b[K") and b"\n" not in seen.split(b"\r")[-1],
           "the live line is cleared at the end, so what follows starts on a clean line", seen[-200:])
    redraws = len(live_lines(seen))
    steps = sum(line.endswith(STEPS) for line in live_lines(seen))
    tap.ok(redraws - steps <= took / INTERVAL + 1,
           f"at most one redraw per {int(INTERVAL * 1000)} ms besides one per step ({redraws} in {took:.1f} s, "
           f"{steps} steps)", redraws)
    bad = foreign_words(seen, [rb"acme/big"])
    tap.ok(not bad, "every line holds only the repository's name, phase and unit words, and numbers", bad[:5])
    found = leaks(seen, names, also=(CANARY, "ghp_", clone, fast))
    tap.ok(not found, "canary: no file or directory name of the repository, and no path, is on the terminal",
           found[:10])

    seed = w.seed_dir(state, "acme/big")
    count, marked = 0, 0
    for dirpath, dirnames, filenames in os.walk(seed):
        if dirpath == seed:
            dirnames.remove(".git")
        count += len(filenames)
        marked += sum(CANARY in f for f in filenames)
    tap.ok(count == FILES and marked == FILES // 1000, f"the seed holds all {FILES} files", (count, marked))
    digest = w.staged(state)["seeds"][0]["digest"]
    w.unstage(state)

    # ---- the same, with stderr a pipe: nothing but what stage always said ----
    state = os.path.join(fast, "state-pipe")
    w.states.append(state)
    started = time.monotonic()
    r = subprocess.run([PROXY, "stage", "--config", config, "--state", state, "--clone", f"acme/big={clone}"],
                       capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=TIMEOUT)
    print(f"# staged with stderr a pipe in {time.monotonic() - started:.1f} s", flush=True)
    tap.ok(r.returncode == 0 and r.stderr == b"",
           "with stderr a pipe (TERM set all the same), stage writes nothing at all to stderr", r.stderr[-500:])
    tap.ok(stdout_re(state, [("acme/big", "local")]).match(r.stdout.decode()) and b"\r" not in r.stdout,
           "stdout is the two lines stage always prints, with no \\r", r.stdout)
    tap.ok(w.staged(state)["seeds"][0]["digest"] == digest,
           "the seed staged without a terminal digests exactly as the one staged with one", digest)
    w.unstage(state)

    # ---- a GitHub tarball, downloaded slowly --------------------------------
    members = {f"dir_{CANARY}/blob{i:02d}_{CANARY}.bin": CANARY.encode() + os.urandom(16384) for i in range(20)}
    body = tarball(f"acme-remote-{CANARY}", members)
    commit = "0123456789abcdef0123456789abcdef01234567"
    fake = FakeGitHub(w.work, {"acme/remote": (commit, body)}, token=TOKEN)
    remote_names = {f"acme-remote-{CANARY}", f"dir_{CANARY}"} | {os.path.basename(m) for m in members}
    try:
        config = w.write_config(["acme/remote"])
        secrets = (TOKEN, CANARY, "ghp_", "legacy.tar.gz", "https", fake.codeload_host, fake.api_base)
        for with_length in (True, False):
            fake.chunk, fake.pause, fake.content_length = 16384, 0.06, with_length
            state = os.path.join(fast, f"state-github-{with_length}")
            w.states.append(state)
            argv = [PROXY, "stage", "--config", config, "--state", state, "--github-api", fake.api_base,
                    "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
            # stdout on the terminal too, as an operator has it.
            status, both, _, took = on_pty(argv, dict(env, GH_TOKEN=TOKEN), stdout_too=True)
            how = "with a Content-Length" if with_length else "chunked, without a Content-Length"
            at = both.find(b"staged acme/remote from github")
            seen, summary = (both[:at], both[at:]) if at >= 0 else (both, b"")
            tap.ok(status == 0 and stdout_re(state, [("acme/remote", "github")]).match(summary.decode()),
                   f"a GitHub tarball {how} stages with stderr and stdout on a terminal, stdout's lines whole",
                   both[-500:])
            tenths = len(body) * 10 // 1024
            total = f"{tenths // 10}.{tenths % 10} KiB".encode()
            if with_length:
                shown = [(to_bytes(m.group(1)), int(m.group(3))) for line in live_lines(seen)
                         for m in [re.fullmatch(rb"acme/remote: download: ([\d.]+ (B|KiB)) of "
                                                + re.escape(total) + rb" \((\d+)%\)", line)] if m]
            else:
                shown = [(to_bytes(m.group(1)), 0) for line in live_lines(seen)
                         for m in [re.fullmatch(rb"acme/remote: download: ([\d.]+ (B|KiB))", line)] if m]
            grows = all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(shown, shown[1:]))
            of_total = f" of the total ({total.decode()}), in percent," if with_length else ""
            tap.ok(len(shown) >= 3 and grows, f"the download shows its bytes growing{of_total} over several redraws",
                   live_lines(seen))
            if not with_length:
                tap.ok(not any(b" of " in line for line in live_lines(seen) if b"download" in line),
                       "without a Content-Length no total is claimed", live_lines(seen))
            finals = [p for p in pieces(seen) if p.startswith(b"acme/remote: staged")]
            tap.ok(len(finals) == 1 and re.fullmatch(rb"acme/remote: staged 20 files, 320\.\d KiB, [\d.]+ KiB "
                                                     rb"downloaded in " + DURATION + rb"\x1b\[K\n", finals[0]),
                   "the final line counts the files extracted and the bytes downloaded", finals)
            tap.ok(seen.endswith(b"\n") or seen.endswith(b"\r\x1b[K"),
                   "nothing of a live line is left before stdout's summary, which starts on a clean line",
                   seen[-300:])
            found = leaks(seen, remote_names, also=secrets) + foreign_words(seen, [rb"acme/remote"])
            tap.ok(not found, "canary: neither the token, nor a URL or host, nor a name from the tarball is on the "
                   "terminal; every progress line holds only the name, phase and unit words, and numbers", found)
            w.unstage(state)

        # A failure: the live line goes before the error, which is whole.
        state = os.path.join(fast, "state-github-missing")
        w.states.append(state)
        argv = [PROXY, "stage", "--config", w.write_config(["acme/missing"]), "--state", state, "--github-api",
                fake.api_base, "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
        status, seen, _, _ = on_pty(argv, dict(env, GH_TOKEN=TOKEN))
        at = seen.find(b"sealed-probe-proxy: stage: ")
        tap.ok(status == 1 and at >= 0 and b"HTTP 404" in seen[at:] and b"\r" not in seen[at:]
               and (at == 0 or seen[:at].endswith(b"\r\x1b[K")) and TOKEN.encode() not in seen,
               "a failed stage on a terminal: the live line is cleared, then the error is printed whole", seen)
    finally:
        fake.close()
finally:
    w.close()
tap.finish()
