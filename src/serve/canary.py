# The confinement canary (src/serve/invocation.c, sp_serve_canary): the
# proxy's own probe, run through the same path as any request before serve
# is ready.  It answers CONFINED only when it sees, from inside, every
# property docs/runtimes.md lists, and KERNEL-MISMATCH when the kernel it
# runs on is not the one the backend promises (a runc renamed runsc is
# refused, never used).  serve prepends EXPECT_GVISOR, EXPECT_VM, NO_USER_NS
# and PROBE_IDS for its backend.  Embedded into the proxy at build time
# (src/embed.py), so an installed proxy cannot run an edited copy.
import os
GVISOR_VERSION = 'Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n'
def status():
    out = {}
    for line in open('/proc/self/status'):
        k, _, v = line.partition(':')
        out[k] = v.strip()
    return out
def root_mount():
    for line in open('/proc/self/mounts'):
        f = line.split()
        if f[1] == '/':
            return f[2], f[3].split(',')
    return None, []
def kernel_is_gvisor():
    return (open('/proc/version').read() == GVISOR_VERSION
            and os.path.exists('/proc/sentry-meminfo')
            and root_mount()[0] == '9p')
def kernel_is_host():
    return (open('/proc/version').read() != GVISOR_VERSION
            and not os.path.exists('/proc/sentry-meminfo'))
# gVisor shows no NoNewPrivs line, and the profile refuses prctl, so it
# cannot be read there; the bundle sets it, and the verified rootfs holds
# no setuid or setgid file it would guard against (docs/runtimes.md).
def no_new_privs(st):
    if EXPECT_GVISOR and 'NoNewPrivs' not in st:
        return True
    return st.get('NoNewPrivs') == '1'
# clone3 must answer ENOSYS, whoever answers it: the profile under runc, the
# sentry under gVisor, where the profile lets it through (docs/seccomp.md).
def clone3_enosys():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(435, 0, 0) == -1 and ctypes.get_errno() == 38
# The probe is the sandbox's init; in a microVM, `sbx exec` starts it
# beside the VM's own init, and nothing else may run there.
def alone():
    if os.getpid() == 1:
        return True
    pids = {int(p) for p in os.listdir('/proc') if p.isdigit()}
    return EXPECT_VM and pids <= {1, os.getpid()}
# On the host's kernel (runc, docker) the probe gets what the bundle
# gives and nothing else (docs/runtimes.md): every bind nosuid, nodev
# and noexec, the script read-only and not mappable PROT_EXEC; no
# /dev/shm, /dev/pts, openable /dev/ptmx or /dev/mqueue; no cgroup
# hierarchy; no variable beyond the bundle's three; no group but its
# own gid (Docker adds that one: a named gap).
def exactly_the_bundle():
    import mmap
    flags = os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC
    for path in ('/probe/repo', '/probe/probe.py', '/probe/out'):
        if os.statvfs(path).f_flag & flags != flags:
            return False
    if not os.statvfs('/probe/probe.py').f_flag & os.ST_RDONLY:
        return False
    with open('/probe/probe.py', 'rb') as f:
        try:
            mmap.mmap(f.fileno(), 1, prot=mmap.PROT_READ | mmap.PROT_EXEC).close()
            return False
        except PermissionError:
            pass
    for path in ('/dev/shm', '/dev/pts', '/dev/mqueue'):
        if os.path.lexists(path):
            return False
    try:
        os.close(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
        return False
    except OSError:
        pass
    if os.path.isdir('/sys/fs/cgroup') and os.listdir('/sys/fs/cgroup'):
        return False
    if not set(os.environ) <= {'PATH', 'LANG', 'HOME'}:
        return False
    return set(os.getgroups()) <= {os.getgid()}
def confined():
    st = status()
    uid = os.getuid()
    if not PROBE_IDS[0] <= uid < PROBE_IDS[1] or os.getgid() != uid or os.geteuid() != uid:
        return False
    for cap in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd'):
        if int(st.get(cap, 'f'), 16) != 0:
            return False
    # gVisor shows no CapAmb line: ambient is a subset of permitted and
    # inheritable, both empty above.
    if int(st.get('CapAmb', '0' if EXPECT_GVISOR else 'f'), 16) != 0:
        return False
    if not no_new_privs(st) or st.get('Seccomp') != '2':
        return False
    if not alone() or not clone3_enosys():
        return False
    ifaces = [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]
    if ifaces != ['lo']:
        return False
    if len(open('/proc/net/route').read().splitlines()) > 1:
        return False
    # gVisor's statvfs does not report ST_RDONLY; its mount table does.
    if EXPECT_GVISOR:
        if 'ro' not in root_mount()[1]:
            return False
    elif not os.statvfs('/').f_flag & os.ST_RDONLY:
        return False
    # A loginuid the probe could set once would write an id into the host's
    # audit trail: the runtime must hand it a set one.  serve pins its own,
    # which runc's sandboxes inherit (and a user namespace shows it unmapped,
    # as unset); a Docker daemon must run with one, and without a user
    # namespace it reads as it is.
    if NO_USER_NS and open('/proc/self/loginuid').read() == '4294967295':
        return False
    # No host-wide state (docs/threat-model.md): /proc/sys and /sys are
    # empty, whichever way the runtime hid them, and sysinfo is refused.
    # A microVM's are its own kernel's, one per sandbox.
    if not EXPECT_VM and (os.listdir('/proc/sys') or os.listdir('/sys')):
        return False
    import ctypes
    if not EXPECT_VM and ctypes.CDLL(None).syscall(99, ctypes.create_string_buffer(256)) != -1:
        return False
    if os.access('/probe/probe.py', os.W_OK):
        return False
    if not (EXPECT_GVISOR or EXPECT_VM) and not exactly_the_bundle():
        return False
    probe = os.path.join('/probe/repo', '.sealed-probe-canary')
    with open(probe, 'w') as f:
        f.write('x')
    os.unlink(probe)
    return True
if not (kernel_is_gvisor() if EXPECT_GVISOR else kernel_is_host()):
    answer = 'KERNEL-MISMATCH'
else:
    answer = 'CONFINED' if confined() else 'UNCONFINED'
open('/probe/out', 'w').write('{"result":"%s"}' % answer)
