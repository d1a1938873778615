"""The sbx backend's test plumbing: installing the test double of the sbx
CLI (tests/doubles/sbx/sbx, a TEST DOUBLE: Docker Sandboxes cannot run
here; docs/runtimes.md, "sbx") where serve's binary checks accept it, in
one of its modes, and running a dry-run bundle's sbx command lines by hand
(replay, the sbx `runc run`).

Run as a program, it is that replay's command line (Backend.run_argv,
delete_argv and kill_argv on sbx):
    python3 -I sp_sbx.py sbx-run --sbx PATH --bundle DIR [--name NAME]
    python3 -I sp_sbx.py sbx-rm --sbx PATH NAME
    python3 -I sp_sbx.py sbx-kill --sbx PATH NAME"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE_DIR = os.path.normpath(os.path.join(HERE, "..", "doubles", "sbx"))
# The launcher and the module it imports: a copy of the double is both.
DOUBLE_FILES = ("sbx", "sbx_double.py")
# Outside /run/sealed-probe*: a path a probe must never see names those.
STATE_ROOT = "/run/sp-sbx-double"
# The proxy's fixed environment for sbx (src/runtimes/sbx.c): PATH, root's HOME, LC_ALL=C.
PROXY_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
             "LC_ALL": "C"}
MODES = ("capable", "incapable", "unaudited", "unauthenticated", "hostile-ls", "hanging-create", "unstoppable")


def state_key(state):
    """The suffix of a state directory's VM names: its device and inode in hex."""
    st = os.stat(state)
    return f"{st.st_dev:x}-{st.st_ino:x}"


def vm_name(container_id, state):
    """The VM serve makes for container sp-<run>-<inv> of state."""
    return f"{container_id}.{state_key(state)}"


def find_runc():
    for d in PROXY_ENV["PATH"].split(":"):
        p = os.path.join(d, "runc")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def rootfs_template(rootfs_dir):
    """(template reference, root directory) of a built rootfs (its `digest`
    file and `root/`): the double's stand-in for an operator's template
    pinned by digest."""
    with open(os.path.join(rootfs_dir, "digest")) as f:
        digest = f.read().strip()
    return f"sealed-probe/rootfs@{digest}", os.path.join(rootfs_dir, "root")


class SbxDouble:
    """One installed copy of the double: a root-only directory under
    /usr/local/lib (every directory up to / root's and not writable by
    others, as serve's binary check wants) holding `sbx` and its
    double.json, with its VMs under /run/sealed-probe-test/sbx/<id>.
    close() stops and removes every VM it has and both directories."""

    def __init__(self, rootfs_dir, mode="capable", version=None):
        self.id = uuid.uuid4().hex[:12]
        self.dir = f"/usr/local/lib/sp-test-sbx-{self.id}"
        os.makedirs(self.dir, mode=0o700)
        os.chmod(self.dir, 0o700)
        self.path = os.path.join(self.dir, "sbx")
        for name in DOUBLE_FILES:
            shutil.copyfile(os.path.join(DOUBLE_DIR, name), os.path.join(self.dir, name))
        os.chmod(self.path, 0o755)
        self.log = os.path.join(self.dir, "argv.jsonl")
        os.makedirs(STATE_ROOT, mode=0o711, exist_ok=True)
        os.chmod(STATE_ROOT, 0o711)
        self.state = os.path.join(STATE_ROOT, self.id)
        os.makedirs(self.state, mode=0o711)
        self.template, self.root = self._template_copy(rootfs_dir)
        self.runc = find_runc()
        self.configure(mode, version)
        atexit.register(self.close)

    def _template_copy(self, rootfs_dir):
        """The template's root: a copy of the rootfs on a tmpfs of its own, so
        that a bind of it shows `/` as its root in a VM's mountinfo, never the
        rootfs's host path (as a real VM shows none)."""
        template, root = rootfs_template(rootfs_dir)
        self.template_mount = os.path.join(self.state, "template")
        os.makedirs(self.template_mount, mode=0o755)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=256m", "sp-sbx-template", self.template_mount],
                       check=True, capture_output=True)
        subprocess.run(["cp", "-a", root + "/.", self.template_mount], check=True, capture_output=True)
        return template, self.template_mount

    def configure(self, mode="capable", version=None, **extra):
        """Rewrites double.json: the mode, and a version override."""
        conf = {"mode": mode, "log": self.log, "state": self.state, "templates": {self.template: self.root},
                "runc": self.runc}
        if version is not None:
            conf["version"] = version
        conf.update(extra)
        tmp = os.path.join(self.dir, ".double.json.tmp")
        with open(tmp, "w") as f:
            json.dump(conf, f)
        os.replace(tmp, os.path.join(self.dir, "double.json"))
        self.mode = mode

    def proxy_args(self):
        return ["--sbx", self.path, "--sbx-template", self.template]

    def call(self, *args, timeout=60, **kw):
        """Runs the double as serve would (its fixed environment)."""
        return subprocess.run([self.path, *args], env=PROXY_ENV, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, **kw)

    def vms(self):
        """Every VM the double holds, whatever its mode says to `ls`: the
        names of its state files."""
        d = os.path.join(self.state, "vms")
        if not os.path.isdir(d):
            return []
        return sorted(n[:-5] for n in os.listdir(d) if n.endswith(".json"))

    def argv_log(self):
        """[(argv, env)] of every call the double got, in order."""
        out = []
        try:
            with open(self.log) as f:
                for line in f:
                    if line.strip():
                        rec = json.loads(line)
                        out.append((rec["argv"], rec["env"]))
        except FileNotFoundError:
            pass
        return out

    def clear_log(self):
        with open(self.log, "w"):
            pass

    def remove_vm(self, name):
        """Stops and removes one VM, in capable mode whatever the current one."""
        mode = self.mode
        if mode != "capable":
            self.configure("capable")
        try:
            self.call("stop", name)
            self.call("rm", name)
        finally:
            if mode != "capable":
                self.configure(mode)

    def close(self):
        if not os.path.isdir(self.dir):
            return
        for name in self.vms():
            self.remove_vm(name)
        if self.runc:
            root = os.path.join(self.state, "runc")
            r = subprocess.run([self.runc, "--root", root, "list", "-q"], capture_output=True, text=True)
            for cid in r.stdout.split():
                subprocess.run([self.runc, "--root", root, "delete", "--force", cid], capture_output=True)
        subprocess.run(["umount", "-l", self.template_mount], capture_output=True)
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def replay(sbx, bundle, name=None, out=None, err=None):
    """Runs a dry-run bundle's runtime-commands.json by hand on sbx: create,
    exec (with this process's stdio), stop, rm, each as described, with the
    described environment, and name in place of the described VM name when
    given.  Returns exec's exit status, or 125 when another step failed."""
    with open(os.path.join(bundle, "runtime-commands.json")) as f:
        described = json.load(f)
    if described.get("runtime") != "sbx":
        raise RuntimeError(f"{bundle}/runtime-commands.json is for runtime {described.get('runtime')!r}, not sbx")
    env = dict(e.split("=", 1) for e in described["environment"])
    steps = {c["step"].split()[0]: c["argv"] for c in described["commands"]}
    old = steps["stop"][-1]

    def argv_of(step):
        return [sbx] + [name if (name and w == old) else w for w in steps[step][1:]]

    r = subprocess.run(argv_of("create"), env=env, stdin=subprocess.DEVNULL, capture_output=True)
    if r.returncode != 0:
        sys.stderr.write(f"sbx-run: create exited {r.returncode}: {r.stderr.decode(errors='replace')[:300]}\n")
        return 125
    try:
        status = subprocess.run(argv_of("exec"), env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err).returncode
    finally:
        subprocess.run(argv_of("stop"), env=env, capture_output=True)
        subprocess.run(argv_of("rm"), env=env, capture_output=True)
    return status


def _main(argv):
    opts, rest, i = {}, [], 0
    while i < len(argv):
        if argv[i] in ("--bundle", "--name", "--sbx") and i + 1 < len(argv):
            opts[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    verb, rest = (rest[0], rest[1:]) if rest else (None, [])
    sbx = opts.get("sbx")
    if sbx and verb == "sbx-run" and "bundle" in opts and not rest:
        return replay(sbx, opts["bundle"], opts.get("name"))
    if sbx and verb in ("sbx-rm", "sbx-kill") and len(rest) == 1:
        steps = ["stop", "rm"] if verb == "sbx-rm" else ["stop"]
        code = 0
        for step in steps:
            code |= subprocess.run([sbx, step, rest[0]], env=PROXY_ENV, capture_output=True).returncode
        return 0 if code == 0 else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
