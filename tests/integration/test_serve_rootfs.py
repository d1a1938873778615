"""The rootfs cannot change under a running serve (docs/rootfs.md, "What is
verified when"): serve runs every probe from a private, read-only copy of the
rootfs that it verified at preflight, so a file added to the host's rootfs
directory, or an edit to one already there, after start is seen by no probe.
The copy's host path shows nowhere in the sandbox's mountinfo, and the copy
goes with serve.  Under docker and sbx the copy is mounted in the host's mount
namespace, under the root-only state directory, by design."""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-rootfs-")
YES, NO = S.answer("YES"), S.answer("NO")
MODULE = "usr/lib/python3.11/json/__init__.py"


def reads(path, needle=None):
    """A probe: YES when path exists (and holds needle, when given)."""
    return f"""import json, os
found = os.path.exists({path!r})
if found and {needle!r} is not None:
    with open({path!r}) as f:
        found = {needle!r} in f.read()
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if found else "NO"}}, f)
"""


srv = None
try:
    # A rootfs of this test's own: the test changes it under serve.
    rootfs = work.path("rootfs")
    subprocess.run(["cp", "-a", work.rootfs, rootfs], check=True)
    clone = work.make_clone("app", {"README.md": b"app\n"})
    config = work.write_config(["acme/app"])
    state = work.staged_state(config, [("acme/app", clone)])
    srv = S.Serve(work, config, state, rootfs=rootfs)
    srv.start()

    tap.ok(srv.probe(reads("/usr/bin/python3.11"), "acme/app") == YES,
           "control: the probe sees a file the rootfs had at start")
    tap.ok(srv.probe(reads("/" + MODULE, "JSONDecoder"), "acme/app") == YES,
           "control: the probe reads a stdlib module's text as it was at start")

    # Change the host's rootfs directory the way root on the host could.
    root = os.path.join(rootfs, "root")
    os.chmod(root, 0o755)
    with open(os.path.join(root, "ADDED-AFTER-START"), "w") as f:
        f.write("added\n")
    os.chmod(os.path.join(root, "ADDED-AFTER-START"), 0o444)
    module = os.path.join(root, MODULE)
    os.chmod(module, 0o644)
    with open(module, "a") as f:
        f.write("\n# ROOTFS-TAMPER-CANARY\n")
    os.chmod(module, 0o444)
    os.chmod(root, 0o555)
    script = work.path("probe.py")
    with open(script, "w") as f:
        f.write(reads("/ADDED-AFTER-START"))
    dry = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/app", "--script",
                          script, "--out", work.path("bundle"), "--rootfs", rootfs, *B.proxy_args()],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    tap.ok(dry.returncode != 0 and "digest mismatch" in dry.stderr,
           "the change is real: a dry-run bundle from the host's directory now fails its verify", dry.stderr)

    tap.ok(srv.probe(reads("/ADDED-AFTER-START"), "acme/app") == NO,
           "a file added to the host's rootfs directory after start is not visible to the next probe")
    tap.ok(srv.probe(reads("/" + MODULE, "ROOTFS-TAMPER-CANARY"), "acme/app") == NO,
           "an edit to a rootfs file on the host after start is not visible to the next probe")
    tap.ok(srv.probe(reads("/" + MODULE, "JSONDecoder"), "acme/app") == YES,
           "... which still reads the file as it was verified")

    answer = srv.probe(f"""import json
with open("/proc/self/mountinfo") as f:
    text = f.read()
with open("/probe/out", "w") as f:
    json.dump({{"result": "YES" if {rootfs!r} in text or {state!r} in text else "NO"}}, f)
""", "acme/app")
    tap.ok(answer == NO, "the sandbox's mountinfo names neither the host's rootfs nor the state directory", answer)

    if B.workspaces_on_host:
        # Docker and sbx: serve unshares no mount namespace (dockerd, and
        # sbx's daemon, resolve the paths they mount in the host's), so its
        # private copy is mounted in the host's, under the root-only state
        # directory (docs/runtimes.md).  Other serves' copies may show there
        # too: only this state's count.
        expected = os.path.join(os.path.realpath(state), B.state_subdir, srv.run or "?", "rootfs")
        same_ns = os.readlink(f"/proc/{srv.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
        with open("/proc/self/mountinfo") as f:
            mine = [ln for ln in f if " - tmpfs sealed-probe-rootfs " in ln
                    and S.unescape_mountinfo(ln.split()[4]).startswith(os.path.realpath(state) + "/")]
        tap.ok(same_ns and len(mine) == 1 and " ro," in mine[0]
               and S.unescape_mountinfo(mine[0].split()[4]) == expected,
               f"{B.name}: serve's private rootfs is one read-only tmpfs, at STATE/{B.state_subdir}/<run>/rootfs in "
               "the host's mount namespace, which serve shares", (same_ns, expected, mine))
        daemon = f"{B.mount_daemon} resolves the paths it mounts"
        B.not_applicable(tap, "the host's mount namespace does not see it",
                         f"{daemon} in the host's mount namespace, so serve unshares none: its "
                         f"private rootfs copy is mounted in the host's, at STATE/{B.state_subdir}/<run>/rootfs, "
                         "under the root-only state directory (checked before and next)")
        st = os.stat(state)
        tap.ok(st.st_uid == 0 and st.st_mode & 0o7777 == 0o700,
               f"{B.name}: the state directory above it is root's and 0700: no other host user reaches the copy",
               (st.st_uid, oct(st.st_mode)))
    else:
        # A docker or sbx serve beside this one (the matrix runs backends in
        # parallel) mounts its copy in the host's namespace, by design; a
        # namespace unshared after that holds a copy of its mount too.  Any
        # copy but those is counted.
        docker_copy = re.compile(r"/(docker|sbx)-work/[0-9a-f]{12}/rootfs$")
        with open(f"/proc/{srv.pid}/mountinfo") as f:
            copies = [ln for ln in f if " - tmpfs sealed-probe-rootfs " in ln]
        private = [ln for ln in copies if not docker_copy.search(S.unescape_mountinfo(ln.split()[4]))]
        tap.ok(len(private) == 1 and " ro," in private[0] and private[0].split()[4].endswith("/rootfs"),
               "serve's private rootfs is one read-only tmpfs in serve's own mount namespace", copies)
        # Docker and sbx serves' copies (above) are not this serve's; its own copy's
        # device shows nowhere in the host's, under any name.
        devs = {ln.split()[2] for ln in private}
        with open("/proc/self/mountinfo") as f:
            host = [ln for ln in f if ln.split()[2] in devs or (
                "sealed-probe-rootfs" in ln and not docker_copy.search(S.unescape_mountinfo(ln.split()[4])))]
        tap.ok(private and not host, "the host's mount namespace does not see it", host)

    run = srv.run
    srv.stop()
    left = S.leaks(state, run, after_exit=True, srv=srv)
    tap.ok(srv.returncode == 0 and not left, "after serve stops, nothing of the private rootfs is left", left)
finally:
    if srv is not None:
        srv.cleanup()
    work.close()
tap.finish()
