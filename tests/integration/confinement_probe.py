# The confinement self-check, run as a probe inside the sandbox.  It checks
# its own confinement from inside and writes one JSON object to /probe/out:
# {"check name": {"ok": bool, "detail": str}, ...}.  The runner prepends the
# two HOST_* port lines and asserts every check.  Standard library only.
import ctypes
import errno
import importlib.util
import json
import os
import re
import socket

results = {}


def check(name):
    def wrap(fn):
        try:
            ok, detail = fn()
        except Exception as e:  # a crash is a failed check, with the reason
            ok, detail = False, f"{type(e).__name__}: {e}"
        results[name] = {"ok": bool(ok), "detail": str(detail)[:300]}
        return fn
    return wrap


def status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


@check("uid_gid_65534")
def _():
    ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())
    return ids == (65534,) * 4 and os.getgroups() == [], f"ids {ids} groups {os.getgroups()}"


for capset in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
    @check(f"{capset}_zero")
    def _(capset=capset):
        value = status()[capset]
        return int(value, 16) == 0, value


@check("no_new_privs")
def _():
    return status()["NoNewPrivs"] == "1", status()["NoNewPrivs"]


@check("seccomp_filter_mode")
def _():
    return status()["Seccomp"] == "2", status()["Seccomp"]


@check("root_read_only")
def _():
    flags = os.statvfs("/").f_flag
    try:
        open("/sp-write-test", "w").close()
        return False, "created /sp-write-test"
    except OSError as e:
        return bool(flags & os.ST_RDONLY) and e.errno == errno.EROFS, f"statvfs flags {flags:#x}, {e}"


@check("only_loopback_interface")
def _():
    names = sorted(os.listdir("/sys/class/net"))
    with open("/proc/net/dev") as f:
        dev = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    return names == ["lo"] and dev == ["lo"], f"sysfs {names} procfs {dev}"


@check("no_routes")
def _():
    with open("/proc/net/route") as f:
        v4 = f.readlines()[1:]
    with open("/proc/net/ipv6_route") as f:
        v6 = [line for line in f if line.split()[-1] != "lo"]
    return not v4 and not v6, f"ipv4 {v4} ipv6 off-lo {v6}"


def host_port_visible(table, port):
    with open(table) as f:
        return any(line.split()[1].endswith(f":{port:04X}") for line in f.readlines()[1:])


@check("host_tcp_listener_unreachable")
def _():
    if host_port_visible("/proc/net/tcp", HOST_TCP_PORT):
        return False, "the host's listening socket is in this network namespace"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(("127.0.0.1", HOST_TCP_PORT))
        return False, "connected"
    except OSError as e:
        return True, f"{e}"


@check("host_udp_listener_unreachable")
def _():
    if host_port_visible("/proc/net/udp", HOST_UDP_PORT):
        return False, "the host's UDP socket is in this network namespace"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"probe", ("127.0.0.1", HOST_UDP_PORT))
        return False, "sent"
    except OSError as e:
        return True, f"{e}"


@check("inet_sockets_denied")
def _():
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
        try:
            socket.socket(family, socket.SOCK_DGRAM).close()
            return False, f"family {family} allowed"
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EACCES):
                return False, f"family {family}: {e}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM):
        pass
    return True, "only AF_UNIX"


@check("repo_writable")
def _():
    path = "/probe/repo/.sp-selfcheck"
    with open(path, "w") as f:
        f.write("x")
    with open(path) as f:
        ok = f.read() == "x"
    os.unlink(path)
    return ok and os.getcwd() == "/probe/repo", os.getcwd()


@check("script_not_writable")
def _():
    try:
        open("/probe/probe.py", "r+b").close()
        return False, "opened for writing"
    except OSError as e:
        read_only_mount = bool(os.statvfs("/probe/probe.py").f_flag & os.ST_RDONLY)
        return read_only_mount and not os.access("/probe/probe.py", os.W_OK), f"ro mount {read_only_mount}: {e}"


@check("out_is_writable_regular_file")
def _():
    import stat
    st = os.lstat("/probe/out")
    return stat.S_ISREG(st.st_mode) and os.access("/probe/out", os.W_OK), oct(st.st_mode)


@check("no_shell")
def _():
    shells = {"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox", "csh", "tcsh"}
    found = []
    for top in ("/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/var", "/opt"):
        for dirpath, dirnames, filenames in os.walk(top):
            found += [os.path.join(dirpath, n) for n in filenames + dirnames if n in shells]
    return not found and not os.path.lexists("/bin/sh"), found


@check("no_pip")
def _():
    specs = {m: importlib.util.find_spec(m) for m in ("pip", "ensurepip", "setuptools")}
    # pip, pip3, pip3.11, pip-23.0.dist-info; not the stdlib's pipes.py.
    pip_name = re.compile(r"pip(\d[\d.]*)?(-.*)?$")
    found = [os.path.join(d, n) for d, ds, fs in os.walk("/usr") for n in fs + ds if pip_name.match(n)]
    return all(s is None for s in specs.values()) and not found, f"{specs} {found[:5]}"


libc = ctypes.CDLL(None, use_errno=True)


def fails(call, *args):
    ctypes.set_errno(0)
    ret = call(*args)
    return ret == -1, f"returned {ret}, errno {ctypes.get_errno()}"


@check("mount_fails")
def _():
    return fails(libc.mount, b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None)


@check("unshare_fails")
def _():
    CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
    return all(fails(libc.unshare, flag)[0] for flag in (CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET)), "all three"


@check("ptrace_fails")
def _():
    PTRACE_TRACEME = 0
    return fails(libc.ptrace, PTRACE_TRACEME, 0, None, None)


MASKED_FILES = ["/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                "/proc/sched_debug"]
MASKED_DIRS = ["/proc/acpi", "/proc/asound", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"]


@check("masked_paths_read_empty")
def _():
    seen = []
    for path in MASKED_FILES:
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read(64)
            if data:
                return False, f"{path} reads {data[:16]!r}"
            seen.append(path)
    for path in MASKED_DIRS:
        if os.path.exists(path):
            if os.listdir(path):
                return False, f"{path} lists {os.listdir(path)[:5]}"
            seen.append(path)
    return len(seen) >= 3, f"empty: {seen}"


@check("proc_sys_read_only")
def _():
    try:
        with open("/proc/sys/kernel/hostname", "w") as f:
            f.write("escaped")
        return False, "wrote /proc/sys/kernel/hostname"
    except OSError as e:
        return True, f"{e}"


with open("/probe/out", "w") as f:
    json.dump(results, f)
