"""A systemd to start the units under for real: the host's own when it is
PID 1, else one booted for the test by systemd-nspawn on this host's /usr
(a volatile root: nothing of it outlives the test).  run() runs a command in
that systemd's namespaces, as its services see them.

The container is made to look like a host to the runtimes, and only in its
own namespaces: its cgroup file systems, which nspawn mounts read-only, are
made writable (runc and runsc make cgroups), and the two files nspawn mounts
over /proc (kmsg, boot_id) are unmounted."""

import os
import shutil
import signal
import subprocess
import time


def pid1_comm():
    with open("/proc/1/comm") as f:
        return f.read().strip()


def why_not():
    """None when units can be started here, else the reason why not."""
    comm = pid1_comm()
    if comm == "systemd":
        return None
    if shutil.which("systemd-nspawn") is None:
        return (f"systemd is not PID 1 here (PID 1 is {comm}), and systemd-nspawn (Debian: systemd-container) "
                "is not installed to boot one")
    if os.environ.get("SP_SYSTEMD_NSPAWN") == "0":
        return f"systemd is not PID 1 here (PID 1 is {comm}), and SP_SYSTEMD_NSPAWN=0 forbids booting one"
    return None


class Systemd:
    """binds: host directories the container must see (the build directory)."""

    def __init__(self, binds):
        self.nspawn = None
        self.leader = None
        self.log = None
        if pid1_comm() == "systemd":
            self.kind = "host"
            return
        self.kind = "nspawn"
        self.log = open(os.path.join(binds[0], f"nspawn-{os.getpid()}.log"), "w+")
        argv = ["systemd-nspawn", "--register=no", "--keep-unit", "-D", "/", "--volatile=yes",
                "-M", f"sp-units-{os.getpid()}", "--capability=all", "--console=passive"]
        argv += [f"--bind={b}" for b in binds]
        # No first-boot questions; and nothing in it manages a network, so
        # waiting for one to come online would only hold the boot up.
        argv += ["-b", "systemd.firstboot=off", "systemd.mask=systemd-networkd-wait-online.service"]
        env = dict(os.environ, SYSTEMD_NSPAWN_API_VFS_WRITABLE="1", SYSTEMD_SECCOMP="0")
        self.nspawn = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True)
        try:
            self._boot()
        except BaseException:
            # A container that did not come up goes at once, not at exit.
            self.close()
            raise

    def _boot(self):
        deadline = time.monotonic() + 90
        while self.leader is None and time.monotonic() < deadline and self.nspawn.poll() is None:
            time.sleep(0.2)
            self.leader = self._child_systemd()
        while self.leader and time.monotonic() < deadline:
            state = self.run(["systemctl", "is-system-running"]).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the container's systemd did not come up: {self.log_tail()}")
        fix = ("for c in /sys/fs/cgroup /sys/fs/cgroup/*; do mount -o remount,bind,rw $c || exit 1; done; "
               "for f in /proc/kmsg /proc/sys/kernel/random/boot_id; do "
               "if mountpoint -q $f; then umount $f || exit 1; fi; done")
        r = self.run(["sh", "-c", fix])
        if r.returncode != 0:
            raise RuntimeError(f"could not make the container host-like: {r.stderr}")

    def _child_systemd(self):
        try:
            children = open(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children").read().split()
        except OSError:
            return None
        for pid in children:
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "systemd":
                    return int(pid)
            except OSError:
                pass
        return None

    def log_tail(self):
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read()[-2000:]

    def describe(self):
        if self.kind == "host":
            return "the host's systemd (PID 1)"
        return f"a systemd booted by systemd-nspawn on this host's /usr (PID 1 here is {pid1_comm()})"

    def run(self, argv, input=None, timeout=300):
        prefix = [] if self.kind == "host" else ["nsenter", "-t", str(self.leader), "-a"]
        return subprocess.run(prefix + argv, input=input, capture_output=True, text=True, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def sh(self, script, timeout=300):
        return self.run(["sh", "-c", script], timeout=timeout)

    def close(self):
        if self.nspawn is None:
            return
        if self.nspawn.poll() is None:
            # nspawn halts its container on SIGTERM (the container's systemd
            # would take one of its own as a request to re-execute).
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout=60)
            except subprocess.TimeoutExpired:
                if self.leader:
                    os.kill(self.leader, signal.SIGKILL)
                self.nspawn.kill()
                self.nspawn.wait()
        self.log.close()
        os.unlink(self.log.name)
        self.nspawn = None
