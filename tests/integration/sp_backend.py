"""The backend helpers of the per-backend serve tests (test_runtime_commands,
test_limits, test_gvisor_verify): the backend is sp_harness.backend()'s (the
one table, BACKENDS, and the SP_BACKENDS / CI=true rules; docs/testing.md),
named here as those tests name it, with where its state lives (STATE/runc or
STATE/runsc, docs/runtimes.md), and fake runtime binaries in root-only
directories that verify accepts (every directory up to / root's and not
writable by others, which /tmp is not)."""

import contextlib
import glob
import json
import os
import shutil
import subprocess
import uuid

from sp_harness import BACKENDS, RUNTIME_SEARCH_PATH, backend

_B = backend()  # SP_BACKEND, set by tests/meson.build; skips or bails as sp_harness says
BACKEND = _B.name
RUNTIME = _B.runtime
BINARY_OPTION, BINARY_NAME, STATE_DIR_NAME = _B.option, _B.binary_name, _B.state_subdir
SEARCH = tuple(RUNTIME_SEARCH_PATH.split(":"))
# Every OCI command-line backend's (state subdirectory, binary), for the leak
# checks and force-deletes that look at any backend's leftovers; docker's
# containers are found by their state label instead, on the tests' daemon.
_ALL = tuple((spec["state"], spec["binary"]) for spec in BACKENDS.values() if spec["binary"])


def real_binary(name=None):
    """The installed binary, found where the proxy looks (SP_RUNTIME_SEARCH_PATH)."""
    name = name or BINARY_NAME
    if not name:
        return None  # docker: no binary
    for d in SEARCH:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.realpath(p)
    return None


def require_backend():
    """This backend's installed binary (sp_harness.backend() has already
    skipped the file, or failed it under CI=true, when it is missing)."""
    return real_binary()


def runtime_roots(state, name=None):
    """Every runtime --root of a state directory: STATE/<runc|runsc>/<run>."""
    return sorted(glob.glob(os.path.join(state, name or STATE_DIR_NAME, "*")))


def containers_in(root):
    """Container ids left in one --root: what the directory holds (a
    directory per container, and runsc's `<id>_sandbox:<id>.state` files)."""
    if not os.path.isdir(root):
        return set()
    ids = set()
    for n in os.listdir(root):
        if os.path.isdir(os.path.join(root, n)):
            ids.add(n)
        elif n.endswith(".state") or n.endswith(".pid"):
            ids.add(n)
    return ids


def leftover_containers(state):
    """[root: ids] of every runtime root of state, either backend, that holds a
    container; on docker also the containers labelled with state's key."""
    out = list(_B.leftover_containers(state)) if _B.runtime_is_daemon else []
    for name, _ in _ALL:
        for root in runtime_roots(state, name):
            ids = containers_in(root)
            if ids:
                out.append(f"{root}: {sorted(ids)}")
    return out


def force_delete(state):
    """Best-effort removal of any container a failed test left in state."""
    if _B.runtime_is_daemon:
        _B.force_delete_state(state)
    for name, binary_name in _ALL:
        binary = real_binary(binary_name)
        if binary is None:
            continue
        for root in runtime_roots(state, name):
            for cid in containers_in(root):
                if cid.endswith(".pid"):
                    continue
                cid = cid.split("_sandbox:")[0]
                subprocess.run([binary, "--root", root, "kill", cid, "KILL"], capture_output=True)
                subprocess.run([binary, "--root", root, "delete", "--force", cid], capture_output=True)


def run_of(state):
    """The run id of the one serve or check that used state (its --root's name)."""
    roots = runtime_roots(state)
    return os.path.basename(roots[0]) if len(roots) == 1 else None


class FakeBins:
    """Root-only directories under /usr/local/lib holding fake runtime
    binaries; close() removes every one of them."""

    def __init__(self):
        self.dirs = []

    def new_dir(self):
        d = f"/usr/local/lib/sp-test-{uuid.uuid4().hex[:12]}"
        os.makedirs(d, mode=0o700)
        os.chmod(d, 0o700)
        self.dirs.append(d)
        return d

    def script(self, name, text, owner=0):
        path = os.path.join(self.new_dir(), name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        os.chown(path, owner, owner)
        return path

    def copy(self, source, name, owner=0):
        path = os.path.join(self.new_dir(), name)
        shutil.copy2(source, path)
        os.chmod(path, 0o755)
        os.chown(path, owner, owner)
        return path

    def logging_wrapper(self, real, name):
        """A wrapper that appends its argv, as one JSON line, to LOG beside
        it, then execs real with the same arguments.  Returns (path, log)."""
        d = self.new_dir()
        path, log = os.path.join(d, name), os.path.join(d, "argv.jsonl")
        with open(path, "w") as f:
            f.write("#!/usr/bin/python3 -I\n"
                    "import json, os, sys\n"
                    f"with open({log!r}, 'a') as f:\n"
                    "    f.write(json.dumps(sys.argv) + '\\n')\n"
                    f"os.execv({real!r}, [{real!r}] + sys.argv[1:])\n")
        os.chmod(path, 0o755)
        return path, log

    def close(self):
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.dirs = []


def read_log(log):
    """The argv lines a logging wrapper wrote, in order."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        with open(log) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out
