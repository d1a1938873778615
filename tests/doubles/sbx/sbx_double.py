"""TEST DOUBLE of the Docker Sandboxes CLI `sbx`; it is NOT Docker Sandboxes.

It emulates a hypothetical *capable* sbx release: the real sbx 0.37.1 lacks
`create --network`, `--pids-limit`, `--disk-limit`, `--ulimit-fsize` and
`--mount-target`, which the sealed-probe sbx backend needs, so the tests run
that backend against this double (mode `capable`) and check that it refuses
the real release (mode `incapable`).

Configuration: `double.json` beside this script (its realpath's directory),
never the environment (the backend gives sbx exactly PATH, HOME, LC_ALL=C):
    mode       one of MODES below (default "capable")
    log        absolute path of a JSON-lines file; every invocation appends
               {"argv", "env", "pid", "time"} before it does anything else
    state      absolute directory for the VMs (created 0711 if missing):
               state/vms/<NAME>.json, state/vms/<NAME>/ and runc's state/runc
    templates  {"<template reference>": "<absolute rootfs directory>"}
    runc       absolute path of the runc binary
    version    optional: the version `sbx version` prints

Modes:
    capable          every flag above; version 0.0.0-sealed-probe-double
    incapable        the real 0.37.1's surface: version 0.37.1, and the five
                     flags above are unknown (create has --branch and --kit)
    unaudited        capable, but version 0.38.0 (a release nobody audited)
    unauthenticated  every command but `version` and help fails: not signed in
    hostile-ls       `ls -q` also prints `--all`, `-rf` and ` spaced name`
    hanging-create   `create` logs its argv, then sleeps until killed
    unstoppable      `stop` fails without stopping; `rm` refuses a VM that
                     ever ran an exec
"missing-binary" is no mode of the double: a test names a path with no file.

How a VM is emulated.  A microVM confines its workload by being one: its own
kernel.  This double has no kernel of its own, so each `exec` runs the
command under real runc, and takes that confinement from the OCI bundle the
sealed-probe proxy writes beside the paths it shares: `config.json` in the
directory holding the first mount's source.  From it the double keeps only
the confinement (capabilities, rlimits, noNewPrivileges, oomScoreAdj, LSM
labels, hostname, namespaces and id mappings, masked and read-only paths,
seccomp, the device rules, propagation, the cgroup path, sysctls, a read-only
root, and every mount that is not one of the VM's).  Everything the adapter
must tell sbx comes ONLY from sbx's argv and overrides config.json: the
rootfs (the template), the command, --user, --workdir, --env, the memory,
CPU and pids limits, RLIMIT_FSIZE (--ulimit-fsize), the /tmp tmpfs size
(--disk-limit), the shared paths (binds at their --mount-target, noexec) and
the network (without `--network none` the network namespace is dropped: the
VM is on the host's network, and a sysfs mount becomes a read-only bind of
the host's /sys, which runc 1.1 cannot otherwise give it there).  So a flag
the adapter forgets is missing in the run, as it would be in a real VM.

runc 1.1 has no idmapped mounts and the shared paths live below a root-only
directory, so the user namespace's root could not reach them: exec forks a
child that makes a private mount namespace, bind-mounts the rootfs
(read-only) and every shared path into state/vms/<NAME>/ (0711 all the way
down), writes state/vms/<NAME>/bundle/config.json pointing there, and runs
`runc create` there (detached, so the command's fds 0, 1 and 2 are exec's
own, as given: a foreground `runc run` would relay them through pipes).
exec is a subreaper, so the container's init becomes its child; it runs
`runc start`, waits for the init, deletes the container, and exits with the
command's status (128+N for signal N).  The command is pid 1 of its pid
namespace, so a signal it sends itself does not kill it; one from outside
(sbx stop) does.

What it does NOT emulate: a separate kernel (the workload shares the host's,
confined as runc confines it), a real VM's lifetime (there is no VM process:
a VM is a JSON file, and one exec runs at a time, a new one replacing a
still-running one), sign-in, agents other than `shell`, exec's --detach,
--tty and --privileged (refused, loudly), create's --branch and --kit.
Killing `sbx exec` does not stop its command; `sbx stop` does."""

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time

# ctypes (exec) and shutil (rm) are imported where they are used: every call
# of the double is a process start of its own.

MODES = ("capable", "incapable", "unaudited", "unauthenticated", "hostile-ls", "hanging-create", "unstoppable")
VERSIONS = {"incapable": "0.37.1", "unaudited": "0.38.0"}
CAPABLE_VERSION = "0.0.0-sealed-probe-double"
HOSTILE_NAMES = ("--all", "-rf", " spaced name")
# Matched with fullmatch (a `$` would let a trailing newline through).
NAME_RE = re.compile(r"[A-Za-z0-9+][A-Za-z0-9.+-]{0,127}")   # also a valid runc container id
SIZE_RE = re.compile(r"([0-9]+)([bkmg]?)", re.IGNORECASE)
SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
DEFAULT_ENV = ["PATH=/usr/bin:/bin"]
# What config.json may say: the confinement a microVM's kernel would give.
KEPT_PROCESS = ("capabilities", "rlimits", "noNewPrivileges", "oomScoreAdj", "apparmorProfile", "selinuxLabel")
KEPT_LINUX = ("namespaces", "uidMappings", "gidMappings", "maskedPaths", "readonlyPaths", "seccomp",
              "rootfsPropagation", "cgroupsPath", "sysctl")
SHARED_OPTIONS = ["rbind", "nosuid", "nodev", "noexec"]  # the shared paths are not trusted to run

CLONE_NEWNS = 0x00020000
PR_SET_CHILD_SUBREAPER = 36
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


class Fail(Exception):
    """An sbx error: printed as `Error: <message>`, exit 1."""


# ---- flags, cobra style -----------------------------------------------------

class Flag:
    """One flag: kind is "bool", "value" or "list" (repeatable)."""

    def __init__(self, long, short, kind, type_name, usage):
        self.long, self.short, self.kind, self.type_name, self.usage = long, short, kind, type_name, usage


HELP = Flag("help", "h", "bool", "", "help for {cmd}")
CREATE_COMMON = [
    Flag("name", None, "value", "string", "Name of the sandbox"),
    Flag("template", "t", "value", "string", "Template (image reference) of the sandbox"),
    Flag("cpus", None, "value", "float", "Number of CPUs"),
    Flag("memory", "m", "value", "string", "Memory limit (e.g. 512m, 2g)"),
    Flag("quiet", "q", "bool", "", "Print nothing on success"),
]
CREATE_CAPABLE = CREATE_COMMON + [
    Flag("network", None, "value", "string", "Network of the sandbox (none: loopback only)"),
    Flag("pids-limit", None, "value", "int", "Maximum number of tasks in the sandbox"),
    Flag("disk-limit", None, "value", "string", "Size of the sandbox's writable disk (/tmp)"),
    Flag("ulimit-fsize", None, "value", "string", "Maximum size of a file written in the sandbox"),
    Flag("mount-target", None, "list", "stringArray", "Where the i-th PATH appears in the sandbox"),
]
CREATE_INCAPABLE = CREATE_COMMON + [
    Flag("branch", None, "value", "string", "Git branch to check out in the workspace"),
    Flag("kit", None, "list", "stringArray", "Kit to add to the sandbox"),
]
EXEC_FLAGS = [
    Flag("user", "u", "value", "string", "Username or UID (format: \"<uid>:<gid>\")"),
    Flag("workdir", "w", "value", "string", "Working directory inside the sandbox"),
    Flag("env", "e", "list", "stringArray", "Set environment variables"),
    Flag("detach", "d", "bool", "", "Run the command in the background"),
    Flag("interactive", "i", "bool", "", "Keep STDIN open"),
    Flag("tty", "t", "bool", "", "Allocate a pseudo-TTY"),
    Flag("privileged", None, "bool", "", "Give extended privileges to the command"),
]
LS_FLAGS = [Flag("quiet", "q", "bool", "", "Only display sandbox names")]
COMMANDS = {
    # name: (usage, summary, interspersed flags?)
    "create": ("sbx create [flags] AGENT [--] PATH[:ro]...", "Create a sandbox", True),
    "exec": ("sbx exec [flags] SANDBOX [--] COMMAND [ARG...]", "Run a command in a sandbox", False),
    "ls": ("sbx ls [flags]", "List sandboxes", True),
    "stop": ("sbx stop SANDBOX...", "Stop sandboxes", True),
    "rm": ("sbx rm SANDBOX...", "Remove sandboxes", True),
    "version": ("sbx version", "Show the sbx version", True),
}


def command_flags(command, mode):
    if command == "create":
        return CREATE_INCAPABLE if mode == "incapable" else CREATE_CAPABLE
    return {"exec": EXEC_FLAGS, "ls": LS_FLAGS}.get(command, [])


def parse_flags(args, flags, interspersed):
    """pflag's rules: `--f v`, `--f=v`, `-f v`, `-fv`, clustered short bools,
    `--` ends the flags.  Without interspersed, the first positional does too
    (exec: the command's own flags are not sbx's).  Returns ({long: value},
    positionals); a list flag's value is a list, a bool's True or False."""
    by_long = {f.long: f for f in flags + [HELP]}
    by_short = {f.short: f for f in flags + [HELP] if f.short}
    values, positionals = {}, []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positionals.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, inline = arg[2:].partition("=")
            flag = by_long.get(name)
            if flag is None:
                raise Fail(f"unknown flag: --{name}")
            i = take_value(flag, f"--{name}", inline if eq else None, args, i, values)
        elif arg.startswith("-") and arg != "-":
            cluster = arg[1:]
            while cluster:
                flag = by_short.get(cluster[0])
                if flag is None:
                    raise Fail(f"unknown shorthand flag: '{cluster[0]}' in {arg}")
                rest = cluster[1:]
                if flag.kind == "bool" and not rest.startswith("="):
                    values[flag.long] = True
                    cluster = rest
                    continue
                inline = rest[1:] if rest.startswith("=") else rest
                i = take_value(flag, f"'{flag.short}' in {arg}", inline if rest else None, args, i, values)
                break
        else:
            positionals.append(arg)
            if not interspersed:
                positionals.extend(args[i:])
                break
    return values, positionals


def take_value(flag, shown, inline, args, i, values):
    """Stores flag's value (inline, or the next argument); returns the new i."""
    if flag.kind == "bool":
        if inline is not None and inline not in ("true", "false"):
            raise Fail(f"invalid argument \"{inline}\" for \"{shown}\" flag: strconv.ParseBool: parsing "
                       f"\"{inline}\": invalid syntax")
        values[flag.long] = inline != "false"
        return i
    if inline is None:
        if i >= len(args):
            raise Fail(f"flag needs an argument: {shown}")
        inline = args[i]
        i += 1
    if flag.kind == "list":
        values.setdefault(flag.long, []).append(inline)
    else:
        values[flag.long] = inline
    return i


def help_text(command, mode):
    """cobra's layout: usage, then the flags sorted by long name."""
    if command is None:
        lines = ["sbx runs agents in sandboxes (TEST DOUBLE, not Docker Sandboxes)", "", "Usage:",
                 "  sbx [command]", "", "Available Commands:"]
        lines += [f"  {name:<10} {COMMANDS[name][1]}" for name in sorted(COMMANDS)]
        lines += ["", "Flags:", "  -h, --help   help for sbx", "",
                  "Use \"sbx [command] --help\" for more information about a command."]
        return "\n".join(lines) + "\n"
    usage, summary, _ = COMMANDS[command]
    rows = []
    for flag in sorted(command_flags(command, mode) + [HELP], key=lambda f: f.long):
        short = f"-{flag.short}, " if flag.short else "    "
        rows.append((f"  {short}--{flag.long} {flag.type_name}".rstrip(), flag.usage.format(cmd=command)))
    width = max(len(left) for left, _ in rows) + 3
    lines = [summary, "", "Usage:", f"  {usage}", "", "Flags:"]
    lines += [f"{left:<{width}}{right}" for left, right in rows]
    return "\n".join(lines) + "\n"


# ---- configuration and the log ----------------------------------------------

def load_double_config():
    here = os.path.dirname(os.path.realpath(__file__))
    path = os.path.join(here, "double.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(f"sbx test double: cannot read {path}: {e}")
    config.setdefault("mode", "capable")
    config.setdefault("templates", {})
    if config["mode"] not in MODES:
        raise Fail(f"sbx test double: unknown mode {config['mode']!r} in {path}")
    for key in ("log", "state", "runc"):
        if not isinstance(config.get(key), str) or not os.path.isabs(config[key]):
            raise Fail(f"sbx test double: {path}: `{key}` must be an absolute path")
    if not isinstance(config["templates"], dict):
        raise Fail(f"sbx test double: {path}: `templates` must be an object")
    return config


def log_invocation(config):
    """One line, one write, O_APPEND: concurrent invocations don't interleave."""
    line = json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "pid": os.getpid(),
                       "time": time.time()}) + "\n"
    try:
        fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as e:
        raise Fail(f"sbx test double: cannot append to the log {config['log']}: {e}")


# ---- the state: one JSON file and one directory per VM ----------------------

class State:
    def __init__(self, config):
        self.config = config
        self.top = config["state"]
        self.vms = os.path.join(self.top, "vms")
        self.runc_root = os.path.join(self.top, "runc")
        # The user namespace's root walks down state/vms/<NAME>/: 0711, not 0700.
        make_dir(self.top, 0o711)
        make_dir(self.vms, 0o711)
        make_dir(self.runc_root, 0o700)

    def vm_json(self, name):
        return os.path.join(self.vms, name + ".json")

    def vm_dir(self, name):
        return os.path.join(self.vms, name)

    def lock(self):
        """Serializes read-modify-write of the VM files across invocations."""
        f = open(os.path.join(self.top, ".lock"), "w")
        fcntl.flock(f, fcntl.LOCK_EX)
        return f

    def names(self):
        return sorted(e[:-5] for e in os.listdir(self.vms) if e.endswith(".json") and NAME_RE.fullmatch(e[:-5]))

    def load(self, name):
        """The VM's record; a name that is not a valid one is not found either,
        so no argument ever becomes a path outside state/vms."""
        if NAME_RE.fullmatch(name):
            try:
                with open(self.vm_json(name)) as f:
                    return json.load(f)
            except FileNotFoundError:
                pass
        raise Fail(f"sandbox {name} not found")

    def save(self, vm):
        write_atomic(self.vm_json(vm["name"]), json.dumps(vm, indent=1) + "\n", 0o644)

    def update(self, name, change):
        """Best effort: applies change(vm) under the lock, if the VM still exists."""
        with self.lock():
            try:
                vm = self.load(name)
            except Fail:
                return
            change(vm)
            self.save(vm)

    def runc(self, *args):
        return subprocess.run([self.config["runc"], "--root", self.runc_root, *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)

    def container_status(self, name):
        """runc's status of the VM's container, or None when runc has none."""
        r = self.runc("state", name)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout).get("status", "unknown")
        except ValueError:
            return "unknown"


def make_dir(path, mode):
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    os.chmod(path, mode)  # not mkdir's mode: the caller's umask would mask it


def write_atomic(path, text, mode):
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


# ---- value syntax -------------------------------------------------------------

def parse_size(flag, text):
    m = SIZE_RE.fullmatch(text)
    if not m or int(m.group(1)) <= 0:
        raise Fail(f"invalid argument \"{text}\" for \"--{flag}\": a size is a positive integer with an "
                   f"optional b, k, m or g suffix")
    return int(m.group(1)) * SIZE_UNITS[m.group(2).lower()]


def parse_positive_int(flag, text):
    if not re.fullmatch(r"[0-9]+", text) or int(text) <= 0:
        raise Fail(f"invalid argument \"{text}\" for \"--{flag}\": a positive integer")
    return int(text)


def parse_cpus(text):
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?|\.[0-9]+", text) or float(text) <= 0:
        raise Fail(f"invalid argument \"{text}\" for \"--cpus\": a decimal number above 0")
    return float(text)


def parse_user(text):
    m = re.fullmatch(r"([0-9]+):([0-9]+)", text)
    if not m:
        raise Fail(f"invalid --user \"{text}\": this double takes a numeric UID:GID")
    return int(m.group(1)), int(m.group(2))


# ---- commands -----------------------------------------------------------------

def cmd_version(config, values, positionals):
    version = config.get("version") or VERSIONS.get(config["mode"], CAPABLE_VERSION)
    sys.stdout.write(f"Client:\n Version: {version}\n Built: double\n")
    return 0


def cmd_ls(config, values, positionals):
    if positionals:
        raise Fail(f"unexpected argument {positionals[0]!r}")
    state = State(config)
    names = state.names()
    if values.get("quiet"):
        if config["mode"] == "hostile-ls":
            names = sorted(names + list(HOSTILE_NAMES))
        sys.stdout.write("".join(n + "\n" for n in names))
        return 0
    sys.stdout.write(f"{'SANDBOX':<30} {'STATUS':<10} TEMPLATE\n")
    for name in names:
        vm = state.load(name)
        sys.stdout.write(f"{name:<30} {vm.get('status', ''):<10} {vm.get('template', '')}\n")
    return 0


def cmd_create(config, values, positionals):
    for unsupported in ("branch", "kit"):
        if unsupported in values:
            raise Fail(f"--{unsupported} is not emulated by this test double")
    if not positionals or positionals[0] != "shell":
        raise Fail("create needs the agent `shell` (the only agent this double knows)")
    name = values.get("name")
    if name is None:
        raise Fail("required flag \"name\" not set")
    if not NAME_RE.fullmatch(name):
        raise Fail(f"invalid sandbox name {name!r}: 1 to 128 of [A-Za-z0-9.+-], not starting with - or .")
    template = values.get("template")
    if template is None:
        raise Fail("required flag \"template\" not set")
    rootfs = config["templates"].get(template)
    if not isinstance(rootfs, str) or not os.path.isdir(rootfs):
        raise Fail(f"template {template} not found")
    mounts = shared_paths(positionals[1:], values.get("mount-target"))
    network = values.get("network", "host")
    if network not in ("none", "host"):
        raise Fail(f"invalid argument \"{network}\" for \"--network\": this double knows none and host")
    vm = {
        "name": name, "template": template, "rootfs": rootfs, "network": network,
        "cpus": parse_cpus(values["cpus"]) if "cpus" in values else None,
        "memory": parse_size("memory", values["memory"]) if "memory" in values else None,
        "disk": parse_size("disk-limit", values["disk-limit"]) if "disk-limit" in values else None,
        "fsize": parse_size("ulimit-fsize", values["ulimit-fsize"]) if "ulimit-fsize" in values else None,
        "pids": parse_positive_int("pids-limit", values["pids-limit"]) if "pids-limit" in values else None,
        "mounts": mounts, "status": "created", "execs": 0,
    }
    state = State(config)
    with state.lock():
        if os.path.exists(state.vm_json(name)) or os.path.lexists(state.vm_dir(name)):
            raise Fail(f"sandbox {name} already exists")
        make_dir(state.vm_dir(name), 0o711)
        state.save(vm)
    if not values.get("quiet"):
        sys.stdout.write(f"Created sandbox {name}\n")
    return 0


def shared_paths(paths, targets):
    """[{source, target, ro}] from create's PATH[:ro] arguments and, when
    given, as many --mount-target values (else each PATH at its own path)."""
    if not paths:
        raise Fail("create needs at least one PATH to share")
    if targets is not None and len(targets) != len(paths):
        raise Fail(f"{len(targets)} --mount-target for {len(paths)} PATH arguments: give one per PATH")
    mounts = []
    for i, arg in enumerate(paths):
        ro = arg.endswith(":ro")
        source = arg[:-3] if ro else arg
        if not os.path.isabs(source):
            raise Fail(f"path {source!r} is not absolute")
        if not (os.path.isfile(source) or os.path.isdir(source)):
            raise Fail(f"path {source} does not exist (or is neither a file nor a directory)")
        target = targets[i] if targets is not None else source
        if not os.path.isabs(target) or os.path.normpath(target) != target or target == "/":
            raise Fail(f"invalid mount target {target!r}: an absolute, normalized path other than /")
        if any(m["target"] == target for m in mounts):
            raise Fail(f"mount target {target} given twice")
        mounts.append({"source": source, "target": target, "ro": ro})
    return mounts


def cmd_exec(config, values, positionals):
    for unsupported in ("detach", "tty", "privileged"):
        if values.get(unsupported):
            raise Fail(f"--{unsupported} is not emulated by this test double")
    if not positionals:
        raise Fail("exec needs a SANDBOX and a COMMAND")
    name, command = positionals[0], positionals[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise Fail("exec needs a COMMAND")
    state = State(config)
    vm = state.load(name)
    user = parse_user(values["user"]) if "user" in values else (0, 0)
    workdir = values.get("workdir", "/")
    if not os.path.isabs(workdir):
        raise Fail(f"invalid --workdir {workdir!r}: not absolute")
    env = values.get("env", DEFAULT_ENV)
    for entry in env:
        if "=" not in entry or entry.startswith("="):
            raise Fail(f"invalid --env {entry!r}: KEY=VALUE")

    bundle_config = read_bundle_config(vm)
    spec = build_spec(bundle_config, vm, command, user, workdir, env)
    vm_dir = state.vm_dir(name)
    bundle = prepare_vm_dir(vm_dir, vm, spec)

    if state.container_status(name) is not None:
        state.runc("delete", "--force", name)   # one exec at a time: a new one replaces the old
    before = {}

    def start(v):
        # What it goes back to; "running" only if an exec was replaced above.
        before["status"] = v.get("status") if v.get("status") in ("created", "stopped") else "stopped"
        v["status"] = "running"
        v["execs"] = v.get("execs", 0) + 1
    state.update(name, start)

    code = run_detached(config, state, vm, vm_dir, bundle)

    def finish(v):
        if v.get("status") == "running":    # unless a `stop` came meanwhile
            v["status"] = before.get("status", "created")
    state.update(name, finish)
    return 128 - code if code < 0 else code


def read_bundle_config(vm):
    """The proxy's config.json, beside the first shared path."""
    path = os.path.join(os.path.dirname(vm["mounts"][0]["source"]), "config.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(f"sbx test double: no OCI config.json beside the first shared path ({path}): {e}")


def build_spec(cfg, vm, command, user, workdir, env):
    """The runc config: confinement from config.json, the rest from argv."""
    cfg_process, cfg_linux = cfg.get("process", {}), cfg.get("linux", {})
    process = {k: cfg_process[k] for k in KEPT_PROCESS if k in cfg_process}
    process.update({"terminal": False, "args": list(command), "user": {"uid": user[0], "gid": user[1]},
                    "cwd": workdir, "env": list(env)})
    if vm.get("fsize") is not None:
        rlimits = [r for r in process.get("rlimits", []) if r.get("type") != "RLIMIT_FSIZE"]
        rlimits.append({"type": "RLIMIT_FSIZE", "hard": vm["fsize"], "soft": vm["fsize"]})
        process["rlimits"] = rlimits

    linux = {k: cfg_linux[k] for k in KEPT_LINUX if k in cfg_linux}
    if vm.get("network") != "none":     # a VM with a network: the host's, here
        linux["namespaces"] = [ns for ns in linux.get("namespaces", []) if ns.get("type") != "network"]
    resources = {}
    if "devices" in cfg_linux.get("resources", {}):
        resources["devices"] = cfg_linux["resources"]["devices"]
    if vm.get("memory") is not None:
        resources["memory"] = {"limit": vm["memory"], "swap": vm["memory"]}
    if vm.get("cpus") is not None:
        resources["cpu"] = {"quota": int(vm["cpus"] * 100000), "period": 100000}
    if vm.get("pids") is not None:
        resources["pids"] = {"limit": vm["pids"]}
    if resources:
        linux["resources"] = resources

    targets = {m["target"] for m in vm["mounts"]}
    mounts = [dict(m) for m in cfg.get("mounts", []) if m.get("destination") not in targets]
    if vm.get("network") != "none":
        mounts = [host_sysfs(m) if m.get("type") == "sysfs" else m for m in mounts]
    if vm.get("disk") is not None:
        set_tmp_size(mounts, vm["disk"])
    for m in vm["mounts"]:   # sources are rewritten to the VM dir's binds later
        mounts.append({"destination": m["target"], "type": "bind", "source": m["source"],
                       "options": SHARED_OPTIONS + (["ro"] if m["ro"] else ["rw"])})

    spec = {"ociVersion": cfg.get("ociVersion", "1.0.2"), "process": process,
            "root": {"path": vm["rootfs"], "readonly": bool(cfg.get("root", {}).get("readonly", False))},
            "mounts": mounts, "linux": linux}
    for key in ("hostname", "domainname"):
        if key in cfg:
            spec[key] = cfg[key]
    return spec


def host_sysfs(mount):
    """Inside a user namespace the kernel mounts a sysfs only for the owner of
    the current network namespace; on the host's network runc 1.1 fails
    there (EPERM), where runc 1.2 falls back to this read-only bind itself."""
    return {"destination": mount["destination"], "type": "bind", "source": "/sys",
            "options": ["rbind", "nosuid", "nodev", "noexec", "ro"]}


def set_tmp_size(mounts, size):
    """--disk-limit is the size of the VM's writable disk: the /tmp tmpfs."""
    for m in mounts:
        if m.get("destination") == "/tmp" and m.get("type") == "tmpfs":
            options = [o for o in m.get("options", []) if not o.startswith("size=")]
            m["options"] = options + [f"size={size}"]
            return
    raise Fail("sbx test double: config.json has no /tmp tmpfs to carry --disk-limit")


def prepare_vm_dir(vm_dir, vm, spec):
    """Empty mount points in the VM dir (rootfs, m0, m1, ...: a directory or a
    file, like the source) and bundle/config.json naming them.  Returns the
    bundle directory."""
    make_dir(vm_dir, 0o711)
    make_dir(os.path.join(vm_dir, "rootfs"), 0o755)
    spec["root"]["path"] = os.path.join(vm_dir, "rootfs")
    shared = spec["mounts"][len(spec["mounts"]) - len(vm["mounts"]):]
    for i, (m, entry) in enumerate(zip(vm["mounts"], shared)):
        point = os.path.join(vm_dir, f"m{i}")
        make_mount_point(point, os.path.isdir(m["source"]))
        entry["source"] = point
    bundle = os.path.join(vm_dir, "bundle")
    make_dir(bundle, 0o711)
    write_atomic(os.path.join(bundle, "config.json"), json.dumps(spec, indent=1) + "\n", 0o644)
    return bundle


def make_mount_point(point, is_dir):
    """An empty directory or file at point, replacing one of the other kind
    left by an earlier exec (nothing is ever mounted on it in this namespace)."""
    if os.path.lexists(point) and (os.path.isdir(point) and not os.path.islink(point)) != is_dir:
        if is_dir:
            os.unlink(point)
        else:
            os.rmdir(point)
    if is_dir:
        make_dir(point, 0o755)
    elif not os.path.lexists(point):
        os.close(os.open(point, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))


def run_detached(config, state, vm, vm_dir, bundle):
    """Runs the command as a detached runc container and returns its exit
    status (128 + N for a signal N).  Detached, so that the command's fds 0,
    1 and 2 are this process's own (what `sbx exec` was given: /dev/null
    under serve), not pipes that a foreground `runc run` would copy through.
    This process is a subreaper, so the container's init, left by
    `runc create`, becomes its child, and waitpid gives its status."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    pid_file = os.path.join(vm_dir, "init.pid")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(pid_file)
    child = os.fork()
    if child == 0:
        create_in_private_namespace(config, state, vm, vm_dir, bundle, pid_file)   # never returns
    # Ctrl-C reaches the command too: wait for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise Fail(f"sandbox {vm['name']}: runc create failed")
    with open(pid_file) as f:
        init = int(f.read().strip())
    try:
        r = state.runc("start", vm["name"])
        if r.returncode != 0:
            raise Fail(f"sandbox {vm['name']}: runc start: {r.stderr.strip()}")
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == init:
                break
        code = os.waitstatus_to_exitcode(status)
    finally:
        state.runc("delete", "--force", vm["name"])
    return code


def create_in_private_namespace(config, state, vm, vm_dir, bundle, pid_file):
    """The exec child: binds the rootfs and the shared paths into the VM dir in
    a mount namespace of its own (so nothing stays mounted on the host and rm
    finds nothing there; the container's own namespace is a copy of this one),
    then runs `runc create` and exits with its status."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
        bind(libc, vm["rootfs"], os.path.join(vm_dir, "rootfs"), True)
        for i, m in enumerate(vm["mounts"]):
            bind(libc, m["source"], os.path.join(vm_dir, f"m{i}"), m["ro"])
        # Python ignores SIGPIPE and SIGXFSZ; the command must get the defaults
        # (SIGXFSZ is how RLIMIT_FSIZE kills), and ignored signals survive exec.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        runc = config["runc"]
        r = subprocess.run([runc, "--root", state.runc_root, "create", "--bundle", bundle, "--pid-file", pid_file,
                            vm["name"]])
        os._exit(r.returncode)
    except BaseException as e:   # noqa: B036 - a forked child must never return into the parent's code
        sys.stderr.write(f"Error: sbx test double: exec setup failed: {e}\n")
        sys.stderr.flush()
        os._exit(1)


def bind(libc, source, target, readonly):
    check(libc.mount(source.encode(), target.encode(), None, MS_BIND, None), f"binding {source}")
    if readonly:    # a bind ignores MS_RDONLY: it takes a remount
        check(libc.mount(None, target.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None),
              f"making {target} read-only")


def check(result, what):
    import ctypes
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def cmd_stop(config, values, positionals):
    state = State(config)
    if not positionals:
        raise Fail("stop needs a SANDBOX")
    for name in positionals:
        state.load(name)
    for name in positionals:
        if config["mode"] == "unstoppable":
            raise Fail(f"sandbox {name} did not stop")
        stop_container(state, name)
        state.update(name, lambda v: v.update(status="stopped"))
    return 0


def stop_container(state, name):
    r = state.runc("kill", name, "KILL")
    if r.returncode != 0 and "not running" not in r.stderr and "does not exist" not in r.stderr:
        raise Fail(f"sandbox {name}: runc kill: {r.stderr.strip()}")
    r = state.runc("delete", "--force", name)
    # The exec process deletes the container itself once it died, and may
    # race this delete: what matters is that none is left.
    if r.returncode != 0 and state.container_status(name) is not None:
        raise Fail(f"sandbox {name}: runc delete: {r.stderr.strip()}")


def cmd_rm(config, values, positionals):
    state = State(config)
    if not positionals:
        raise Fail("rm needs a SANDBOX")
    for name in positionals:
        vm = state.load(name)
        status = state.container_status(name)
        if status not in (None, "stopped") or (config["mode"] == "unstoppable" and vm.get("execs", 0) > 0):
            raise Fail(f"sandbox {name} is running")
        if status == "stopped":
            state.runc("delete", "--force", name)
        remove_vm(state, name)
    return 0


def remove_vm(state, name):
    """Never rm -r across a mount: the binds live in the exec child's
    namespace, so normally nothing is mounted here; if something is, refuse."""
    import shutil
    vm_dir = os.path.realpath(state.vm_dir(name))
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    busy = [p for p in points if p == vm_dir or p.startswith(vm_dir + "/")]
    if os.path.isdir(vm_dir):
        busy += [e.path for e in os.scandir(vm_dir) if os.path.ismount(e.path)]
    if busy or os.path.ismount(vm_dir):
        raise Fail(f"sandbox {name}: something is still mounted in {vm_dir}: {busy}")
    with state.lock():
        try:
            os.unlink(state.vm_json(name))
        except FileNotFoundError:
            pass
        if os.path.lexists(vm_dir):
            shutil.rmtree(vm_dir)


HANDLERS = {"version": cmd_version, "ls": cmd_ls, "create": cmd_create, "exec": cmd_exec, "stop": cmd_stop,
            "rm": cmd_rm}


def main(args):
    config = load_double_config()
    log_invocation(config)
    mode = config["mode"]
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(help_text(None, mode))
        return 0
    command, rest = args[0], args[1:]
    if command.startswith("-"):
        raise Fail(f"unknown flag: {command.split('=')[0]}" if command.startswith("--")
                   else f"unknown shorthand flag: '{command[1:2]}' in {command}")
    if command not in HANDLERS:
        raise Fail(f"unknown command \"{command}\" for \"sbx\"")
    values, positionals = parse_flags(rest, command_flags(command, mode), COMMANDS[command][2])
    if values.get("help"):
        sys.stdout.write(help_text(command, mode))
        return 0
    if mode == "unauthenticated" and command != "version":
        raise Fail("not signed in: run 'sbx login'")
    if mode == "hanging-create" and command == "create":
        while True:     # the caller's timeout must kill it
            time.sleep(3600)
    return HANDLERS[command](config, values, positionals)


def run(args):
    """What `sbx ARGS` exits with (the launcher `sbx` calls it)."""
    try:
        return main(args)
    except (Fail, OSError) as e:     # OSError: the state or a path went wrong under us
        sys.stderr.write(f"Error: {e}\n")
        return 1
