"""`sealed-probe-proxy unstage` converges, and names from a tree reach the
operator quoted (docs/staging.md, "Paths and names" and "unstage"): a
leftover run that cannot be removed on the first call is reported on one
quoted line, everything else goes, and a second call finishes the job; a
hostile name in a seed shows escaped in `bundle --dry-run --state` and
`check`."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

# It starts no sandbox: it runs once, on the first backend (tests/meson.build).
B, S = serve_test("chattr", "mount", "umount")

HOSTILE = "run\n\x1b[2Jsealed-probe-proxy: unstage: all clean"
ESCAPED = "run\\x0a\\x1b[2Jsealed-probe-proxy: unstage: all clean"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

tap = Tap()
work = S.Work("sp-unstage-")
locked = []


def unstage(state):
    return subprocess.run([S.PROXY, "unstage", "--state", state], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, env=ENV)


def quoted_lines_only(stderr, verb):
    """Every line is one of the verb's own, and no raw control byte (an
    escape sequence, a forged newline) is anywhere in it."""
    lines = stderr.splitlines()
    return (lines != [] and all(line.startswith(f"sealed-probe-proxy: {verb}: ") for line in lines)
            and not any(ord(c) < 0x20 and c != "\n" or ord(c) == 0x7f for c in stderr))


def chattr(flag, path):
    subprocess.run(["chattr", flag, path], check=True, capture_output=True)
    if flag == "+i":
        locked.append(path)
    elif path in locked:
        locked.remove(path)


def reseal_after(run_dir, change):
    """Lifts the run's read-only mount, makes a change below it, and seals it
    again the way stage does (a read-only bind mount of itself)."""
    subprocess.run(["umount", run_dir], check=True, capture_output=True)
    change()
    subprocess.run(["mount", "--bind", run_dir, run_dir], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "remount,bind,ro,nosuid,nodev,noexec", run_dir], check=True, capture_output=True)


try:
    clone = work.make_clone("one", {"README.md": b"unstage me\n"})
    config = work.write_config(["acme/one"])

    # ---- unstage goes past an immutable file in a hostile leftover run ------
    state = work.staged_state(config, [("acme/one", clone)])
    good_run = S.staged(state)["run"]
    seeds = os.path.join(state, "seeds")
    leftover = os.path.join(seeds, HOSTILE, "0", HOSTILE)
    os.makedirs(leftover)
    for name in ("locked", "other"):
        with open(os.path.join(leftover, name), "w") as f:
            f.write("x\n")
    chattr("+i", os.path.join(leftover, "locked"))

    r1 = unstage(state)
    tap.ok(r1.returncode != 0, "unstage with an undeletable leftover exits non-zero", r1.stderr)
    tap.ok(quoted_lines_only(r1.stderr, "unstage") and ESCAPED in r1.stderr and "locked" in r1.stderr
           and "Operation not permitted" in r1.stderr,
           "unstage reports the leftover quoted, one line each, with no raw control byte", repr(r1.stderr))
    tap.ok(not os.path.exists(os.path.join(state, "staged.json"))
           and not os.path.exists(os.path.join(seeds, good_run)) and S.mounts_under(state) == []
           and not os.path.exists(os.path.join(leftover, "other")),
           "the first unstage still removes staged.json, the good run and its mount, and the rest of the leftover",
           os.listdir(seeds) if os.path.isdir(seeds) else "")

    chattr("-i", os.path.join(leftover, "locked"))
    r2 = unstage(state)
    tap.ok(r2.returncode == 0 and not os.path.exists(seeds) and S.mounts_under(state) == [],
           "once the obstacle is gone, a second unstage exits 0 and leaves nothing", r2.stderr)
    r3 = unstage(state)
    tap.ok(r3.returncode == 0, "unstage on a clean slate exits 0", r3.stderr)

    # ---- unstage goes past a mount inside a leftover run ---------------------
    state = work.staged_state(config, [("acme/one", clone)])
    seeds = os.path.join(state, "seeds")
    mount_point = os.path.join(seeds, "leftover", "0", "mnt")
    os.makedirs(mount_point)
    with open(os.path.join(seeds, "leftover", "0", "plain"), "w") as f:
        f.write("x\n")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "sp-unstage-test", mount_point], check=True,
                   capture_output=True)
    with open(os.path.join(mount_point, "kept"), "w") as f:
        f.write("x\n")
    r1 = unstage(state)
    tap.ok(r1.returncode != 0 and quoted_lines_only(r1.stderr, "unstage") and "mounted" in r1.stderr
           and os.path.exists(os.path.join(mount_point, "kept"))
           and not os.path.exists(os.path.join(seeds, "leftover", "0", "plain"))
           and not os.path.exists(os.path.join(state, "staged.json")),
           "unstage never enters a mount left in a run: it reports it and removes the rest", r1.stderr)
    subprocess.run(["umount", mount_point], check=True, capture_output=True)
    r2 = unstage(state)
    tap.ok(r2.returncode == 0 and not os.path.exists(seeds),
           "with the mount gone, a second unstage finishes the job", r2.stderr)

    # ---- a hostile name in a seed, in the messages of bundle and check -------
    state = work.staged_state(config, [("acme/one", clone)])
    run_dir = os.path.join(state, "seeds", S.staged(state)["run"])
    seed = S.seed_dir(state, "acme/one")
    reseal_after(run_dir, lambda: os.mkfifo(os.path.join(seed, HOSTILE)))
    script = work.path("probe") + ".py"
    with open(script, "w") as f:
        f.write("print(1)\n")
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/one", "--script", script,
                        "--out", work.path("bundle"), "--rootfs", work.rootfs, "--state", state, *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, env=ENV)
    tap.ok(r.returncode != 0 and quoted_lines_only(r.stderr, "bundle") and len(r.stderr.splitlines()) == 1
           and ESCAPED in r.stderr,
           "bundle --dry-run --state names a hostile entry of the seed quoted, on one line", repr(r.stderr))
    r = subprocess.run([S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs,
                        *B.proxy_args()],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, env=ENV)
    tap.ok(r.returncode != 0 and quoted_lines_only(r.stderr, "check") and len(r.stderr.splitlines()) == 1
           and ESCAPED in r.stderr,
           "check names a hostile entry of the seed quoted, on one line", repr(r.stderr))
    r = unstage(state)
    tap.ok(r.returncode == 0 and not os.path.exists(os.path.join(state, "seeds")),
           "unstage removes a seed with a hostile entry", r.stderr)
finally:
    for path in list(locked):
        subprocess.run(["chattr", "-i", path], capture_output=True)
    work.close()
tap.finish()
