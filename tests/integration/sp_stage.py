"""Shared plumbing for the staging tests: throwaway clones made with real git,
configs, state directories, `stage` runs, and probes run by hand under the
test's backend (sp_harness.backend(): runc, runsc) in bundles made from the
staged seeds (`bundle --dry-run --state`)."""

import json
import os
import subprocess
import tempfile

from sp_harness import backend, remove_bundle, unmount_under

B = backend()

YES, NO = '{"result": "YES"}', '{"result": "NO"}'


class StageWork:
    """One test file's scratch directory and everything made in it; close()
    unstages every state directory and removes the lot."""

    def __init__(self, proxy, rootfs, prefix):
        self.proxy = proxy
        self.rootfs = rootfs
        self.work = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.work, 0o711)
        self.states = []
        self.counter = 0
        self.git_env = {"PATH": "/usr/bin:/bin", "HOME": self.work, "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}

    def next(self):
        self.counter += 1
        return self.counter

    def git(self, repo, *args, stdin=None, binary=False):
        out = subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, input=stdin,
                             text=not binary, env=self.git_env).stdout
        return out if binary else out.strip()

    def make_clone(self, name, files):
        path = os.path.join(self.work, "clones", name)
        os.makedirs(path)
        self.git(path, "init", "-q", "-b", "main")
        for rel, data in files.items():
            full = os.path.join(path, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        self.git(path, "add", "-A")
        self.git(path, "commit", "-q", "-m", "fixture")
        return path

    def write_config(self, repos, **extra):
        path = os.path.join(self.work, f"config-{self.next()}.json")
        block = {"enabled": True, "privateRepos": repos, "runtime": B.runtime}
        block.update(extra)
        with open(path, "w") as f:
            json.dump({"sealedProbes": block}, f)
        return path

    def new_state(self):
        path = os.path.join(self.work, f"state-{self.next()}")
        self.states.append(path)
        return path

    def stage(self, state, config, clones=(), env=None, extra=()):
        argv = [self.proxy, "stage", "--config", config, "--state", state] + list(extra)
        for repo, path in clones:
            argv += ["--clone", f"{repo}={path}"]
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                              env=env if env is not None else {"PATH": os.environ["PATH"]})

    def unstage(self, state):
        return subprocess.run([self.proxy, "unstage", "--state", state], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=300)

    def staged(self, state):
        with open(os.path.join(state, "staged.json")) as f:
            return json.load(f)

    def seed_dir(self, state, repo):
        record = self.staged(state)
        index = next(s["index"] for s in record["seeds"] if s["repo"] == repo)
        return os.path.join(state, "seeds", record["run"], str(index))

    def probe(self, state, config, repo, script):
        """Runs script against a bundle made from repo's seed; returns what the
        probe wrote to /probe/out, or an error string."""
        n = self.next()
        bundle = os.path.join(self.work, f"bundle-{n}")
        script_path = bundle + ".py"
        with open(script_path, "w") as f:
            f.write(script)
        r = subprocess.run([self.proxy, "bundle", "--dry-run", "--config", config, "--repo", repo, "--script",
                            script_path, "--out", bundle, "--rootfs", self.rootfs, "--state", state,
                            *B.proxy_args()],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            return f"bundle failed: {r.stderr.strip()}"
        root = os.path.join(self.work, B.state_subdir)
        cid = f"sp-stage-test-{os.getpid()}-{n}"
        try:
            run = subprocess.run(B.run_argv(root, bundle, cid), capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL, timeout=120)
        finally:
            subprocess.run(B.delete_argv(root, cid, bundle), capture_output=True)
        with open(os.path.join(bundle, "out")) as f:
            out = f.read()
        remove_bundle(bundle)
        subprocess.run(["rm", "-rf", script_path])
        return out if run.returncode == 0 else f"{B.binary_name} failed: {run.stderr.strip()} {out}"

    def close(self):
        for s in self.states:
            self.unstage(s)
        unmount_under(self.work)  # dry-run bundles
        subprocess.run(["rm", "-rf", self.work])


def finder(needles, extra=""):
    """A probe that answers YES when it can read any needle anywhere it can
    reach from /probe/repo, following every symlink it meets."""
    return f"""import json, os
needles = {[n.encode() for n in needles]!r}
found = []
for dirpath, dirnames, filenames in os.walk("/probe/repo", followlinks=True):
    for name in filenames + dirnames:
        path = os.path.join(dirpath, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        found += [n for n in needles if n in data or n in path.encode()]
{extra}
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if found else "NO"}}, f)
"""
