"""A local clone is staged as its commit, never as its working tree
(docs/staging.md, "Local clones: the commit, not the working tree").  Real git
makes the clones, `stage` makes the seeds, and probes under the test's backend look
for what must not be there, each paired with a control that finds what must.
Also: packed clones with deltas, shallow clones, paths up to the tree path
limit, forged trees, hostile names in messages, and sparse files."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, cached_rootfs, env_path, require_root_and  # noqa: E402

PROXY = env_path("SP_PROXY")
B = backend()
require_root_and("git")
ROOTFS = cached_rootfs()
from sp_stage import NO, YES, StageWork  # noqa: E402

TREE_PATH_MAX = 4096  # SP_TREE_PATH_MAX: paths inside a tree are at most 4,095 bytes
tap = Tap()
w = StageWork(PROXY, ROOTFS, "sp-stage-commit-")
git = w.git


def deep_finder(needles):
    """A probe that answers YES when any needle appears in a name or a file
    under /probe/repo, or in any zlib stream inside `.git` (loose objects and
    pack entries, deltas included): what a probe could dig out of the object
    store, not just the checkout."""
    return f"""import json, os, zlib
needles = {[n.encode() for n in needles]!r}
found = set()

def scan(data):
    found.update(n for n in needles if n in data)

def streams(data):
    for i in range(len(data) - 1):
        if data[i] & 0x0F == 8 and ((data[i] << 8) | data[i + 1]) % 31 == 0:
            try:
                yield zlib.decompressobj().decompress(data[i:], 1 << 22)
            except zlib.error:
                pass

for dirpath, dirnames, filenames in os.walk("/probe/repo"):
    for name in dirnames + filenames:
        path = os.path.join(dirpath, name)
        scan(path.encode())
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        scan(data)
        if "/.git/" in path:
            for chunk in streams(data):
                scan(chunk)
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if found else "NO"}}, f)
"""


def seed_tree(top):
    """Every entry below top but `.git`: (path, kind, exec bit, bytes or link
    target)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == top:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, top)
            if os.path.islink(p):
                out.append((rel, "link", False, os.readlink(p).encode()))
            elif os.path.isdir(p):
                out.append((rel, "dir", False, b""))
            else:
                with open(p, "rb") as f:
                    out.append((rel, "file", bool(os.stat(p).st_mode & 0o100), f.read()))
    return sorted(out)


def commit_tree(clone):
    """What `git ls-tree` says HEAD's tree is, in seed_tree's form."""
    out = []
    listing = git(clone, "ls-tree", "-r", "-t", "-z", "HEAD", binary=True)
    for rec in listing.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, oid = meta.split()
        rel = path.decode()
        if kind == b"tree" or kind == b"commit":
            out.append((rel, "dir", False, b""))
        else:
            data = git(clone, "cat-file", "blob", oid.decode(), binary=True)
            if mode == b"120000":
                out.append((rel, "link", False, data))
            else:
                out.append((rel, "file", mode == b"100755", data))
    return sorted(out)


def stage_one(clone, repo="acme/app"):
    state = w.new_state()
    config = w.write_config([repo])
    r = w.stage(state, config, [(repo, clone)])
    return state, config, r


def seed_objects(state, repo="acme/app"):
    """Every object id and type in the seed's store, as git lists them."""
    r = subprocess.run(["git", "-c", "safe.directory=*", "-C", w.seed_dir(state, repo), "cat-file",
                        "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"],
                       capture_output=True, text=True, env=w.git_env)
    return set(r.stdout.split("\n")) - {""} if r.returncode == 0 else set()


def digest(state):
    return w.staged(state)["seeds"][0]["digest"]


def seeds_left(state):
    seeds = os.path.join(state, "seeds")
    return os.listdir(seeds) if os.path.isdir(seeds) else []


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def one_clean_line(text):
    return text.endswith("\n") and text.count("\n") == 1 and all(c >= " " for c in text[:-1])


def plumb_commit(clone, root_entries):
    """Points main at a commit whose tree git plumbing builds from nested
    entries: {name: bytes} is a file, {name: dict} a directory.  No working
    tree is involved, so paths of any length and hostile names are fine."""
    def build(entries):
        lines = []
        for name, value in entries.items():
            if isinstance(value, dict):
                lines.append(b"040000 tree " + build(value).encode() + b"\t" + name.encode())
            else:
                oid = git(clone, "hash-object", "-w", "--stdin", stdin=value, binary=True).strip()
                lines.append(b"100644 blob " + oid + b"\t" + name.encode())
        return git(clone, "mktree", "-z", stdin=b"\0".join(lines) + b"\0", binary=True).decode().strip()

    commit = git(clone, "commit-tree", build(root_entries), "-m", "plumbed")
    git(clone, "update-ref", "refs/heads/main", commit)
    return commit


def nested(components, leaf, data):
    entries = {leaf: data}
    for name in reversed(components):
        entries = {name: entries}
    return entries


try:
    # ---- the working tree never reaches the seed -----------------------------
    clone = w.make_clone("kinds", {"README.md": b"COMMITTED-MARKER\n", ".gitignore": b"secret.env\n",
                                   "notes.txt": b"HISTORY-MARKER-77 only in the first commit\n"})
    with open(os.path.join(clone, "notes.txt"), "w") as f:
        f.write("notes, rewritten\n")
    os.symlink("README.md", os.path.join(clone, "readme-link"))
    os.makedirs(os.path.join(clone, "bin"))
    with open(os.path.join(clone, "bin/run"), "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(os.path.join(clone, "bin/run"), 0o755)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "second")

    state, config, r = stage_one(clone)
    tap.ok(r.returncode == 0, "a clean clone stages", r.stderr)
    clean_digest = digest(state)
    seed = w.seed_dir(state, "acme/app")
    tap.ok(seed_tree(seed) == commit_tree(clone),
           "the seed's tree is exactly HEAD's: names, directories, exec bits, symlink targets, bytes")
    fsck = subprocess.run(["git", "-c", "safe.directory=*", "-C", seed, "fsck", "--strict", "--unreachable",
                           "--no-progress"], capture_output=True, text=True, env=w.git_env)
    tap.ok(fsck.returncode == 0 and fsck.stdout.strip() == "",
           "the seed's .git is a sound repository holding no unreachable object (git fsck --strict --unreachable)",
           fsck.stdout + fsck.stderr)
    status = subprocess.run(["git", "-c", "safe.directory=*", "-C", seed, "status", "--porcelain"],
                            capture_output=True, text=True, env=w.git_env)
    tap.ok(status.returncode == 0 and status.stdout == "",
           "git status in the seed is clean: its fresh index matches the commit", status.stdout + status.stderr)
    tap.ok(w.probe(state, config, "acme/app", deep_finder(["COMMITTED-MARKER"])) == YES,
           "control: a probe finds the committed file")
    tap.ok(w.probe(state, config, "acme/app", deep_finder(["HISTORY-MARKER-77"])) == YES,
           "control: the deep finder digs a file that only history holds out of the object store")

    # Each kind of uncommitted content in turn, cumulatively: the probe finds
    # none of it, and the seed digests as the clean clone did.
    def stash_edit():
        with open(os.path.join(clone, "README.md"), "a") as f:
            f.write("STASH-CANARY-15\n")
        git(clone, "stash", "-q")

    def edit():
        with open(os.path.join(clone, "README.md"), "a") as f:
            f.write("EDIT-CANARY-11\n")

    def untracked():
        with open(os.path.join(clone, "untracked.txt"), "w") as f:
            f.write("UNTRACKED-CANARY-12\n")

    def ignored():
        with open(os.path.join(clone, "secret.env"), "w") as f:
            f.write("TOKEN=SECRET-ENV-CANARY-13\n")

    def index_only():
        with open(os.path.join(clone, "staged.txt"), "w") as f:
            f.write("INDEX-CANARY-14\n")
        git(clone, "add", "staged.txt")

    kinds = [
        ("a stashed edit (refs/stash and its objects)", stash_edit, ["STASH-CANARY-15"]),
        ("an uncommitted edit to a tracked file", edit, ["EDIT-CANARY-11"]),
        ("an untracked file", untracked, ["UNTRACKED-CANARY-12", "untracked.txt"]),
        ("an ignored secret.env", ignored, ["SECRET-ENV-CANARY-13"]),
        ("a file added to the index but never committed", index_only, ["INDEX-CANARY-14", "staged.txt"]),
    ]
    for description, make, needles in kinds:
        make()
        state, config, r = stage_one(clone)
        if not tap.ok(r.returncode == 0, f"{description}: the clone still stages", r.stderr):
            continue
        answer = w.probe(state, config, "acme/app", deep_finder(needles))
        tap.ok(answer == NO, f"{description}: a probe searching the checkout and every object finds none of it",
               answer)
        tap.ok(digest(state) == clean_digest,
               f"{description}: the seed digests exactly as the clean clone's did", (digest(state), clean_digest))
    tap.ok(seed_tree(w.seed_dir(state, "acme/app")) == commit_tree(clone),
           "with every kind present at once, the seed's tree is still exactly HEAD's")

    # ---- packed clones: deltas read as the loose objects did ------------------
    packed = w.make_clone("packed", {"data.txt": b"".join(b"line %d\n" % i for i in range(2000))})
    for n in range(1, 5):
        with open(os.path.join(packed, "data.txt"), "ab") as f:
            f.write(b"PACKED-MARKER-%d\n" % n)
        git(packed, "commit", "-q", "-a", "-m", f"grow {n}")
    git(packed, "tag", "-a", "v1", "-m", "a tag")
    git(packed, "branch", "feature/side", "HEAD~2")
    state_loose, config, r = stage_one(packed)
    tap.ok(r.returncode == 0, "a clone with loose objects stages", r.stderr)
    loose_tree = seed_tree(w.seed_dir(state_loose, "acme/app"))
    git(packed, "gc", "-q", "--aggressive", "--prune=now")
    verify = subprocess.run("git verify-pack -v .git/objects/pack/*.idx", shell=True, cwd=packed,
                            capture_output=True, text=True, env=w.git_env)
    deltas = [ln for ln in verify.stdout.splitlines() if ln.startswith("chain length")]
    loose_left = [d for d in os.listdir(os.path.join(packed, ".git/objects")) if len(d) == 2]
    tap.ok(deltas and not loose_left and os.path.exists(os.path.join(packed, ".git/packed-refs")),
           "git gc packed every object, with delta chains, and packed the refs", verify.stdout[-400:])
    state_packed, config, r = stage_one(packed)
    tap.ok(r.returncode == 0, "the packed clone stages", r.stderr)
    tap.ok(seed_tree(w.seed_dir(state_packed, "acme/app")) == loose_tree == commit_tree(packed),
           "the packed clone stages the same tree as the unpacked one, and it is HEAD's")
    # The seed's pack reuses the clone's entries (docs/staging.md, "The object
    # store"), so its bytes follow how the clone packed them; what it holds
    # does not.
    tap.ok(seed_objects(state_packed) == seed_objects(state_loose) != set(),
           "packed or loose, the seed holds exactly the same objects")
    seed_verify = subprocess.run(
        "git -c safe.directory='*' verify-pack -v .git/objects/pack/*.idx", shell=True,
        cwd=w.seed_dir(state_packed, "acme/app"), capture_output=True, text=True, env=w.git_env)
    tap.ok(seed_verify.returncode == 0
           and any(ln.startswith("chain length") for ln in seed_verify.stdout.splitlines()),
           "the packed clone's seed keeps its deltas, and git verifies the pack", seed_verify.stdout[-400:])
    state_again, config, r = stage_one(packed)
    tap.ok(r.returncode == 0 and digest(state_again) == digest(state_packed),
           "the same packed clone staged again digests the same, .git and all", r.stderr)
    tap.ok(w.probe(state_packed, config, "acme/app", deep_finder(["PACKED-MARKER-4"])) == YES,
           "a probe reads the newest content of the packed clone")

    # ---- the clone's pack entries are reused, and each is checked by hash -----
    def copy_clone(name):
        dst = os.path.join(w.work, "clones", name)
        subprocess.run(["cp", "-a", packed, dst], check=True)
        return dst

    def leaf_entries(clone):
        """(id, offset, size in pack) of the history's blobs that no other entry
        rests on and that HEAD's tree does not hold: only the pack writer reads
        them, never the tree writer."""
        out = subprocess.run("git verify-pack -v .git/objects/pack/*.idx", shell=True, cwd=clone,
                             capture_output=True, text=True, env=w.git_env, check=True).stdout
        rows = [ln.split() for ln in out.splitlines() if len(ln.split()) >= 5 and len(ln.split()[0]) == 40]
        bases = {r[6] for r in rows if len(r) >= 7}
        head_blob = git(clone, "rev-parse", "HEAD:data.txt")
        return [(r[0], int(r[4]), int(r[3])) for r in rows
                if r[1] == "blob" and r[0] not in bases and r[0] != head_blob]

    def refused_by_check(clone, what):
        state, config, r = stage_one(clone)
        tap.ok(r.returncode == 1 and "acme/app" in r.stderr and "clone's pack" in r.stderr
               and one_clean_line(r.stderr),
               f"{what}: refused, one line naming the repository and the clone's pack", r.stderr)
        tap.ok(seeds_left(state) == [] and not os.path.exists(os.path.join(state, "staged.json")),
               f"{what}: nothing is staged", seeds_left(state))

    leaves = leaf_entries(packed)
    if tap.ok(len(leaves) >= 2, "the packed history has two blobs only the pack writer reads", leaves):
        corrupt = copy_clone("corrupt-entry")
        (pack_path,) = [os.path.join(corrupt, ".git/objects/pack", f)
                        for f in os.listdir(os.path.join(corrupt, ".git/objects/pack")) if f.endswith(".pack")]
        oid, offset, size = leaves[0]
        os.chmod(pack_path, 0o644)
        with open(pack_path, "r+b") as f:
            f.seek(offset + size - 3)  # inside the zlib stream's checksum
            byte = f.read(1)
            f.seek(offset + size - 3)
            f.write(bytes([byte[0] ^ 0xFF]))
        refused_by_check(corrupt, "a history blob whose packed bytes were changed")

        lying = copy_clone("lying-index")
        (idx_path,) = [os.path.join(lying, ".git/objects/pack", f)
                       for f in os.listdir(os.path.join(lying, ".git/objects/pack")) if f.endswith(".idx")]
        shown = subprocess.run("git show-index < " + idx_path, shell=True, capture_output=True, text=True,
                               check=True).stdout.split("\n")
        ids = sorted(ln.split()[1] for ln in shown if ln.strip())
        a, b = ids.index(leaves[0][0]), ids.index(leaves[1][0])
        os.chmod(idx_path, 0o644)
        with open(idx_path, "r+b") as f:
            table = 8 + 256 * 4 + len(ids) * 24  # past the fanout, the ids and the CRCs
            f.seek(table + 4 * a)
            off_a = f.read(4)
            f.seek(table + 4 * b)
            off_b = f.read(4)
            f.seek(table + 4 * a)
            f.write(off_b)
            f.seek(table + 4 * b)
            f.write(off_a)
        refused_by_check(lying, "an index that places two history blobs at each other's entries")

    # An unreachable commit packed beside the reachable ones (a dropped stash
    # that `git repack --keep-unreachable` kept) is never copied.
    unreachable = copy_clone("packed-unreachable")
    with open(os.path.join(unreachable, "data.txt"), "ab") as f:
        f.write(b"PACKED-STASH-CANARY-16\n")
    git(unreachable, "stash", "-q")
    stash = git(unreachable, "rev-parse", "refs/stash")
    git(unreachable, "stash", "drop", "-q")
    git(unreachable, "repack", "-q", "-a", "-d", "-f", "--keep-unreachable")
    in_pack = subprocess.run("git verify-pack -v .git/objects/pack/*.idx", shell=True, cwd=unreachable,
                             capture_output=True, text=True, env=w.git_env).stdout
    tap.ok(stash in in_pack, "control: the clone's one pack holds the dropped stash's commit")
    state, config, r = stage_one(unreachable)
    tap.ok(r.returncode == 0, "the clone with an unreachable packed stash stages", r.stderr)
    if r.returncode == 0:
        tap.ok(not any(line.startswith(stash) for line in seed_objects(state))
               and seed_objects(state) == seed_objects(state_packed),
               "the seed holds the reachable objects only: not the stash's commit")
        tap.ok(w.probe(state, config, "acme/app", deep_finder(["PACKED-STASH-CANARY-16"])) == NO,
               "a probe searching the checkout and every object finds nothing of the stash")

    # ---- shallow clones stop at their boundary -------------------------------
    shallow = os.path.join(w.work, "clones", "shallow")
    git(w.work, "clone", "-q", "--depth", "1", "--no-local", "file://" + packed, shallow)
    state, config, r = stage_one(shallow)
    tap.ok(r.returncode == 0, "a shallow clone (--depth 1) stages", r.stderr)
    if r.returncode == 0:
        seed = w.seed_dir(state, "acme/app")
        log = subprocess.run(["git", "-c", "safe.directory=*", "-C", seed, "log", "--format=%H"],
                             capture_output=True, text=True, env=w.git_env)
        tap.ok(os.path.exists(os.path.join(seed, ".git/shallow")) and log.returncode == 0
               and log.stdout.split() == [git(shallow, "rev-parse", "HEAD")],
               "the shallow seed keeps its boundary: one commit, and git can read it", log.stdout + log.stderr)

    # ---- paths up to the limit; forged and hostile trees ----------------------
    long_clone = w.make_clone("long", {"README.md": b"long\n"})
    dirs = ["d%02d" % i + "a" * 196 for i in range(19)]  # 19 * (199 + 1) bytes
    leaf = "f" * 200
    long_path = "/".join(dirs + [leaf])
    plumb_commit(long_clone, {"README.md": b"long\n", **nested(dirs, leaf, b"LONG-PATH-MARKER\n")})
    state, config, r = stage_one(long_clone)
    tap.ok(len(long_path) == 4000 and r.returncode == 0, "a commit holding a 4,000-byte path stages", r.stderr)
    if r.returncode == 0:
        answer = w.probe(state, config, "acme/app", f"""import json
with open("/probe/repo/{long_path}") as f:
    ok = f.read() == "LONG-PATH-MARKER\\n"
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if ok else "NO"}}, f)
""")
        tap.ok(answer == YES, "a probe reads the file at the 4,000-byte path", answer)

    hostile = "evil\n\x1b[2J" + "h" * 180
    over = w.make_clone("over", {"README.md": b"over\n"})
    plumb_commit(over, nested([hostile] + dirs + ["e" * 200], leaf, b"x\n"))
    state, config, r = stage_one(over)
    tap.ok(r.returncode == 1 and f"longer than {TREE_PATH_MAX - 1} bytes" in r.stderr and r.stdout == ""
           and one_clean_line(r.stderr) and "evil\\x0a\\x1b[2J" in r.stderr,
           "a path over the limit is refused in one line that quotes the hostile name (no raw newline or ESC)",
           repr(r.stderr))
    tap.ok(seeds_left(state) == [] and not os.path.exists(os.path.join(state, "staged.json")),
           "the refused stage leaves nothing under STATE/seeds", seeds_left(state))
    u = w.unstage(state)
    tap.ok(u.returncode == 0, "unstage after the refused stage exits 0", u.stderr)

    clone_f = w.make_clone("forged.git", {"README.md": b"f\n"})
    plumb_commit(clone_f, {"README.md": b"f\n", ".GIT": {"config": b"[core]\n\tfsmonitor = evil\n"}})
    state, config, r = stage_one(clone_f)
    tap.ok(r.returncode == 1 and "`.GIT`" in r.stderr and seeds_left(state) == [],
           "a commit whose tree holds `.GIT` is refused, naming it, leaving nothing", r.stderr)
    # A top-level `.gitmodules` is the commit's like any file under the
    # default submodule policy (omit), and refused under reject.
    clone_m = w.make_clone("forged.gitmodules", {"README.md": b"f\n"})
    plumb_commit(clone_m, {"README.md": b"f\n", ".gitmodules": b"[submodule \"x\"]\n"})
    state, config, r = stage_one(clone_m)
    tap.ok(r.returncode == 0 and w.staged(state)["seeds"][0]["omitted_submodules"] == []
           and seed_tree(w.seed_dir(state, "acme/app")) == commit_tree(clone_m),
           "a commit holding a top-level `.gitmodules` and no gitlink stages as it is, omitting nothing", r.stderr)
    state = w.new_state()
    r = w.stage(state, w.write_config(["acme/app"], submodules={"reject": ["acme/app"]}), [("acme/app", clone_m)])
    tap.ok(r.returncode == 1 and "`.gitmodules` is present" in r.stderr and seeds_left(state) == [],
           "... and is refused under the reject policy, naming it, leaving nothing", r.stderr)

    # ---- sizes before bytes ---------------------------------------------------
    sparse = w.make_clone("sparse", {"README.md": b"sparse\n"})
    with open(os.path.join(sparse, "huge.bin"), "wb") as f:
        f.truncate(20 << 30)
    before, t0 = free_bytes(w.work), time.monotonic()
    state, config, r = stage_one(sparse)
    elapsed, used = time.monotonic() - t0, before - free_bytes(w.work)
    tap.ok(r.returncode == 0 and not os.path.exists(os.path.join(w.seed_dir(state, "acme/app"), "huge.bin")),
           "a 20 GB sparse file left uncommitted in the working tree is not staged at all", r.stderr)
    tap.ok(elapsed < 10 and used < (64 << 20),
           f"... and costs no time or disk ({elapsed:.2f} s, {used >> 20} MiB)", (elapsed, used))
    os.unlink(os.path.join(sparse, "huge.bin"))
    with open(os.path.join(sparse, ".git/huge.bin"), "wb") as f:
        f.truncate(20 << 30)
    before, t0 = free_bytes(w.work), time.monotonic()
    state, config, r = stage_one(sparse)
    elapsed, used = time.monotonic() - t0, before - free_bytes(w.work)
    tap.ok(r.returncode == 1 and "huge.bin" in r.stderr and seeds_left(state) == [],
           "a 20 GB sparse file in .git is refused, naming it, leaving nothing", r.stderr)
    tap.ok(elapsed < 5 and used < (64 << 20),
           f"... at once, before a byte is written ({elapsed:.2f} s, {used >> 20} MiB of disk)", (elapsed, used))
finally:
    w.close()
tap.finish()
