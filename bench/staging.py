#!/usr/bin/python3
"""Staging a real-sized history: `sealed-probe-proxy stage` of a local clone
against `git clone --no-local --bare` of the same clone, side by side (issue
27).  A benchmark, never a test: it prints numbers, and judges them by its
exit status only with --check.  docs/performance.md records what it measured.

The history is generated, never committed: a deterministic (--seed)
fast-import stream of a long-lived project.  A main line of tens of thousands
of commits, each changing a handful of files of a tree of a few thousand in
nested directories (a few hunks of pseudo-random lines replaced, inserted or
removed, so each version deltas well against the one before; now and then a
new file, a rename or a delete; CSV-like data files that grow by rows; binary
assets, sometimes replaced); topic branches merged back with merge commits;
a maint branch forked at each release and fixed on its own; annotated tags
for releases on both.  `git fast-import` writes it into a fresh bare
repository, `git repack -a -d -f --window=10 --depth=50` (no bitmap) gives the
pack real delta chains, and `git clone --no-hardlinks` of it, with a local
branch for each of its branches, is the clone measured: an operator's local
clone, with a checkout.  The result is cached in the work directory, keyed by
the generation parameters; a rerun reuses it.  At the default size it holds at
least 400 MiB of pack and 800,000 objects, and generation fails loudly when it
does not (--min-pack-mib, --min-objects).

Each measured run is a fresh child, timed by wall clock, its CPU (user + sys)
and peak RSS from os.wait4's rusage: that covers the child and every
descendant it waited for, and ru_maxrss is the largest single process among
them (git's pack-objects and index-pack run at once; their sum is not
reported).  The two tools alternate, --runs times each:
  git    `git clone --no-local --bare -q CLONE OUT` (git's own defaults: no
         system or global config)
  stage  `sealed-probe-proxy stage --config C --clone bench/big=CLONE --state
         S` into a fresh state directory, then `unstage --state S` (timed
         apart, not compared)
Caches are dropped for neither: the clone's files are read once before the
first run so that neither pays a cold first read.  The table gives, per tool,
min and median wall and CPU and the peak RSS; then stage / git for wall and
CPU (medians) against the acceptance's 1.5x, and stage's largest peak RSS
against 256 MiB plus the largest blob that HEAD and the refs reach.

usage (as root, after building; stage needs runc on PATH):
  bench/staging.py [--runs 3] [--scale 1 | --commits N --files N] [--seed 27]
                   [--workdir /var/tmp/sp-bench-staging] [--build build]
                   [--proxy PATH] [--clone PATH] [--generate-only] [--check]
                   [--min-pack-mib MiB] [--min-objects N] [--json FILE]
"""

import argparse
import datetime
import fcntl
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPO = "bench/big"
MIB = 1 << 20

# The generator.  GEN_VERSION goes into the cache key: bump it whenever the
# stream changes for the same parameters.
GEN_VERSION = 1
STATS_VERSION = 2  # what clone_stats() reports: bump to recount cached clones
DEFAULT_COMMITS = 64000
DEFAULT_FILES = 3000
DEFAULT_SEED = 27
# The acceptance's history (issue 27): at least this much, at the default size.
MIN_PACK_MIB = 400
MIN_OBJECTS = 800000
SCALED_SLACK = 0.75
# The acceptance's bounds.
TARGET_RATIO = 1.5
MEMORY_BASE = 256 * MIB

REPACK = ["repack", "-a", "-d", "-f", "-q", "--window=10", "--depth=50"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def die(msg):
    log(f"staging.py: {msg}")
    sys.exit(1)


def git_env(home):
    return {"PATH": PATH, "HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def git(env, repo, *args, capture=True):
    r = subprocess.run(["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-C", repo, *args],
                       stdin=subprocess.DEVNULL, capture_output=capture, env=env)
    if r.returncode != 0:
        die(f"git {' '.join(args)} in {repo} failed: {(r.stderr or b'').decode(errors='replace').strip()}")
    return r.stdout.decode() if capture else None


def git_lines(env, repo, *args):
    """git's output, a line at a time, without holding it whole."""
    p = subprocess.Popen(["git", "-C", repo, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, text=True, bufsize=1 << 20)
    yield from (line.rstrip("\n") for line in p.stdout)
    err = p.stderr.read()
    if p.wait() != 0:
        die(f"git {' '.join(args)} in {repo} failed: {err.strip()}")


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n:.1f} GiB"


# The runner between this script and each measured child.  A child's
# ru_maxrss counts the memory it had before its exec too: the parent's whole
# RSS under vfork (subprocess, posix_spawn) or fork.  Forked by this script,
# whose RSS grows to hundreds of MiB reading a large pack's object list, a
# `true` would show as much.  So a small interpreter (python3 -I -S, about
# 9 MiB) forks and waits for the child instead, and writes the child's wall
# time and rusage to the fd it is given; `floor` in the report is what it
# measures for /bin/true.
RUNNER = r"""
import os, signal, sys, time
fd = int(sys.argv[1])
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child's to handle; its exit ends this
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - start
os.write(fd, b"%d %r %r %r %d" % (os.waitstatus_to_exitcode(status), wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss))
"""


def start_child(argv, env, out, cwd=None, stdin=subprocess.DEVNULL):
    """Starts argv under the runner; finish_child() waits for it."""
    rfd, wfd = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-I", "-S", "-c", RUNNER, str(wfd), *argv], stdin=stdin, stdout=out,
                             stderr=out, env=env, cwd=cwd, pass_fds=(wfd,))
    finally:
        os.close(wfd)
    p.result_fd = rfd
    return p


def finish_child(p):
    """The child's wall time, CPU (user + sys) and peak RSS: os.wait4's
    rusage, the child and every descendant it waited for; ru_maxrss is the
    largest single process among them."""
    p.wait()
    with os.fdopen(p.result_fd, "rb") as f:
        fields = f.read().split()
    if p.returncode != 0 or len(fields) != 5:
        die(f"the runner failed (exit {p.returncode}) for {' '.join(p.args[6:])}")
    code, wall, user, sys_s, rss = fields
    return {"wall_s": float(wall), "user_s": float(user), "sys_s": float(sys_s),
            "cpu_s": float(user) + float(sys_s), "maxrss_bytes": int(rss) * 1024, "exit": int(code)}


def timed_child(argv, env, log_path, cwd=None):
    """Runs argv as a fresh child, its output appended to log_path; returns
    finish_child()'s numbers."""
    with open(log_path, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        return finish_child(start_child(argv, env, out, cwd=cwd))


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:]).rstrip()
    except OSError:
        return ""


# ---- the generated history ---------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyz"
EXTS = (".c", ".c", ".h", ".py", ".py", ".rs", ".go", ".js", ".md", ".txt", ".sh", ".toml")
SUFFIXES = ("", "", "", ";", ";", ",", ":", " {", " }", ")", "();", " = 0;", " # note")


class History:
    """The fast-import stream of a long-lived project, deterministic for its
    parameters.  State is a dict per branch, path -> File; a File is never
    changed in place (a new one replaces it), so a branch's dict is copied
    cheaply at a fork."""

    class File:
        __slots__ = ("kind", "lines", "target", "mode", "data")

        def __init__(self, kind, lines=None, target=0, mode="100644", data=None):
            self.kind, self.lines, self.target, self.mode, self.data = kind, lines, target, mode, data

        def content(self):
            return self.data if self.kind == "asset" else b"".join(self.lines)

    def __init__(self, commits, files, seed, out):
        self.rng = random.Random(seed)
        self.commits, self.files, self.out = commits, files, out
        rng = self.rng
        self.vocab = ["".join(rng.choices(LETTERS, k=rng.choice((2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 8, 9, 10, 12))))
                      for _ in range(8000)]
        self.people = [(f"{rng.choice(self.vocab).title()} {rng.choice(self.vocab).title()}",
                        f"{rng.choice(self.vocab)}@{rng.choice(self.vocab)}.example") for _ in range(60)]
        self.when = 1262304000  # 2010-01-01
        self.mark = 0
        self.used_paths = set()
        # Directories: depth 1 to 4 whatever the size, so that a commit
        # writes as many trees at any scale.
        self.dirs = []
        top = [rng.choice(self.vocab) for _ in range(max(4, min(14, files // 100)))]
        for _ in range(max(40, files // 12)):
            depth = rng.choices((1, 2, 3, 4), weights=(15, 35, 35, 15))[0]
            parts = [rng.choice(top)]
            for _ in range(depth - 1):
                kids = [d.split("/")[len(parts)] for d in self.dirs
                        if d.startswith("/".join(parts) + "/") and d.count("/") >= len(parts)]
                parts.append(rng.choice(kids) if kids and rng.random() < 0.6 else rng.choice(self.vocab))
            self.dirs.append("/".join(parts))
        self.dirs = sorted(set(self.dirs))
        self.count = 0  # commits written

    # -- content

    def line(self):
        rng = self.rng
        if rng.random() < 0.07:
            return b"\n"
        toks = rng.choices(self.vocab, k=rng.randint(2, 11))
        if rng.random() < 0.5:
            toks[rng.randrange(len(toks))] = "%06x" % rng.getrandbits(24)
        if rng.random() < 0.3:
            toks.append(str(rng.randrange(100000)))
        return ("    " * rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)) + " ".join(toks)
                + rng.choice(SUFFIXES) + "\n").encode()

    def row(self):
        rng = self.rng
        return (f"{rng.randrange(10**7)},{rng.choice(self.vocab)},{rng.random() * 1000:.4f},"
                f"{rng.randrange(-50000, 50000)},{rng.getrandbits(32):08x}\n").encode()

    def new_file(self, kind):
        rng = self.rng
        if kind == "text":
            target = int(min(60000, max(400, rng.lognormvariate(8.8, 0.9)))) // 55
            return self.File("text", [self.line() for _ in range(target)], target,
                             "100755" if rng.random() < 0.03 else "100644")
        if kind == "data":
            target = int(rng.uniform(40000, 300000)) // 45
            return self.File("data", [self.row() for _ in range(target // 3)], target)
        return self.File("asset", data=rng.randbytes(int(min(6 << 20, rng.lognormvariate(12.6, 0.8)))))

    def edit(self, f):
        """A new version of f, a few lines away from it."""
        rng = self.rng
        if f.kind == "asset":
            data = f.data
            if rng.random() < 0.5:  # a new picture: nothing to delta against
                return self.File("asset", data=rng.randbytes(int(len(data) * rng.uniform(0.8, 1.25)) + 1))
            at = rng.randrange(len(data))
            return self.File("asset", data=data[:at] + rng.randbytes(rng.randint(16, 4096)) + data[at + 2048:])
        lines = list(f.lines)
        make = self.line if f.kind == "text" else self.row
        if f.kind == "data" and len(lines) < f.target and rng.random() < 0.7:
            lines += [make() for _ in range(min(2000, int(rng.paretovariate(1.2) * 20)))]
            return self.File(f.kind, lines, f.target, f.mode)
        for _ in range(1 + (rng.random() < 0.45) + (rng.random() < 0.2)):
            remove = min(int(rng.paretovariate(1.25) * 4) - 3, 400)
            insert = min(int(rng.paretovariate(1.25) * 4) - 3, 400)
            if len(lines) > f.target * 1.2:
                remove = remove * 2 + 2
            elif len(lines) < f.target * 0.8:
                insert = insert * 2 + 2
            if remove <= 0 and insert <= 0:
                remove = insert = 1
            at = rng.randrange(len(lines) + 1)
            lines[at:at + max(0, remove)] = [make() for _ in range(max(0, insert))]
        if not lines:
            lines = [make()]
        return self.File(f.kind, lines, f.target, f.mode)

    def new_path(self, kind):
        rng = self.rng
        while True:
            if kind == "asset":
                d = rng.choice(("assets", "vendor", "docs/images")) + "/" + rng.choice(self.vocab)
                name = rng.choice(self.vocab) + rng.choice((".png", ".bin", ".woff2", ".tar.gz"))
            elif kind == "data":
                d, name = rng.choice(self.dirs) + "/data", rng.choice(self.vocab) + ".csv"
            else:
                d, name = rng.choice(self.dirs), rng.choice(self.vocab) + rng.choice(EXTS)
            path = f"{d}/{name}"
            if path not in self.used_paths:
                self.used_paths.add(path)
                return path

    def kind_for_new(self):
        r = self.rng.random()
        return "asset" if r < 0.04 else "data" if r < 0.07 else "text"

    def message(self, subject=None):
        rng = self.rng
        words = lambda n: " ".join(rng.choices(self.vocab, k=n))  # noqa: E731
        text = (subject or f"{rng.choice(self.vocab)}: {words(rng.randint(3, 9))}") + "\n"
        if rng.random() < 0.8:
            text += "\n" + "\n".join(words(rng.randint(6, 12)) for _ in range(rng.randint(1, 8))) + "\n"
        return text.encode()

    # -- the stream

    def write(self, b):
        self.out.write(b)

    def data(self, payload):
        self.write(b"data %d\n" % len(payload))
        self.write(payload)
        self.write(b"\n")

    def ident(self):
        self.when += self.rng.randint(120, 40000)
        name, email = self.rng.choice(self.people)
        return f"{name} <{email}> {self.when} +0000".encode()

    def commit(self, ref, changes, merge=None, subject=None):
        """changes: (path, File) to write, (path, None) to delete,
        ("rename", old, new)."""
        self.mark += 1
        self.count += 1
        who = self.ident()
        self.write(b"commit %s\nmark :%d\nauthor %s\ncommitter %s\n" % (ref.encode(), self.mark, who, who))
        self.data(self.message(subject))
        if merge:
            self.write(b"merge :%d\n" % merge)
        for ch in changes:
            if ch[0] == "rename":
                self.write(b"R %s %s\n" % (ch[1].encode(), ch[2].encode()))
            elif ch[1] is None:
                self.write(b"D %s\n" % ch[0].encode())
            else:
                self.write(b"M %s inline %s\n" % (ch[1].mode.encode(), ch[0].encode()))
                self.data(ch[1].content())
        self.write(b"\n")
        return self.mark

    def tag(self, name, mark):
        self.write(b"tag %s\nfrom :%d\ntagger %s\n" % (name.encode(), mark, self.ident()))
        self.data(self.message(f"Release {name}"))  # a tag takes no blank line after its data

    def pick(self, state, paths):
        """A file to edit: a hot few, the recently added, or any."""
        rng = self.rng
        r = rng.random()
        if r < 0.35 and self.hot:
            p = rng.choice(self.hot)
            if p in state:
                return p
        if r < 0.55:
            p = paths[-1 - min(len(paths) - 1, int(rng.expovariate(1 / 40)))]
        else:
            p = rng.choice(paths)
        return p

    def changes_for(self, state, paths, allow_structure=True):
        """The changes of one ordinary commit, applied to state and paths:
        at most one add, delete or rename, then a handful of edits."""
        rng = self.rng
        changes, edited = [], {}
        r = rng.random()
        if allow_structure and r < self.add_rate:
            kind = self.kind_for_new()
            p = self.new_path(kind)
            state[p] = self.new_file(kind)
            paths.append(p)
            edited[p] = state[p]
        elif allow_structure and r < self.add_rate + 0.008 and len(paths) > 10:
            p = paths.pop(rng.randrange(len(paths)))
            del state[p]
            changes.append((p, None))
        elif allow_structure and r < self.add_rate + 0.016 and len(paths) > 10:
            i = rng.randrange(len(paths))
            old = paths[i]
            kind = state[old].kind
            new = rng.choice(self.dirs) + "/" + old.rsplit("/", 1)[1]  # moved, keeping its name
            if kind != "text" or new in self.used_paths:
                new = self.new_path(kind)
            self.used_paths.add(new)
            state[new] = state.pop(old)
            paths[i] = new
            changes.append(("rename", old, new))
        for _ in range(1 + min(int(rng.expovariate(1 / 3.2)), 40)):
            p = self.pick(state, paths)
            if state[p].kind == "asset" and rng.random() < 0.94:
                continue  # assets change rarely
            state[p] = edited[p] = self.edit(state[p])
        return changes + sorted(edited.items())

    def run(self):
        rng = self.rng
        total = self.commits
        initial = max(10, int(self.files * 0.35))
        # Adds (text, data, assets), on main only (about three commits in
        # four), bring the tree to about 85 % of `files` by the end, net of
        # deletes.
        self.add_rate = (self.files - initial) / max(1, total) + 0.008
        main, main_paths = {}, []
        for _ in range(initial):
            kind = "data" if rng.random() < 0.02 else "text"
            p = self.new_path(kind)
            main[p] = self.new_file(kind)
            main_paths.append(p)
        self.hot = rng.sample(main_paths, max(3, len(main_paths) // 25))
        tip = self.commit("refs/heads/main", sorted(main.items()), subject="Initial import")
        release_every = max(40, total // 60)
        topic_names = [f"topic/{rng.choice(self.vocab)}-{rng.choice(self.vocab)}" for _ in range(3)]
        topics = {}  # name -> its state, paths, tip, the paths it changed, commits left
        maint = None  # the maint branch since the last release
        major, minor = 0, 1
        since_release = 0
        while self.count < total:
            r = rng.random()
            if topics and r < 0.30:  # a topic's commit; the last merges it
                name = rng.choice(sorted(topics))
                t = topics[name]
                ch = self.changes_for(t["state"], t["paths"], allow_structure=False)
                t["tip"] = self.commit("refs/heads/" + name, ch)
                t["changed"].update(p for p, _ in ch)
                t["left"] -= 1
                if t["left"] <= 0:  # the topic's version of what it touched wins
                    merged = []
                    for p in sorted(t["changed"]):
                        if p not in main:
                            main_paths.append(p)
                        main[p] = t["state"][p]
                        merged.append((p, main[p]))
                    tip = self.commit("refs/heads/main", merged, merge=t["tip"], subject=f"Merge branch '{name}'")
                    del topics[name]
                continue
            if maint and 0.30 <= r < 0.34:  # a fix on maint
                ch = self.changes_for(maint["state"], maint["paths"], allow_structure=False)
                maint["tip"] = self.commit("refs/heads/maint", ch)
                maint["fixes"] += 1
                if maint["fixes"] >= 6:  # a point release
                    maint["patch"] += 1
                    maint["fixes"] = 0
                    self.tag(f"v{maint['version']}.{maint['patch']}", maint["tip"])
                continue
            free = [n for n in topic_names if n not in topics]
            if free and 0.34 <= r < 0.36:  # a topic forks from main
                name = rng.choice(free)
                self.write(b"reset refs/heads/%s\nfrom :%d\n\n" % (name.encode(), tip))
                topics[name] = {"state": dict(main), "paths": list(main_paths), "tip": tip, "changed": set(),
                                "left": rng.randint(2, 25)}
                continue
            tip = self.commit("refs/heads/main", self.changes_for(main, main_paths))
            since_release += 1
            if rng.random() < 0.003:
                self.hot = rng.sample(main_paths, max(3, len(main_paths) // 25))
            if since_release >= release_every:
                since_release = 0
                minor += 1
                if minor > 9:
                    major, minor = major + 1, 0
                if maint and maint["fixes"]:  # the last point release of the old line: its fixes stay reachable
                    self.tag(f"v{maint['version']}.{maint['patch'] + 1}", maint["tip"])
                self.tag(f"v{major}.{minor}.0", tip)
                self.write(b"reset refs/heads/maint\nfrom :%d\n\n" % tip)
                maint = {"state": dict(main), "paths": list(main_paths), "tip": tip, "fixes": 0, "patch": 0,
                         "version": f"{major}.{minor}"}
        self.write(b"done\n")
        return {"main": tip, "topics": sorted(topics), "maint": maint is not None}


def gen_params(args):
    if args.commits or args.files:
        commits = args.commits or round(DEFAULT_COMMITS * args.scale)
        files = args.files or round(DEFAULT_FILES * args.scale)
    else:
        commits = max(50, round(DEFAULT_COMMITS * args.scale))
        files = max(20, round(DEFAULT_FILES * args.scale))
    return {"version": GEN_VERSION, "commits": commits, "files": files, "seed": args.seed}


def gen_minimums(args, params):
    """The minimums a generated history must meet: the acceptance's at the
    default size; below it, SCALED_SLACK of them times --scale (a smaller
    tree has fewer directories, so a commit writes fewer trees); none for
    explicit --commits or --files unless given."""
    full = not (args.commits or args.files)
    factor = 0 if not full else 1 if args.scale >= 1 else args.scale * SCALED_SLACK
    pack = args.min_pack_mib if args.min_pack_mib is not None else MIN_PACK_MIB * factor
    objects = args.min_objects if args.min_objects is not None else int(MIN_OBJECTS * factor)
    return pack, objects


def step(name, argv, env, log_path, cwd=None):
    r = timed_child(argv, env, log_path, cwd=cwd)
    if r["exit"] != 0:
        die(f"{name} failed (exit {r['exit']}); {log_path}:\n{tail(log_path)}")
    log(f"  {name}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak {human(r['maxrss_bytes'])}")
    return r


def generate(work, params, env):
    """Generates the history into work/gen-KEY.tmp and renames it into
    place; returns its meta."""
    tmp = work + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    gen_log = os.path.join(tmp, "generate.log")
    bare = os.path.join(tmp, "gen.git")
    git(env, tmp, "init", "-q", "--bare", "-b", "main", bare)
    meta = {"params": params, "steps": {}}
    start = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    log(f"  fast-import: {params['commits']} commits, --files {params['files']} ...")
    with open(gen_log, "ab") as logf:
        p = start_child(["git", "-C", bare, "fast-import", "--quiet", "--done", "--depth=50"], env, logf,
                        stdin=subprocess.PIPE)
        try:
            with open(p.stdin.fileno(), "wb", buffering=1 << 20, closefd=False) as stream:
                h = History(params["commits"], params["files"], params["seed"], stream)
                shape = h.run()
            p.stdin.close()
        except BrokenPipeError:
            pass
        fi = finish_child(p)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if fi["exit"] != 0:
        die(f"git fast-import failed; {gen_log}:\n{tail(gen_log)}")
    fi["generator_cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    meta["steps"]["fast-import"] = fi
    meta["shape"] = {"commits": h.count, "topics_open": shape["topics"], "maint": shape["maint"]}
    log(f"  fast-import: {fi['wall_s']:.1f} s wall, {fi['cpu_s']:.1f} s CPU in git, "
        f"{fi['generator_cpu_s']:.1f} s in the generator")
    meta["steps"]["repack"] = step("repack", ["git", "-c", "repack.writeBitmaps=false", "-c", "gc.auto=0", "-C",
                                              bare, *REPACK], env, gen_log)
    clone = os.path.join(tmp, "clone")
    meta["steps"]["clone"] = step("clone --no-hardlinks", ["git", "clone", "-q", "--no-hardlinks", bare, clone],
                                  env, gen_log)
    # A local branch for each of the origin's, as an operator's clone has
    # them: `git clone --bare` of the clone then carries every branch that
    # stage reaches through the remote-tracking refs too.
    for ref in git(env, clone, "for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/origin").split():
        if ref not in ("HEAD", "main"):
            git(env, clone, "branch", "-q", ref, "origin/" + ref)
    shutil.rmtree(bare)
    meta["generated_s"] = time.monotonic() - start
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.rename(tmp, work)
    return meta


# ---- what a clone holds ----------------------------------------------------------

def gitdir_of(clone, env):
    bare = git(env, clone, "rev-parse", "--is-bare-repository").strip() == "true"
    return bare, (clone if bare else os.path.join(clone, ".git"))


def du(path):
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def clone_stats(clone, env):
    """count-objects -v, the pack's delta chains and the reachable objects:
    their number and the largest blob among them."""
    start = time.monotonic()
    counts = {}
    for line in git(env, clone, "count-objects", "-v").splitlines():
        k, v = line.split(":", 1)
        counts[k.strip()] = int(v.strip()) if v.strip().isdigit() else v.strip()
    fmt = "%(objectname) %(objecttype) %(objectsize) %(objectsize:disk) %(deltabase)"
    by_type, base, blob_size = {}, {}, {}
    for line in git_lines(env, clone, "cat-file", "--batch-all-objects", "--unordered", f"--batch-check={fmt}"):
        name, typ, sz, disk, delta = line.split()
        t = by_type.setdefault(typ, {"objects": 0, "bytes": 0, "disk": 0, "deltas": 0})
        t["objects"] += 1
        t["bytes"] += int(sz)
        t["disk"] += int(disk)
        if delta != "0" * len(delta):
            t["deltas"] += 1
            base[name] = delta
        if typ == "blob":
            blob_size[name] = int(sz)
    depth = {}
    for name in base:
        chain, n = [], name
        while n in base and n not in depth:
            chain.append(n)
            n = base[n]
        d = depth.get(n, 0)
        for c in reversed(chain):
            d += 1
            depth[c] = d
    depths = list(depth.values())
    del base
    reachable = largest = 0
    for name in git_lines(env, clone, "rev-list", "--objects", "--no-object-names", "--exclude=refs/stash", "--all",
                          "HEAD"):
        reachable += 1
        largest = max(largest, blob_size.get(name, 0))
    del blob_size
    total = sum(t["objects"] for t in by_type.values())
    stats = {
        "count_objects": counts,
        "pack_bytes": counts.get("size-pack", 0) * 1024,
        "objects": counts.get("in-pack", 0) + counts.get("count", 0),
        "packs": counts.get("packs"),
        "by_type": by_type,
        "deltas": len(depths),
        "delta_fraction": len(depths) / total if total else 0,
        "max_chain": max(depths, default=0),
        "mean_chain": statistics.mean(depths) if depths else 0,
        "reachable_objects": reachable,
        "largest_blob_bytes": largest,
        "commits": by_type.get("commit", {}).get("objects", 0),
        "tags": len(git(env, clone, "tag", "-l").split()),
        "branches": len(git(env, clone, "for-each-ref", "--format=x", "refs/heads").split()),
        "head_files": 0,
        "head_bytes": 0,
        "bitmap": any(n.endswith(".bitmap") for n in os.listdir(os.path.join(gitdir_of(clone, env)[1],
                                                                              "objects", "pack"))),
        "seconds": None,
    }
    for line in git_lines(env, clone, "ls-tree", "-r", "-l", "HEAD"):
        size = line.split(None, 4)[3]
        stats["head_files"] += 1
        stats["head_bytes"] += int(size) if size.isdigit() else 0
    stats["seconds"] = time.monotonic() - start
    return stats


def print_stats(s, what):
    print(f"{what}: {s['objects']:,} objects ({s['reachable_objects']:,} reachable from HEAD and the refs), "
          f"{human(s['pack_bytes'])} of pack in {s['packs']} pack(s){' with a bitmap' if s['bitmap'] else ''}")
    print(f"  {s['commits']:,} commits, {s['tags']} tags, {s['branches']} branches, "
          f"{s['head_files']:,} files at HEAD ({human(s['head_bytes'])})")
    print(f"  {s['deltas']:,} deltas ({100 * s['delta_fraction']:.1f} % of objects), chains up to "
          f"{s['max_chain']} deep (mean {s['mean_chain']:.1f}); largest reachable blob "
          f"{human(s['largest_blob_bytes'])}")
    for typ in ("commit", "tree", "blob", "tag"):
        t = s["by_type"].get(typ)
        if t:
            print(f"  {typ:6} {t['objects']:>9,} objects, {human(t['bytes']):>10} inflated, "
                  f"{human(t['disk']):>10} in the pack, {t['deltas']:,} deltas")


# ---- the cache -------------------------------------------------------------------

def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def need_space(path, need, what):
    free = free_bytes(path)
    log(f"{path}: {human(free)} free; {what} needs about {human(need)}")
    if free < need:
        die(f"refusing: {path} has {human(free)} free, and {what} needs about {human(need)}; "
            "free some space or give another --workdir")


def generated_clone(args, env):
    params = gen_params(args)
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    work = os.path.join(args.workdir, f"gen-{key}")
    lock = open(os.path.join(args.workdir, f"gen-{key}.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"{work}: another staging.py is generating it; waiting")
        fcntl.flock(lock, fcntl.LOCK_EX)
    meta_path = os.path.join(work, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        log(f"{work}: cached ({params['commits']} commits, {params['files']} files, seed {params['seed']}; "
            f"generated in {meta['generated_s']:.0f} s)")
    else:
        shutil.rmtree(work, ignore_errors=True)
        # fast-import's pack (2.1 GiB at the default size: it deltas only
        # against a path's last version), the repacked one beside it (478
        # MiB), then the clone's copy of that.
        factor = params["commits"] / DEFAULT_COMMITS
        need_space(args.workdir, int(3.5 * 1024 * MIB * factor) + 256 * MIB, "generating the history")
        log(f"{work}: generating {params} ...")
        meta = generate(work, params, env)
        log(f"{work}: generated in {meta['generated_s']:.0f} s")
    clone = os.path.join(work, "clone")
    if meta.get("stats_version") != STATS_VERSION:
        log(f"{clone}: counting its objects ...")
        meta["stats"], meta["stats_version"] = clone_stats(clone, env), STATS_VERSION
        with open(meta_path + ".new", "w") as f:
            json.dump(meta, f, indent=1)
        os.rename(meta_path + ".new", meta_path)
    lock.close()
    return clone, meta


def given_clone(args, env):
    """--clone PATH: a non-bare clone as is; a bare repository is cloned
    (--no-hardlinks, with a local branch for each) into the work directory
    first, once."""
    path = os.path.abspath(args.clone)
    bare, gitdir = gitdir_of(path, env)
    if not bare:
        return path, {"clone_of": None}
    heads = git(env, path, "for-each-ref", "--format=%(objectname) %(refname)").encode()
    key = hashlib.sha256(path.encode() + b"\0" + heads).hexdigest()[:12]
    work = os.path.join(args.workdir, f"clone-{key}")
    clone = os.path.join(work, "clone")
    meta_path = os.path.join(work, "meta.json")
    if not os.path.exists(meta_path):
        shutil.rmtree(work, ignore_errors=True)
        need_space(args.workdir, 2 * du(gitdir) + 256 * MIB, f"a clone of {path}")
        os.makedirs(work)
        log(f"{path} is bare: cloning it --no-hardlinks into {clone}")
        r = step("clone --no-hardlinks", ["git", "clone", "-q", "--no-hardlinks", path, clone], env,
                 os.path.join(work, "clone.log"))
        head = git(env, clone, "symbolic-ref", "--short", "-q", "HEAD").strip()
        for ref in git(env, clone, "for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/origin").split():
            if ref not in ("HEAD", head):
                git(env, clone, "branch", "-q", ref, "origin/" + ref)
        with open(meta_path, "w") as f:
            json.dump({"clone_of": path, "clone": r}, f)
    with open(meta_path) as f:
        return clone, json.load(f)


# ---- the measurement ---------------------------------------------------------------

def idx_objects(pack_dir):
    """Objects and bytes of the packs in pack_dir, from each .idx's fan-out."""
    objects = size = 0
    for name in os.listdir(pack_dir):
        full = os.path.join(pack_dir, name)
        if name.endswith(".pack"):
            size += os.path.getsize(full)
        elif name.endswith(".idx"):
            with open(full, "rb") as f:
                head = f.read(8 + 256 * 4)
            if head[:4] == b"\377tOc":
                objects += int.from_bytes(head[-4:], "big")
    return objects, size


def warm(gitdir):
    """Reads every file of the clone's .git once: neither tool pays a cold
    first read."""
    for top, _, files in os.walk(gitdir):
        for name in files:
            try:
                with open(os.path.join(top, name), "rb") as f:
                    while f.read(1 << 20):
                        pass
            except OSError:
                pass


def summarize(samples):
    if not samples:
        return None
    out = {"n": len(samples)}
    for k in ("wall_s", "cpu_s", "user_s", "sys_s", "maxrss_bytes"):
        vals = [s[k] for s in samples]
        out[k] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
    return out


def measure(args, clone, env, stats):
    if os.geteuid() != 0:
        die("stage needs root")
    if not shutil.which("runc", path=PATH):
        die("stage needs runc on PATH")
    proxy = os.path.abspath(args.proxy or os.path.join(args.build, "src", "sealed-probe-proxy"))
    if not os.access(proxy, os.X_OK):
        die(f"{proxy} is missing: build first, or give --proxy")
    _, gitdir = gitdir_of(clone, env)
    git_bytes = du(gitdir)
    # A bare clone (the pack again) and a seed (.git, its new pack, the tree).
    need_space(args.workdir, 3 * git_bytes + stats.get("head_bytes", 0) + 512 * MIB, "one run of each")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = os.path.join(args.workdir, f"run-{stamp}-{os.getpid()}")
    os.makedirs(run_dir)
    os.chmod(run_dir, 0o700)
    config = os.path.join(run_dir, "config.json")
    with open(config, "w") as f:
        json.dump({"sealedProbes": {"enabled": True, "privateRepos": [REPO], "runtime": "runc"}}, f)
    stage_env = {"PATH": PATH}
    log_path = os.path.join(run_dir, "runs.log")
    results = {"git": [], "stage": [], "unstage": []}
    outputs = {"git": [], "stage": []}
    log(f"reading {gitdir} once (caches are dropped for neither tool)")
    warm(gitdir)
    floor = timed_child(["true"], stage_env, log_path)["maxrss_bytes"]
    live_state = None
    try:
        for i in range(args.runs):
            out = os.path.join(run_dir, f"git-{i}.git")
            log(f"run {i + 1}/{args.runs}: git clone --no-local --bare")
            r = timed_child(["git", "clone", "--no-local", "--bare", "-q", clone, out], env, log_path)
            if r["exit"] != 0:
                die(f"git clone --no-local --bare failed (exit {r['exit']}); {log_path}:\n{tail(log_path)}")
            results["git"].append(r)
            outputs["git"].append(idx_objects(os.path.join(out, "objects", "pack")))
            log(f"  {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak {human(r['maxrss_bytes'])}")
            shutil.rmtree(out)

            state = live_state = os.path.join(run_dir, f"state-{i}")
            log(f"run {i + 1}/{args.runs}: sealed-probe-proxy stage")
            r = timed_child([proxy, "stage", "--config", config, "--clone", f"{REPO}={clone}", "--state", state],
                            stage_env, log_path)
            if r["exit"] != 0:
                die(f"stage failed (exit {r['exit']}) after {r['wall_s']:.1f} s; {log_path}:\n{tail(log_path)}")
            results["stage"].append(r)
            with open(os.path.join(state, "staged.json")) as f:
                staged = json.load(f)
            seed = os.path.join(state, "seeds", staged["run"], str(staged["seeds"][0]["index"]))
            outputs["stage"].append(idx_objects(os.path.join(seed, ".git", "objects", "pack")))
            log(f"  {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak {human(r['maxrss_bytes'])}")
            u = timed_child([proxy, "unstage", "--state", state], stage_env, log_path)
            if u["exit"] != 0:
                die(f"unstage failed (exit {u['exit']}); {log_path}:\n{tail(log_path)}")
            results["unstage"].append(u)
            live_state = None
            shutil.rmtree(state)
    finally:
        if live_state and os.path.isdir(live_state):
            subprocess.run([proxy, "unstage", "--state", live_state], capture_output=True, env=stage_env)
    shutil.rmtree(run_dir)
    return proxy, results, outputs, floor


def verdicts(summary, stats):
    g, s = summary["git"], summary["stage"]
    bound = MEMORY_BASE + stats["largest_blob_bytes"]
    wall = s["wall_s"]["median"] / g["wall_s"]["median"]
    cpu = s["cpu_s"]["median"] / g["cpu_s"]["median"] if g["cpu_s"]["median"] else float("inf")
    rss = s["maxrss_bytes"]["max"]
    return {"wall_ratio": wall, "cpu_ratio": cpu, "memory_bound_bytes": bound, "stage_peak_rss_bytes": rss,
            "wall_ok": wall <= TARGET_RATIO, "cpu_ok": cpu <= TARGET_RATIO, "memory_ok": rss <= bound}


def print_table(summary, outputs, stats, v, floor):
    print()
    print("| tool | runs | wall min | wall median | CPU min | CPU median (user + sys) | peak RSS median | "
          "peak RSS max |")
    print("|---|---|---|---|---|---|---|---|")
    names = {"git": "`git clone --no-local --bare`", "stage": "`sealed-probe-proxy stage`",
             "unstage": "`unstage` (not compared)"}
    for tool in ("git", "stage", "unstage"):
        m = summary[tool]
        print(f"| {names[tool]} | {m['n']} | {m['wall_s']['min']:.1f} s | {m['wall_s']['median']:.1f} s | "
              f"{m['cpu_s']['min']:.1f} s | {m['cpu_s']['median']:.1f} s ({m['user_s']['median']:.1f} + "
              f"{m['sys_s']['median']:.1f}) | {human(m['maxrss_bytes']['median'])} | "
              f"{human(m['maxrss_bytes']['max'])} |")
    print()
    mark = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    print(f"stage / git, wall (medians): {v['wall_ratio']:.2f}x  (target at most {TARGET_RATIO}x: "
          f"{mark(v['wall_ok'])})")
    print(f"stage / git, CPU (medians):  {v['cpu_ratio']:.2f}x  (target at most {TARGET_RATIO}x: "
          f"{mark(v['cpu_ok'])})")
    print(f"stage's peak RSS (largest):  {human(v['stage_peak_rss_bytes'])}  (bound 256 MiB + the largest "
          f"blob, {human(stats['largest_blob_bytes'])} = {human(v['memory_bound_bytes'])}: {mark(v['memory_ok'])})")
    for tool, what in (("git", "git's bare clone"), ("stage", "stage's seed")):
        objs, size = outputs[tool][-1]
        print(f"{what}: {objs:,} objects in {human(size)} of pack "
              f"(the clone: {stats['reachable_objects']:,} reachable, {human(stats['pack_bytes'])})")
    print("Caches were dropped for neither: the clone's .git was read once before the first run. "
          f"Peak RSS is ru_maxrss, the largest single process; `true` measures {human(floor)} this way.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each tool, alternating (default 3)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help=f"generated size against the default ({DEFAULT_COMMITS} commits, {DEFAULT_FILES} files): "
                         "0.02 for a smoke test (default 1)")
    ap.add_argument("--commits", type=int, help="commits to generate (overrides --scale's)")
    ap.add_argument("--files", type=int, help="the tree's size: it starts with 35 %% of this many files and "
                    "ends with about 85 %% (the default 3000 ends with 2,506; overrides --scale's)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"generator seed (default {DEFAULT_SEED})")
    ap.add_argument("--min-pack-mib", type=float,
                    help=f"fail unless the generated pack is at least this (default {MIN_PACK_MIB}; times "
                         f"--scale times {SCALED_SLACK} below 1; none with --commits or --files)")
    ap.add_argument("--min-objects", type=int,
                    help=f"fail unless the generated history has at least this many objects (default "
                         f"{MIN_OBJECTS}; times --scale times {SCALED_SLACK} below 1; none with --commits or "
                         "--files)")
    ap.add_argument("--workdir", default="/var/tmp/sp-bench-staging",
                    help="scratch and cache directory (default /var/tmp/sp-bench-staging)")
    ap.add_argument("--clone", metavar="PATH", help="measure this clone instead of a generated one (a bare "
                    "repository is cloned --no-hardlinks into the work directory first)")
    ap.add_argument("--build", default="build", help="the meson build directory (default build)")
    ap.add_argument("--proxy", metavar="PATH", help="sealed-probe-proxy (default BUILD/src/sealed-probe-proxy)")
    ap.add_argument("--generate-only", action="store_true", help="generate (or find cached) and report the "
                    "history, measure nothing")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when stage takes more than {TARGET_RATIO}x git's "
                    "wall or CPU (medians) or its peak RSS exceeds 256 MiB + the largest blob")
    ap.add_argument("--json", metavar="FILE", help="also write every sample and summary here")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if args.runs < 1 or args.scale <= 0:
        die("--runs and --scale must be positive")

    os.makedirs(args.workdir, exist_ok=True)
    args.workdir = os.path.abspath(args.workdir)
    home = os.path.join(args.workdir, "home")
    os.makedirs(home, exist_ok=True)
    env = git_env(home)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "bench_commit": subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe",
                                              "--always", "--dirty"], capture_output=True, text=True,
                                             env=env).stdout.strip(),
              "machine": {"kernel": platform.release(), "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                          "git": subprocess.run(["git", "--version"], capture_output=True, text=True,
                                                env=env).stdout.strip()}}
    if args.clone:
        clone, meta = given_clone(args, env)
        stats = clone_stats(clone, env)
        report["clone"] = {"path": clone, **meta}
        print_stats(stats, f"clone {clone}")
        minimum_pack, minimum_objects = args.min_pack_mib or 0, args.min_objects or 0
    else:
        clone, meta = generated_clone(args, env)
        stats = meta["stats"]
        report["generated"] = {k: v for k, v in meta.items() if k != "stats"}
        p = meta["params"]
        print(f"generated: {p['commits']:,} commits, --files {p['files']:,}, seed {p['seed']} "
              f"(generator version {p['version']}), in {meta['generated_s']:.0f} s: "
              + ", ".join(f"{k} {s['wall_s']:.0f} s" for k, s in meta["steps"].items()))
        print_stats(stats, f"clone {clone}")
        minimum_pack, minimum_objects = gen_minimums(args, p)
    report["clone_stats"] = stats
    short = []
    if stats["pack_bytes"] < minimum_pack * MIB:
        short.append(f"its pack is {human(stats['pack_bytes'])}, under the {minimum_pack:.1f} MiB asked for")
    if stats["objects"] < minimum_objects:
        short.append(f"it has {stats['objects']:,} objects, under the {minimum_objects:,} asked for")
    if short:
        die("the history is too small: " + "; ".join(short))
    if minimum_pack or minimum_objects:
        print(f"meets the minimums: at least {minimum_pack:.1f} MiB of pack and {minimum_objects:,} objects")
    if stats["pack_bytes"] < MIN_PACK_MIB * MIB or stats["objects"] < MIN_OBJECTS:
        print(f"note: smaller than the acceptance's history ({MIN_PACK_MIB} MiB of pack, {MIN_OBJECTS:,} objects): "
              "the ratios below are not the acceptance's")

    if not args.generate_only:
        proxy, results, outputs, floor = measure(args, clone, env, stats)
        summary = {tool: summarize(results[tool]) for tool in results}
        v = verdicts(summary, stats)
        print_table(summary, outputs, stats, v, floor)
        report.update({"proxy": proxy, "runs": results, "outputs": {k: [{"objects": o, "pack_bytes": b}
                                                                         for o, b in outs]
                                                                     for k, outs in outputs.items()},
                       "summary": summary, "verdicts": v, "rss_floor_bytes": floor})
    report["machine"]["loadavg_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.check and not args.generate_only and not (v["wall_ok"] and v["cpu_ok"] and v["memory_ok"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
