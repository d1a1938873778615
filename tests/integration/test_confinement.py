"""The confinement self-check: a dry-run bundle run under real runc, whose
probe reports its own confinement from inside (confinement_probe.py).  The
test asserts each reported check by name, so a missing check fails too.

runc runs in a UTS namespace the test makes, whose NIS domain name is a
secret: the probe must see the bundle's fixed one, and a control bundle
without it sees the secret.  The machine's own domain name is never touched."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, cached_rootfs, env_path, require_root_and, unmount_under  # noqa: E402

EXPECTED = [
    "uid_gid_65534", "CapEff_zero", "CapPrm_zero", "CapBnd_zero", "CapInh_zero", "CapAmb_zero", "no_new_privs",
    "seccomp_filter_mode", "root_read_only", "only_loopback_interface", "no_routes",
    "host_tcp_listener_unreachable", "host_udp_listener_unreachable", "inet_sockets_denied", "repo_writable",
    "script_not_writable", "out_is_writable_regular_file", "no_shell", "no_pip", "mount_fails", "unshare_fails",
    "ptrace_fails", "masked_paths_read_empty", "proc_sys_read_only", "host_facts_masked", "stdlib_host_queries_work",
    "domainname_fixed", "syscalls_442_to_450_eperm", "syscalls_451_to_453_enosys_from_runc", "rename_whiteout_refused",
    "no_writable_executable_memory", "no_executable_mapping_from_writable_mounts", "sendfile_refused_copy_falls_back",
]
# Asserted only once the bundle has a user namespace (issue 12 item 1); until
# then they are reported as skips, with what the probe saw.
NEEDS_USER_NAMESPACE = ["loginuid_not_spoofable_needs_user_namespace"]
SECRET_DOMAIN = "host-secret-domain"

PROXY = env_path("SP_PROXY")
require_root_and("runc", "unshare")
ROOTFS = cached_rootfs()
tap = Tap()
work = tempfile.mkdtemp(prefix="sp-confinement-")
os.chmod(work, 0o711)  # the sandbox's user-namespace root walks down to its bundle
state = os.path.join(work, "runc-state")
container = f"sp-selfcheck-{os.getpid()}"

# Listeners on the host's loopback: the probe must not reach them.
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.bind(("127.0.0.1", 0))
tcp.listen(8)
tcp.setblocking(False)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
udp.setblocking(False)

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "confinement_probe.py")) as f:
    probe = f"HOST_TCP_PORT = {tcp.getsockname()[1]}\nHOST_UDP_PORT = {udp.getsockname()[1]}\n" + f.read()
script = os.path.join(work, "probe.py")
with open(script, "w") as f:
    f.write(probe)
config = os.path.join(work, "config.json")
with open(config, "w") as f:
    json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["acme/widgets"], "runtime": "runc"}}, f)

bundle = os.path.join(work, "bundle")
r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/widgets", "--script", script,
                    "--out", bundle, "--rootfs", ROOTFS], capture_output=True, text=True, stdin=subprocess.DEVNULL)
if not tap.ok(r.returncode == 0, "the dry-run bundle is written", r.stderr):
    tap.finish()



def run_in_secret_domain(bundle_dir, name, what):
    """runc run, from a new UTS namespace whose domain name is SECRET_DOMAIN."""
    shell = f'echo {SECRET_DOMAIN} > /proc/sys/kernel/domainname && exec runc --root "$1" run --bundle "$2" "$3"'
    try:
        run = subprocess.run(["unshare", "--uts", "sh", "-c", shell, "sh", state, bundle_dir, name],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        tap.ok(run.returncode == 0, what, run.stdout + run.stderr)
    except subprocess.TimeoutExpired:
        tap.ok(False, what, "timed out after 120 s")
    finally:
        subprocess.run(["runc", "--root", state, "delete", "--force", name], capture_output=True)


with open(os.path.join(bundle, "config.json")) as f:
    bundle_config = json.load(f)
has_user_namespace = any(n.get("type") == "user" for n in bundle_config["linux"]["namespaces"])
run_in_secret_domain(bundle, container, "runc runs the bundle and the probe exits 0")

try:
    with open(os.path.join(bundle, "out")) as f:
        report = json.load(f)
except (OSError, ValueError) as e:
    report = {}
    tap.ok(False, "the probe wrote its report to /probe/out", e)

for name in EXPECTED:
    entry = report.get(name)
    tap.ok(entry is not None and entry.get("ok") is True, f"inside the sandbox: {name}",
           entry["detail"] if entry else "the probe did not report this check")
for name in NEEDS_USER_NAMESPACE:
    entry = report.get(name)
    if has_user_namespace or entry is None:
        tap.ok(entry is not None and entry.get("ok") is True, f"inside the sandbox: {name}",
               entry["detail"] if entry else "the probe did not report this check")
    else:
        tap.n += 1
        print(f"ok {tap.n} - inside the sandbox: {name} # SKIP needs the bundle's user namespace (issue 12 item 1);"
              f" today ok={entry.get('ok')}: {entry.get('detail')}", flush=True)
tap.ok(set(report) <= set(EXPECTED + NEEDS_USER_NAMESPACE), "the probe reports no check the test does not assert",
       set(report) - set(EXPECTED + NEEDS_USER_NAMESPACE))

# The control: the same bundle without domainname (and its sysctl) shows the
# domain name of the UTS namespace runc ran in, so the check above has teeth.
control = os.path.join(work, "control")
with open(os.path.join(work, "domain.py"), "w") as f:
    f.write("open('/probe/out', 'w').write(open('/proc/sys/kernel/domainname').read().strip())\n")
r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/widgets", "--script",
                    os.path.join(work, "domain.py"), "--out", control, "--rootfs", ROOTFS],
                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
tap.ok(r.returncode == 0, "the control bundle is written", r.stderr)
with open(os.path.join(control, "config.json")) as f:
    c = json.load(f)
tap.ok(c.get("domainname") == "(none)" and c["linux"].get("sysctl") == {"kernel.domainname": "(none)"},
       "the control starts from the same fixed domain name", c.get("domainname"))
del c["domainname"]
del c["linux"]["sysctl"]
with open(os.path.join(control, "config.json"), "w") as f:
    json.dump(c, f)
run_in_secret_domain(control, container + "-control", "runc runs the control bundle")
with open(os.path.join(control, "out")) as f:
    seen = f.read()
tap.ok(seen == SECRET_DOMAIN, "control: without the fixed domain name the probe sees the host's", seen)

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
