"""Staging end to end: `sealed-probe-proxy stage` on local clones with hostile
content and on a fake GitHub over real HTTPS on loopback, then probes under
the test's backend (runc, runsc) against bundles made from the staged seeds
(docs/staging.md)."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, cached_rootfs, env_path, require_root_and  # noqa: E402

PROXY = env_path("SP_PROXY")
B = backend()
require_root_and("git", "openssl")
from sp_github_fake import FakeGitHub, tarball  # noqa: E402

ROOTFS = cached_rootfs()
from sp_stage import NO, YES, StageWork, finder  # noqa: E402

tap = Tap()
w = StageWork(PROXY, ROOTFS, "sp-stage-test-")
work, states = w.work, w.states
git, make_clone, write_config, new_state = w.git, w.make_clone, w.write_config, w.new_state
stage, staged, seed_dir, probe = w.stage, w.staged, w.seed_dir, w.probe

try:
    # ---- sanitized local clones: the seed then passes the isolation probes ----
    hooks = make_clone("hooks", {"README.md": b"hooks fixture\n"})
    with open(os.path.join(hooks, ".git/hooks/post-checkout"), "w") as f:
        f.write("#!/bin/sh\necho HOOK-CANARY-91\n")
    os.chmod(os.path.join(hooks, ".git/hooks/post-checkout"), 0o755)

    creds = make_clone("creds", {"README.md": b"creds fixture\n"})
    git(creds, "config", "remote.origin.url", "https://user:ghp_CONFIGCANARY0000@github.com/acme/creds.git")
    git(creds, "config", "url.https://evil.invalid/.insteadOf", "https://github.com/")
    git(creds, "config", "credential.helper", "store --file /root/.git-credentials")
    git(creds, "config", "core.hooksPath", "/tmp/HOOKSPATH-CANARY")

    fsmonitor = make_clone("fsmonitor", {"README.md": b"a plain fixture\n"})
    git(fsmonitor, "config", "core.fsmonitor", "/tmp/FSMONITOR-CANARY.sh")

    state = new_state()
    links = make_clone("links", {"README.md": b"links fixture\n"})
    os.symlink("/etc/passwd", os.path.join(links, "passwd-link"))
    os.symlink("../3", os.path.join(links, "sibling-relative"))
    os.symlink(os.path.join(state, "seeds"), os.path.join(links, "seeds-absolute"))
    git(links, "add", "-A")
    git(links, "commit", "-q", "-m", "links")
    sibling = make_clone("sibling", {"SECRET.txt": b"SIBLING-MARKER-55\n"})

    # links is index 2 and sibling index 3: on the host, links' relative link
    # reaches the sibling seed, and its absolute one every seed of the state.
    config = write_config(["acme/hooks", "acme/creds", "acme/links", "acme/sibling", "acme/fsmonitor"])
    catalog = os.path.join(work, "catalog.txt")
    with open(catalog, "w") as f:
        f.write(f"# local clones, one per line\n\nacme/sibling={sibling}\nacme/fsmonitor={fsmonitor}\n")
    r = stage(state, config, [("acme/hooks", hooks), ("acme/creds", creds), ("acme/links", links)],
              extra=["--catalog", catalog])
    tap.ok(r.returncode == 0 and r.stderr == "",
           "stage makes seeds of five local clones, named by --clone flags and a --catalog file", r.stderr)
    if r.returncode != 0:
        raise SystemExit
    record = staged(state)
    tap.ok(len(record["seeds"]) == 5 and all(s["source"] == "local" and len(s["commit"]) == 40
                                              for s in record["seeds"]),
           "staged.json records each seed's source and commit", record)
    tap.ok(record["seeds"][0]["commit"] == git(hooks, "rev-parse", "HEAD"),
           "the recorded commit is the clone's HEAD, read without git")
    st = os.stat(os.path.join(state, "staged.json"))
    tap.ok(st.st_mode & 0o777 == 0o600 and os.stat(state).st_mode & 0o777 == 0o700,
           "staged.json is 0600 in a 0700 state directory")

    tap.ok(probe(state, config, "acme/hooks", finder(["HOOK-CANARY-91"], extra="""
hooks = "/probe/repo/.git/hooks"
found += os.listdir(hooks) if os.path.isdir(hooks) else []""")) == NO,
           "hooks: removed; a probe looking for the hook answers NO")
    tap.ok(probe(state, config, "acme/creds",
                 finder(["ghp_CONFIGCANARY0000", "insteadOf", "evil.invalid", "credential", "HOOKSPATH-CANARY",
                         "hooksPath", "[remote"])) == NO,
           "config with credentials, insteadOf, a credential helper and hooksPath: stripped; "
           "a probe looking for any of them answers NO")
    tap.ok(probe(state, config, "acme/fsmonitor", finder(["FSMONITOR-CANARY", "fsmonitor"])) == NO,
           "fsmonitor: stripped; a probe looking for it answers NO")
    tap.ok(probe(state, config, "acme/links", finder(["root:x:0:0"])) == NO,
           "a symlink to /etc/passwd: kept as a link; a probe following it reads nothing of the host's")
    tap.ok(probe(state, config, "acme/links", finder(["SIBLING-MARKER-55"])) == NO,
           "a symlink to a sibling seed: a probe following it reaches nothing of the sibling")
    tap.ok(probe(state, config, "acme/sibling", finder(["SIBLING-MARKER-55"])) == YES,
           "control: the same probe answers YES where the marker really is")
    link = os.path.join(seed_dir(state, "acme/links"), "passwd-link")
    tap.ok(os.path.islink(link) and os.readlink(link) == "/etc/passwd", "the seed keeps the symlink as a symlink")

    # ---- rejected local clones: a precise error, and nothing left behind ----
    def rejected(name, clone, needle, description, **extra):
        s = new_state()
        cfg = write_config([f"acme/{name}"], **extra)
        res = stage(s, cfg, [(f"acme/{name}", clone)])
        seeds = os.path.join(s, "seeds")
        leftovers = os.listdir(seeds) if os.path.isdir(seeds) else []
        tap.ok(res.returncode == 1 and needle in res.stderr and res.stdout == "" and not leftovers
               and not os.path.exists(os.path.join(s, "staged.json")),
               f"{description}: rejected, naming {needle!r}, leaving nothing", f"exit {res.returncode}: {res.stderr}")

    other = make_clone("other", {"x": b"other\n"})
    alternates = make_clone("alternates", {"README.md": b"a\n"})
    with open(os.path.join(alternates, ".git/objects/info/alternates"), "w") as f:
        f.write(os.path.join(other, ".git/objects") + "\n")
    rejected("alternates", alternates, "alternates", "alternates pointing at another repository")

    main = make_clone("wtmain", {"README.md": b"w\n"})
    worktree = os.path.join(work, "clones", "worktree")
    git(main, "worktree", "add", "-q", worktree)
    rejected("worktree", worktree, "gitdir", "a worktree whose .git is a `gitdir:` file")

    # Submodules are omitted by default; under the reject policy, what
    # declares one is refused (test_stage_submodules.py has real ones).
    sub = make_clone("submodule", {".gitmodules": b'[submodule "lib"]\n\tpath = lib\n\turl = ../other\n'})
    rejected("submodule", sub, "`.gitmodules` is present: the commit declares submodules",
             "a .gitmodules under the reject policy", submodules={"reject": ["acme/submodule"]})

    # Only `.git` is copied from a clone (the tree comes from the commit), so
    # these are planted there.
    fifo = make_clone("fifo", {"README.md": b"f\n"})
    os.mkfifo(os.path.join(fifo, ".git/pipe"))
    rejected("fifo", fifo, "FIFO", "a FIFO in the clone's .git")

    outside = os.path.join(work, "outside-secret")
    with open(outside, "w") as f:
        f.write("OUTSIDE-SECRET\n")
    hardlink = make_clone("hardlink", {"README.md": b"h\n"})
    os.link(outside, os.path.join(hardlink, ".git/linked"))
    rejected("hardlink", hardlink, "linked", "a hardlink in .git to a file outside the clone")

    # ---- the seed is immutable: 20 probes try to write to it ----------------
    clean = make_clone("clean", {"README.md": b"clean\n", "src/app.py": b"print('app')\n"})
    os.chmod(os.path.join(clean, "src/app.py"), 0o4775)
    git(clean, "commit", "-q", "-a", "-m", "executable")
    state = new_state()
    config = write_config(["acme/clean"])
    r = stage(state, config, [("acme/clean", clean)])
    tap.ok(r.returncode == 0, "stage a clean clone", r.stderr)
    seed = seed_dir(state, "acme/clean")

    # The seed policy: every entry the probe's, owner-writable modes, so that
    # an overlay snapshot is writable; immutability comes from the read-only
    # mount and the 0700 state directory, checked below.
    wrong_policy = []
    for dirpath, dirnames, filenames in os.walk(seed):
        for p in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            st = os.lstat(p)
            mode = st.st_mode & 0o7777
            if os.path.islink(p):
                ok = True
            elif os.path.isdir(p):
                ok = mode == 0o755
            else:
                ok = mode in (0o644, 0o755)
            if not ok or (st.st_uid, st.st_gid) != (65534, 65534) or st.st_mtime != 0:
                wrong_policy.append((os.path.relpath(p, seed), oct(mode), st.st_uid, st.st_gid, st.st_mtime))
    tap.ok(wrong_policy == [], "every seed entry is 65534:65534 with mtime 0, directories 0755, files 0644 or "
           "0755, no setuid, setgid or sticky", wrong_policy[:5])
    app = os.stat(os.path.join(seed, "src/app.py"))
    tap.ok(app.st_mode & 0o7777 == 0o755 and os.stat(os.path.join(seed, "README.md")).st_mode & 0o7777 == 0o644,
           "an executable (setuid in the clone) becomes 0755, a plain file 0644", oct(app.st_mode))
    run_dir = os.path.dirname(seed)
    rst = os.stat(run_dir)
    tap.ok((rst.st_uid, rst.st_gid) == (0, 0) and rst.st_mode & 0o7777 == 0o555
           and os.stat(state).st_uid == 0 and os.stat(state).st_mode & 0o777 == 0o700,
           "seeds/RUN stays root 0555 inside root's 0700 state directory", (oct(rst.st_mode), rst.st_uid))
    before = staged(state)["seeds"][0]["digest"]

    def tree_snapshot(top):
        out = []
        for dirpath, dirnames, filenames in os.walk(top):
            for n in sorted(dirnames + filenames):
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else b""
                out.append((os.path.relpath(p, top), st.st_mode, st.st_uid, data))
        return sorted(out)

    snapshot = tree_snapshot(seed)
    vandal = """import json, os, shutil
wrote = 0
for dirpath, dirnames, filenames in os.walk("/probe/repo", topdown=False):
    for n in filenames:
        p = os.path.join(dirpath, n)
        try:
            with open(p, "a") as f:
                f.write("VANDALISED")
            os.chmod(p, 0o777)
            wrote += 1
        except OSError:
            pass
with open("/probe/repo/NEW", "w") as f:
    f.write("new")
shutil.rmtree("/probe/repo/src", ignore_errors=True)
with open("/probe/out", "w") as f:
    json.dump({"result": "YES" if wrote else "NO"}, f)
"""
    answers = [probe(state, config, "acme/clean", vandal) for _ in range(20)]
    tap.ok(all(a == YES for a in answers), "20 probes each write to, chmod and delete from their copy",
           set(answers))
    tap.ok(tree_snapshot(seed) == snapshot and staged(state)["seeds"][0]["digest"] == before,
           "after 20 writing probes the seed is byte-identical and its recorded digest unchanged")
    r2 = probe(state, config, "acme/clean", finder(["VANDALISED"], extra="""
found += ["NEW"] if os.path.exists("/probe/repo/NEW") else []"""))
    tap.ok(r2 == NO, "the next probe's copy holds none of the earlier probes' writes (and the seed re-verifies)", r2)
    for who, uid in (("root", 0), ("uid 65534", 65534)):
        res = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3",
                              "-c", f"open({os.path.join(seed, 'README.md')!r}, 'a').write('x')"],
                             capture_output=True, text=True)
        tap.ok(res.returncode != 0 and ("Read-only file system" in res.stderr or "Permission denied" in res.stderr),
               f"on the host, {who} cannot write to the seed", res.stderr.strip()[-200:])
    res = subprocess.run(["findmnt", "-n", "-o", "OPTIONS", "--target", seed], capture_output=True, text=True)
    tap.ok("ro" in res.stdout.split(","), "the seed is on a read-only bind mount", res.stdout)
    # A record that no longer matches the tree is refused before any snapshot.
    record = staged(state)
    wrong = "sha256:" + "0" * 64
    record["seeds"][0]["digest"] = wrong
    with open(os.path.join(state, "staged.json"), "w") as f:
        json.dump(record, f)
    r3 = probe(state, config, "acme/clean", finder(["clean"]))
    tap.ok(r3.startswith("bundle failed") and "the seed changed" in r3 and wrong in r3 and before in r3,
           "a seed whose digest no longer matches staged.json is refused, naming both digests", r3)

    # ---- the GitHub source, over real HTTPS on loopback, and the canary ------
    canary = "ghp_STAGECANARY0123456789abcdefABCDEF0"
    commit = "0123456789abcdef0123456789abcdef01234567"
    fake = FakeGitHub(os.path.join(work), {
        "acme/remote": (commit, tarball("acme-remote-0123456", {"README.md": b"REMOTE-MARKER\n"}))},
        token=canary, delay=1.5)
    try:
        state = new_state()
        config = write_config(["acme/clean", "acme/remote"])
        argv = [PROXY, "stage", "--config", config, "--state", state, "--clone", f"acme/clean={clean}",
                "--github-api", fake.api_base, "--github-codeload", fake.codeload_host, "--github-ca", fake.ca]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env={"PATH": os.environ["PATH"], "GH_TOKEN": canary})
        seen = []
        # Once the first request arrives, staging is under way: look everywhere.
        for _ in range(200):
            if fake.requests or proc.poll() is not None:
                break
            time.sleep(0.05)
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            for part in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{pid}/{part}", "rb") as f:
                        if canary.encode() in f.read():
                            seen.append((pid, part))
                except OSError:
                    pass
        out, err = proc.communicate(timeout=120)
        tap.ok(proc.returncode == 0 and "acme/remote from github" in out, "stage makes a seed from the GitHub API",
               err)
        tap.ok(not seen, "canary: while staging, the token is in no process's argv or environment "
                         "(the stage process included)", seen)
        leaks = [os.path.join(d, n) for d, _, fs in os.walk(state) for n in fs
                 if canary.encode() in open(os.path.join(d, n), "rb").read()]
        tap.ok(not leaks and canary not in out + err,
               "canary: the token is in no file under the state and seed directories, and in no output", leaks)
        api_auth = [h.get("Authorization") for host, _, h in fake.requests if host == "api"]
        codeload = [(p, h) for host, p, h in fake.requests if host == "codeload"]
        tap.ok(api_auth and all(a == f"Bearer {canary}" for a in api_auth)
               and codeload and all("Authorization" not in h and canary not in p for p, h in codeload),
               "the token went only to the API host, never to codeload", fake.requests)
        state2 = new_state()
        r = stage(state2, config, [("acme/clean", clean)], env={"PATH": os.environ["PATH"], "GITHUB_TOKEN": canary},
                  extra=["--github-api", fake.api_base, "--github-codeload", fake.codeload_host,
                         "--github-ca", fake.ca])
        tap.ok(r.returncode == 0 and canary not in r.stdout + r.stderr,
               "with only GITHUB_TOKEN set, stage uses it (GH_TOKEN is tried first)", r.stderr)
        r = stage(new_state(), config, [("acme/clean", clean)],
                  env={"PATH": os.environ["PATH"], "GH_TOKEN": "ghp_wrong", "GITHUB_TOKEN": canary},
                  extra=["--github-api", fake.api_base, "--github-codeload", fake.codeload_host,
                         "--github-ca", fake.ca])
        tap.ok(r.returncode == 1 and "401" in r.stderr and "ghp_wrong" not in r.stderr and canary not in r.stderr,
               "GH_TOKEN wins over GITHUB_TOKEN, and a refused token is named by status only", r.stderr)
        remote = next(s for s in staged(state)["seeds"] if s["repo"] == "acme/remote")
        tap.ok(remote["commit"] == commit and remote["source"] == "github",
               "the GitHub seed records the commit the API resolved", remote)
        tap.ok(probe(state, config, "acme/remote", finder(["REMOTE-MARKER"])) == YES,
               "a probe sees the GitHub seed's files")
    finally:
        fake.close()

    # ---- preflight failures: each a clear operator error before any seed -----
    state = new_state()
    ok_config = write_config(["acme/clean"])
    cases = [
        ("disabled", write_config(["acme/clean"], enabled=False), [("acme/clean", clean)], {}, "sealedProbes.enabled"),
        ("no repositories", write_config([]), [], {}, "sealedProbes.privateRepos"),
        ("unsafe repository", write_config(["acme/../x"]), [], {}, "sealedProbes.privateRepos"),
        ("duplicated repository", write_config(["acme/clean", "acme/clean"]), [], {}, "sealedProbes.privateRepos"),
        ("an unknown runtime", write_config(["acme/clean"], runtime="kata"), [("acme/clean", clean)], {},
         "sealedProbes.runtime"),
        ("runtime unavailable", ok_config, [("acme/clean", clean)], {"PATH": "/nonexistent"}, "not installed"),
        ("invalid limit", write_config(["acme/clean"], timeout=0), [("acme/clean", clean)], {},
         "sealedProbes.timeout"),
        ("unsupported interpreter", write_config(["acme/clean"], interpreter="ruby"), [("acme/clean", clean)], {},
         "sealedProbes.interpreter"),
        ("credentials needed but unset", ok_config, [], {}, "GH_TOKEN"),
        ("a clone for a repository not configured", ok_config, [("acme/clean", clean), ("acme/else", clean)], {},
         "acme/else"),
        ("a clone path that is not absolute", ok_config, [("acme/clean", "relative/path")], {}, "absolute"),
        ("a missing clone", ok_config, [("acme/clean", os.path.join(work, "nope"))], {}, "local clone"),
    ]
    bad_catalog = os.path.join(work, "bad-catalog.txt")
    with open(bad_catalog, "w") as f:
        f.write("# fine\nacme/clean /no/equals/sign\n")
    res = stage(state, ok_config, extra=["--catalog", bad_catalog])
    tap.ok(res.returncode == 1 and "catalog line 2" in res.stderr and "OWNER/REPO=PATH" in res.stderr,
           "preflight: a malformed catalog line is an error naming the line", res.stderr)
    for name, cfg, clones, env_over, needle in cases:
        case_name = f"preflight: {name} is an operator error naming {needle!r}, and no seed is made"
        env = {"PATH": os.environ["PATH"]}
        env.update(env_over)
        if name == "runtime unavailable" and B.docker:
            # Staging runs nothing of the runtime's; docker's is a daemon
            # behind a socket, which serve verifies (test_docker_verify.py).
            B.not_applicable(tap, case_name, "the docker backend has no binary for stage to find on PATH; serve and "
                             "check verify the daemon (test_docker_verify.py)")
            continue
        if name == "runtime unavailable" and B.sbx:
            # sbx's binary is serve's --sbx (or sbx on its search path),
            # which serve and check verify (test_sbx_verify.py); stage, which
            # holds credentials and runs no child, does not look for it.
            B.not_applicable(tap, case_name, "stage does not look for the sbx binary, which is serve's --sbx (or sbx "
                             "on its search path) and which serve and check verify (test_sbx_verify.py); checked "
                             "next: without it stage stages, calling nothing of sbx's")
            calls = len(B.double.argv_log())
            other = new_state()
            res = stage(other, cfg, clones, env=env)
            tap.ok(res.returncode == 0 and res.stderr == "" and os.path.exists(os.path.join(other, "staged.json"))
                   and len(B.double.argv_log()) == calls,
                   "sbx: stage with no runtime binary on PATH stages the seed, and calls no sbx",
                   f"exit {res.returncode}: {res.stderr}")
            continue
        # Each case in a state of its own: one that wrongly stages cannot
        # make the next ones fail.
        case_state = new_state()
        res = stage(case_state, cfg, clones, env=env)
        tap.ok(res.returncode == 1 and needle in res.stderr and res.stdout == ""
               and not os.path.exists(os.path.join(case_state, "staged.json"))
               and not (os.path.isdir(os.path.join(case_state, "seeds"))
                        and os.listdir(os.path.join(case_state, "seeds"))),
               case_name, f"exit {res.returncode}: {res.stderr}")

    usage_cases = [
        ("no --config", [], "--config is required"),
        ("--config twice", ["--config", ok_config, "--config", ok_config], "--config given twice"),
        ("an empty value", ["--config", ok_config, "--state="], "--state needs a non-empty value"),
        ("an unknown option", ["--config", ok_config, "--token=x"], "unknown option `--token=x`"),
        ("a stray argument", ["--config", ok_config, "extra"], "unexpected argument `extra`"),
    ]
    res = subprocess.run([PROXY, "stage", "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    tap.ok(res.returncode == 0 and res.stdout.startswith("usage: sealed-probe-proxy stage") and res.stderr == "",
           "usage: --help prints the usage on stdout and exits 0", res.stderr)
    for name, args, needle in usage_cases:
        res = subprocess.run([PROXY, "stage"] + args, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        tap.ok(res.returncode == 2 and needle in res.stderr and "usage:" in res.stderr and res.stdout == "",
               f"usage: {name} exits 2 saying {needle!r}", res.stderr)

    # ---- unstage leaves a clean slate ---------------------------------------
    for s in list(states):
        if os.path.isdir(s):
            res = subprocess.run([PROXY, "unstage", "--state", s], capture_output=True, text=True)
            if res.returncode != 0:
                tap.ok(False, "unstage removes every seed and mount", res.stderr)
    mounts = open("/proc/self/mountinfo").read()
    tap.ok(work not in mounts and not any(os.path.exists(os.path.join(s, "seeds")) for s in states),
           "unstage unmounts and removes every seed of every state directory")
finally:
    w.close()
tap.finish()
