"""The submodule policy (docs/staging.md, "Submodules") on a clone with real
submodules, made by `git submodule add` from a local repository: under
`omit` (the default) each gitlink is an empty directory, `.gitmodules` is
there as committed, and the omitted paths are recorded in staged.json, the
audit log (a count), status and nowhere the agent reads but as a rule (the
skill text); nothing of the submodule's own repository is read, so canaries
in its objects, its checkout and `.git/modules` appear nowhere under the
state directory nor in any output.  Under `reject`: refused, naming the
gitlink, nothing staged.  A GitHub seed's tarball is covered too: its
submodules are not recorded, and `reject` goes by `.gitmodules`.  Each canary
check has a control that finds the canary where it really is.

Staging is the same on every backend; the probe that fills the audit log runs
on the first one (runc)."""

import json
import os
import subprocess
import sys
import uuid
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test("openssl")
from sp_github_fake import FakeGitHub, tarball  # noqa: E402

tap = Tap()
work = S.Work("sp-submodules-")
nonce = uuid.uuid4().hex[:12]
# In the submodule's files, hence its objects and its checkout.
SUB_CANARY = f"SUBMODULE-CANARY-{nonce}"
# Planted as a plain file in the clone's .git/modules/lib, beside the
# submodule's repository.
MODULES_CANARY = f"MODULES-DIR-CANARY-{nonce}"
CANARIES = [SUB_CANARY, MODULES_CANARY]
APP = "acme/app"
# A gitlink whose name holds an escape sequence: shown only quoted.
HOSTILE = "evil\x1b[2Jdir"
HOSTILE_QUOTED = "evil\\x1b[2Jdir"
OMITTED = ["evil\\x1b[2Jdir", "lib", "vendor/sha1"]  # tree order, as stage records them


def git(repo, *args, check=True):
    return subprocess.run(["git", "-C", repo, *args], check=check, capture_output=True, text=True,
                          env=work.git_env)


def zlib_streams(data):
    """Every zlib stream that starts somewhere in data, inflated (loose
    objects and pack entries, deltas' bases included)."""
    for i in range(len(data) - 1):
        if data[i] & 0x0F == 8 and ((data[i] << 8) | data[i + 1]) % 31 == 0:
            try:
                yield zlib.decompressobj().decompress(data[i:], 1 << 22)
            except zlib.error:
                pass


def canaries_under(top, deep=True):
    """[(path, canary)] for each canary in a name or file below top, raw or
    (deep) inside any zlib stream of a file; symlinks are not followed."""
    hits = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            hits += [(path, c) for c in CANARIES if c in path]
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            chunks = [data] + (list(zlib_streams(data)) if deep else [])
            hits += [(path, c) for c in CANARIES if any(c.encode() in chunk for chunk in chunks)]
    return sorted(set(hits))


def in_any(texts):
    return [c for c in CANARIES if any(c in t for t in texts)]


def proxy(*args):
    return subprocess.run([S.PROXY, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def nothing_staged(state):
    seeds = os.path.join(state, "seeds")
    return not os.path.exists(os.path.join(state, "staged.json")) and (
        not os.path.isdir(seeds) or os.listdir(seeds) == [])


outputs = []  # every output of every verb run here, for the canary check

try:
    # ---- the fixtures: a submodule's repository, and a superproject using it ----
    sub = os.path.join(work.dir, "sub")
    os.makedirs(sub)
    git(sub, "init", "-q", "-b", "main")
    with open(os.path.join(sub, "secret.txt"), "w") as f:
        f.write(f"{SUB_CANARY}\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", f"the submodule's own commit {SUB_CANARY}")

    app = work.make_clone("app", {"README.md": b"the superproject\n", "src/main.py": b"print('app')\n"})
    for path in ("lib", "vendor/sha1"):
        git(app, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, path)
    # A third gitlink, plumbed: its name holds ESC, which no `submodule add`
    # path would, and its commit is the same one.
    sub_head = git(sub, "rev-parse", "HEAD").stdout.strip()
    git(app, "update-index", "--add", "--cacheinfo", f"160000,{sub_head},{HOSTILE}")
    git(app, "commit", "-q", "-m", "three submodules")
    with open(os.path.join(app, ".git/modules/lib/info/canary"), "w") as f:
        f.write(f"{MODULES_CANARY}\n")
    gitmodules = git(app, "show", "HEAD:.gitmodules").stdout.encode()
    head = git(app, "rev-parse", "HEAD").stdout.strip()

    # The controls: the canaries are where they were planted, and the check
    # that must find nothing below finds them there.
    clone_hits = canaries_under(app)
    tap.ok(any(c == SUB_CANARY and "/.git/modules/lib/objects/" in p for p, c in clone_hits)
           and any(c == SUB_CANARY and p.endswith("/lib/secret.txt") for p, c in clone_hits)
           and any(c == MODULES_CANARY and "/.git/modules/lib/" in p for p, c in clone_hits),
           "control: the canary check finds the submodule's canary in its objects (inside zlib streams) and its "
           "checkout, and the planted one in .git/modules, all in the clone", clone_hits)
    tap.ok(os.path.isdir(os.path.join(app, ".git/modules/lib")) and b"vendor/sha1" in gitmodules,
           "the clone holds the submodules' repositories in .git/modules and commits .gitmodules", gitmodules)

    # ---- omit, the default: the config says nothing of submodules ----------
    config = work.write_config([APP])
    state = work.new_state()
    r = work.stage(state, config, [(APP, app)])
    outputs += [r.stdout, r.stderr]
    tap.ok(r.returncode == 0 and r.stderr == "", "omit (the default): a clone with submodules stages", r.stderr)
    if r.returncode != 0:
        raise SystemExit
    seed = S.seed_dir(state, APP)
    record = S.seed_record(state, APP)
    empty = {p: os.path.isdir(os.path.join(seed, p)) and not os.path.islink(os.path.join(seed, p))
             and os.listdir(os.path.join(seed, p)) == [] for p in ("lib", "vendor/sha1", HOSTILE)}
    tap.ok(all(empty.values()), "each gitlink path is an empty directory in the seed", empty)
    with open(os.path.join(seed, ".gitmodules"), "rb") as f:
        tap.ok(f.read() == gitmodules, ".gitmodules is in the seed exactly as the commit holds it")
    tap.ok(record["commit"] == head and not os.path.exists(os.path.join(seed, ".git/modules")),
           "the seed is the superproject's commit, and its .git has no modules/", record)
    tap.ok(record.get("omitted_submodules") == OMITTED and S.staged(state)["version"] == 3,
           "staged.json (version 3) records the omitted paths, quoted, in tree order", record)
    st = subprocess.run(["git", "-c", "safe.directory=*", "-C", seed, "status", "--porcelain"], capture_output=True,
                        text=True, env=work.git_env)
    tap.ok(st.returncode == 0 and st.stdout == "", "git status in the seed is clean: the index holds the gitlinks",
           st.stdout + st.stderr)
    hits = canaries_under(state)
    tap.ok(hits == [], "canary: nothing of the submodule's repository, objects, checkout or .git/modules is "
                       "anywhere under the state directory (names, bytes, zlib streams)", hits)

    # ---- what the operator sees: status ----------------------------------
    human = proxy("status", "--state", state)
    as_json = proxy("status", "--state", state, "--json")
    outputs += [human.stdout, human.stderr, as_json.stdout, as_json.stderr]
    line = next((ln for ln in human.stdout.splitlines() if ln.startswith("submodules")), "")
    tap.ok(human.returncode == 0 and APP in line and "3 omitted, empty directories in the seed:" in line
           and f"`{HOSTILE_QUOTED}`, `lib`, `vendor/sha1`" in line and "\x1b" not in human.stdout,
           "status names the omitted paths, the hostile one quoted (no raw ESC)", human.stdout + human.stderr)
    doc = json.loads(as_json.stdout) if as_json.returncode == 0 else {}
    seeds = [{k: x[k] for k in ("repo", "source", "omitted_submodules")} for x in doc.get("staged", {}).get("seeds", [])]
    tap.ok(seeds == [{"repo": APP, "source": "local", "omitted_submodules": OMITTED}],
           "status --json gives the seed's omitted paths", as_json.stdout + as_json.stderr)

    # ---- what the agent sees: the skill, and a probe --------------------------
    skill = proxy("skill", "--config", config)
    outputs += [skill.stdout, skill.stderr]
    tap.ok(skill.returncode == 0 and "Submodules are not included" in skill.stdout
           and "is there but empty" in skill.stdout
           and not any(p in skill.stdout for p in ("vendor/sha1", "evil", "`lib`")),
           "the skill says a submodule's directory is empty, and names no path (repository content)",
           skill.stdout[-600:] + skill.stderr)
    probe = f"""import json, os, zlib
paths = {["lib", "vendor/sha1", HOSTILE]!r}
empty = all(os.path.isdir(p) and os.listdir(p) == [] for p in paths)
found = False
for dirpath, dirnames, filenames in os.walk("."):
    for name in filenames:
        data = open(os.path.join(dirpath, name), "rb").read()
        for i in range(len(data) - 1):
            if data[i] & 0x0F == 8 and ((data[i] << 8) | data[i + 1]) % 31 == 0:
                try:
                    data += zlib.decompressobj().decompress(data[i:], 1 << 22)
                except zlib.error:
                    pass
        found = found or {SUB_CANARY.encode()!r} in data or {MODULES_CANARY.encode()!r} in data
result = "YES" if empty and not found and open(".gitmodules").read().count("[submodule") == 2 else "NO"
json.dump({{"result": result}}, open("/probe/out", "w"))
"""
    with S.serving(work, config, state) as srv:
        got = srv.probe(probe, APP)
        outputs += [got, srv.stderr(), srv.stdout()]
    tap.ok(got == S.answer("YES"), "a probe sees the gitlink paths empty, .gitmodules as committed, and no canary "
                                   "in any file or zlib stream of its copy", got)
    recs = S.audit_lines(state, admissions=True)
    tap.ok(len(recs) == 2 and all(rec["seed_omitted_submodules"] == 3 and not S.audit_key_problems(rec)
                                  for rec in recs),
           "the audit log's admission and result records give the seed's omitted submodules as a count (3)", recs)
    audit_text = S.audit_raw(state)
    tap.ok(not any(p in audit_text for p in (b"vendor/sha1", b"evil")),
           "the audit log holds no omitted path, only the count", audit_text[-400:])
    human = proxy("status", "--state", state)
    outputs += [human.stdout, human.stderr]
    hits = canaries_under(state)
    tap.ok(hits == [] and human.returncode == 0,
           "canary: after serving, still nothing of the submodule under the state directory", hits)

    # ---- reject: refused, naming the gitlink, nothing staged --------------------
    reject_config = work.write_config([APP], submodules={"reject": [APP]})
    state = work.new_state()
    r = work.stage(state, reject_config, [(APP, app)])
    outputs += [r.stdout, r.stderr]
    tap.ok(r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1
           and f"`{HOSTILE_QUOTED}` is a submodule (a gitlink): refused, as sealedProbes.submodules.reject lists "
               "this repository" in r.stderr and "\x1b" not in r.stderr,
           "reject: the clone is refused in one line naming the first gitlink, quoted", repr(r.stderr))
    tap.ok(nothing_staged(state) and canaries_under(state) == [],
           "reject: nothing is staged, and nothing of the submodule is left under the state directory",
           os.listdir(state) if os.path.isdir(state) else None)
    plain = work.make_clone("plain", {"README.md": b"no submodules\n"})
    r = work.stage(work.new_state(), work.write_config(["acme/plain"], submodules={"reject": ["acme/plain"]}),
                   [("acme/plain", plain)])
    tap.ok(r.returncode == 0, "reject: a clone without submodules stages (reject refuses submodules, not clones)",
           r.stderr)
    # Once the gitlinks are gone (a commit removes them), reject still goes
    # by what declares or holds one: `.gitmodules`, then `.git/modules`.
    git(app, "rm", "-q", "--cached", "lib", "vendor/sha1", HOSTILE)
    git(app, "commit", "-q", "-m", "no more gitlinks")
    r = work.stage(work.new_state(), reject_config, [(APP, app)])
    outputs += [r.stdout, r.stderr]
    tap.ok(r.returncode == 1 and "`.gitmodules` is present: the commit declares submodules" in r.stderr,
           "reject: a commit still holding .gitmodules is refused, naming it", r.stderr)
    git(app, "rm", "-q", "--cached", ".gitmodules")
    git(app, "commit", "-q", "-m", "no more .gitmodules")
    r = work.stage(work.new_state(), reject_config, [(APP, app)])
    outputs += [r.stdout, r.stderr]
    tap.ok(r.returncode == 1 and "`.git/modules` is present: the clone holds a submodule's repository" in r.stderr,
           "reject: a clone still holding .git/modules is refused, naming it", r.stderr)
    state = work.new_state()
    r = work.stage(state, config, [(APP, app)])
    outputs += [r.stdout, r.stderr]
    tap.ok(r.returncode == 0 and S.seed_record(state, APP).get("omitted_submodules") == []
           and canaries_under(state) == [],
           "omit: the same clone stages, omitting nothing, and .git/modules still never reaches the seed", r.stderr)

    # ---- a GitHub seed: not recorded; reject goes by .gitmodules ---------------
    commit = "0123456789abcdef0123456789abcdef01234567"
    remote_files = {"README.md": b"remote\n", ".gitmodules": b'[submodule "lib"]\n\tpath = lib\n\turl = ../lib\n'}
    fake = FakeGitHub(work.dir, {"acme/remote": (commit, tarball("acme-remote-0123456", remote_files))},
                      token="ghp_unused")
    try:
        def stage_remote(cfg):
            state = work.new_state()
            argv = [S.PROXY, "stage", "--config", cfg, "--state", state, "--github-api", fake.api_base,
                    "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
            res = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                                 env={"PATH": os.environ["PATH"], "GH_TOKEN": "ghp_unused"})
            outputs.extend([res.stdout, res.stderr])
            return state, res

        state, r = stage_remote(work.write_config(["acme/remote"]))
        tap.ok(r.returncode == 0 and S.seed_record(state, "acme/remote").get("omitted_submodules") is None,
               "omit: a GitHub seed stages, its omitted submodules not recorded (null: the tarball does not mark them)",
               r.stderr)
        human = proxy("status", "--state", state)
        tap.ok("not recorded (a GitHub seed" in human.stdout, "status says a GitHub seed's submodules are not recorded",
               human.stdout)
        state, r = stage_remote(work.write_config(["acme/remote"], submodules={"reject": ["acme/remote"]}))
        tap.ok(r.returncode == 1 and "`.gitmodules` is present: the repository declares submodules" in r.stderr
               and nothing_staged(state), "reject: a GitHub seed with .gitmodules is refused, naming it, nothing staged",
               r.stderr)
    finally:
        fake.close()

    # ---- no output of any verb held a canary --------------------------------
    leaked = in_any(outputs)
    with open(os.path.join(sub, "secret.txt")) as f:
        control = in_any([f.read()])
    tap.ok(not leaked and control == [SUB_CANARY],
           "canary: no output of stage, status, skill, serve or the client holds one (control: the submodule's "
           "file does)", leaked)
finally:
    work.close()
tap.finish()
