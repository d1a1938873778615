"""The confinement self-check: a dry-run bundle run by hand under the test's
backend (runc, runsc; the command line is the bundle's runtime-commands.json),
whose probe reports its own confinement from inside (confinement_probe.py).
The test asserts each reported check by name, so a missing check fails too;
a check that cannot be made from inside on a backend is a SKIP with its
reason, and only the checks NOT_APPLICABLE lists for that backend may be.

The runtime runs in a UTS namespace the test makes, whose NIS domain name is
a secret.  The machine's own domain name is never touched."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, cached_rootfs, env_path, require_root_and, unmount_under  # noqa: E402

EXPECTED = [
    "uid_gid_65534", "CapEff_zero", "CapPrm_zero", "CapBnd_zero", "CapInh_zero", "CapAmb_zero", "no_new_privs",
    "seccomp_filter_mode", "root_read_only", "only_loopback_interface", "no_routes",
    "host_tcp_listener_unreachable", "host_udp_listener_unreachable", "inet_sockets_denied", "repo_writable",
    "script_not_writable", "out_is_writable_regular_file", "no_shell", "no_pip", "mount_fails", "unshare_fails",
    "ptrace_fails", "masked_paths_read_empty", "proc_sys_read_only", "host_facts_masked", "stdlib_host_queries_work",
    "syscalls_442_to_450_eperm", "syscalls_451_to_453_enosys_from_runc", "rename_whiteout_refused",
    "no_writable_executable_memory", "no_executable_mapping_from_writable_mounts", "sendfile_refused_copy_falls_back",
    "loginuid_not_settable", "host_state_allowlist", "sysinfo_refused", "no_tun_pty_shm_mqueue", "no_fuse_device",
    "proc_sys_knobs_refuse_writes",
]
# The checks a backend cannot make from inside, each with its reason in the
# probe's report: those are SKIP lines there, and anywhere else a failure.
NOT_APPLICABLE = {
    "runc": set(),
    # no_new_privs cannot be read inside gVisor; noexec is not checked by
    # gVisor 2022 for executable file mappings (docs/runtimes.md names both).
    # /dev/fuse: runsc 2022 always makes it (docs/runtimes.md, "gVisor's named gaps").
    "gvisor": {"no_new_privs", "no_executable_mapping_from_writable_mounts", "no_fuse_device"},
}
SECRET_DOMAIN = "host-secret-domain"

PROXY = env_path("SP_PROXY")
B = backend()
require_root_and("unshare")
ROOTFS = cached_rootfs()
tap = Tap()
work = tempfile.mkdtemp(prefix="sp-confinement-")
os.chmod(work, 0o711)  # the sandbox's user-namespace root walks down to its bundle
state = os.path.join(work, f"{B.state_subdir}-state")
container = f"sp-selfcheck-{os.getpid()}"

# Listeners on the host's loopback: the probe must not reach them.
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.bind(("127.0.0.1", 0))
tcp.listen(8)
tcp.setblocking(False)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
udp.setblocking(False)



def host_facts():
    """The host's own values of the facts a sandbox must not show (gVisor
    shows its own instead: confinement_probe.sentry_fact_not_the_hosts)."""
    def read(path):
        with open(path) as f:
            return f.read()
    stat = read("/proc/stat")
    return {
        "cmdline": read("/proc/cmdline").strip(),
        "boot_id": read("/proc/sys/kernel/random/boot_id").strip(),
        "uptime": float(read("/proc/uptime").split()[0]),
        "mem_total_kb": next(ln.split()[1] for ln in read("/proc/meminfo").splitlines() if ln.startswith("MemTotal:")),
        "btime": int(next(ln.split()[1] for ln in stat.splitlines() if ln.startswith("btime "))),
    }


here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "confinement_probe.py")) as f:
    probe = (f"HOST_TCP_PORT = {tcp.getsockname()[1]}\nHOST_UDP_PORT = {udp.getsockname()[1]}\n"
             f"RUNS_ON_SENTRY = {B.runs_on_sentry!r}\nUSER_NAMESPACE = {B.user_namespace!r}\n"
             f"HOST_FACTS = {host_facts()!r}\n" + f.read())
script = os.path.join(work, "probe.py")
with open(script, "w") as f:
    f.write(probe)
config = os.path.join(work, "config.json")
with open(config, "w") as f:
    json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["acme/widgets"], "runtime": B.runtime}}, f)

bundle = os.path.join(work, "bundle")
r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/widgets", "--script", script,
                    "--out", bundle, "--rootfs", ROOTFS, *B.proxy_args()], capture_output=True, text=True,
                   stdin=subprocess.DEVNULL)
if not tap.ok(r.returncode == 0, "the dry-run bundle is written", r.stderr):
    tap.finish()



def run_in_secret_domain(bundle_dir, name, what):
    """The runtime's `run`, from a new UTS namespace whose domain name is
    SECRET_DOMAIN (the domain name itself is serve's to pin:
    test_serve_identity.py)."""
    # The loginuid is set first, as serve sets its own (src/serve/detach.c).
    shell = (f'echo {SECRET_DOMAIN} > /proc/sys/kernel/domainname && echo 0 > /proc/self/loginuid && '
             'exec "$@"')
    try:
        run = subprocess.run(["unshare", "--uts", "sh", "-c", shell, "sh", *B.run_argv(state, bundle_dir, name)],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        tap.ok(run.returncode == 0, what, run.stdout + run.stderr)
    except subprocess.TimeoutExpired:
        tap.ok(False, what, "timed out after 120 s")
    finally:
        subprocess.run(B.delete_argv(state, name, bundle_dir), capture_output=True)


with open(os.path.join(bundle, "config.json")) as f:
    bundle_config = json.load(f)
run_in_secret_domain(bundle, container, f"{B.binary_name} runs the bundle and the probe exits 0")

try:
    with open(os.path.join(bundle, "out")) as f:
        report = json.load(f)
except (OSError, ValueError) as e:
    report = {}
    tap.ok(False, "the probe wrote its report to /probe/out", e)

for name in EXPECTED:
    entry = report.get(name)
    if entry is not None and entry.get("not_applicable") and name in NOT_APPLICABLE[B.name]:
        B.not_applicable(tap, f"inside the sandbox: {name}", entry["not_applicable"])
        continue
    tap.ok(entry is not None and entry.get("ok") is True, f"inside the sandbox: {name}",
           (entry.get("not_applicable") or entry["detail"]) if entry else "the probe did not report this check")
tap.ok(set(report) <= set(EXPECTED), "the probe reports no check the test does not assert",
       set(report) - set(EXPECTED))


try:
    conn, _ = tcp.accept()
    conn.close()
    tcp_quiet = False
except BlockingIOError:
    tcp_quiet = True
try:
    udp.recvfrom(64)
    udp_quiet = False
except BlockingIOError:
    udp_quiet = True
tap.ok(tcp_quiet and udp_quiet, "the host's loopback listeners received nothing")

unmount_under(work)
shutil.rmtree(work, ignore_errors=True)
tap.finish()
