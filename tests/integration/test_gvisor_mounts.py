"""What runsc may cache of the bundle's mounts (docs/runtimes.md, "The
repository's mount is exclusive"): /probe/repo alone is the sandbox's own
(a gVisor mount hint, share=container), so the sentry caches it as runsc's
--file-access-mounts=exclusive would; /probe/probe.py, /probe/out and /tmp
stay shared, because serve writes the script and reads the answer through
them while the sandbox lives.

A dry-run bundle is run by hand as a sandbox started ahead of its script:
its process (python3 -I -S -B, as the probe's) stats /probe/probe.py while
it is still the empty placeholder, lists and writes the repository, then
waits for a file the host makes in /tmp; the host writes the script into
probe.py's inode after `start` (as sp_bundle_put_script does), then makes
the file.  The script must run, whole, and its answer must reach the host
through out.  A probe.py the sentry cached (a hint on it, or the global
flag) reads as 0 bytes; a /tmp it cached never shows the signal: either
fails here.  The command line is the bundle's runtime-commands.json (the
flags serve uses), plus a debug log, whose mount lines show each mount's
cache mode."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, backend, cached_rootfs, env_path, require_root_and, unmount_under  # noqa: E402

HINT = "dev.gvisor.spec.mount.repo."
WAIT_S = 30
PROXY = env_path("SP_PROXY")
B = backend()
require_root_and()
ROOTFS = cached_rootfs()
tap = Tap()
work = tempfile.mkdtemp(prefix="sp-gvisor-mounts-")
os.chmod(work, 0o711)  # the sandbox's user-namespace root walks down to its bundle
root = os.path.join(work, "runsc-root")
logs = os.path.join(work, "logs")
os.mkdir(logs)
container = f"sp-gvisor-mounts-{os.getpid()}"

# Runs before the script is there, then stands in for the waiting
# interpreter: every step the sentry could cache is taken before the signal.
WAITER = f'''import json, os, time
seen = {{"size_before": os.stat("/probe/probe.py").st_size, "repo_before": sorted(os.listdir("/probe/repo"))}}
with open("/probe/repo/made-before", "w") as f:
    f.write("before")
deadline = time.monotonic() + {WAIT_S}
while not os.path.exists("/tmp/go"):
    if time.monotonic() > deadline:
        with open("/probe/out", "w") as f:
            json.dump(dict(seen, signal="never seen in /tmp"), f)
        raise SystemExit(3)
    time.sleep(0.05)
with open("/probe/probe.py") as f:
    source = f.read()
seen["script_bytes"] = len(source)
with open("/probe/out", "w") as f:  # the script writes it again, when it runs
    json.dump(seen, f)
exec(compile(source, "/probe/probe.py", "exec"))
'''
# The script, written after `start`: it uses what the waiter left in `seen`.
SCRIPT = '''import json, os
with open("/probe/repo/made-before") as f:
    seen["read_back"] = f.read()
os.rename("/probe/repo/made-before", "/probe/repo/renamed")
with open("/probe/repo/made-after", "w") as f:
    f.write("after")
seen["repo_after"] = sorted(os.listdir("/probe/repo"))
seen["script"] = "ran"
with open("/probe/out", "w") as f:
    json.dump(seen, f)
'''


def runsc(*verb, timeout=120):
    """runsc VERB with serve's flags and a debug log; its output goes to a
    file, since `create` leaves the sandbox and gofer holding it."""
    argv = B.prefix(root, bundle) + ["--debug", f"--debug-log={logs}/"] + list(verb)
    with tempfile.TemporaryFile("w+") as out:
        r = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout)
        out.seek(0)
        return r.returncode, out.read()


config = os.path.join(work, "config.json")
with open(config, "w") as f:
    json.dump({"sealedProbes": {"enabled": True, "privateRepos": ["acme/widgets"], "runtime": B.runtime}}, f)
placeholder = os.path.join(work, "placeholder.py")
with open(placeholder, "w") as f:
    f.write("pass\n")
bundle = os.path.join(work, "bundle")
r = subprocess.run([PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/widgets", "--script",
                    placeholder, "--out", bundle, "--rootfs", ROOTFS, *B.proxy_args()], capture_output=True,
                   text=True, stdin=subprocess.DEVNULL)
if not tap.ok(r.returncode == 0, "the dry-run bundle is written", r.stderr):
    tap.finish()
bundle = os.path.realpath(bundle)
with open(os.path.join(bundle, "config.json")) as f:
    spec = json.load(f)
with open(os.path.join(bundle, "runtime-commands.json")) as f:
    commands = json.load(f)

# ---- the bundle and the command lines ---------------------------------------
sources = {m["destination"]: m.get("source") for m in spec["mounts"]}
hints = {k: v for k, v in spec["annotations"].items() if k.startswith("dev.gvisor.")}
tap.ok(hints == {HINT + "share": "container", HINT + "type": "bind", HINT + "source": sources.get("/probe/repo")}
       and sources.get("/probe/repo") == os.path.join(bundle, "repo"),
       "the bundle's one gVisor mount hint gives /probe/repo, by its source, to this container alone", hints)
shared_sources = [sources.get(d) for d in ("/probe/probe.py", "/probe/out", "/tmp")]
tap.ok(None not in shared_sources and not set(shared_sources) & set(hints.values()),
       "no hint names probe.py's, out's or /tmp's source: they stay shared", shared_sources)
flags = [w for c in commands["commands"] for w in c["argv"] if w.startswith("--file-access")]
tap.ok(flags == [], "no command line sets --file-access or --file-access-mounts (it would cover probe.py, out "
       "and /tmp too)", flags)

# ---- a sandbox started ahead of its script ----------------------------------
# The repository as a snapshot leaves it: in place before `create`, the
# probe's own.
repo = os.path.join(bundle, "repo")
owner = os.stat(repo)
for i in range(3):
    path = os.path.join(repo, f"seed-{i}")
    with open(path, "w") as f:
        f.write(f"seed {i}\n")
    os.chown(path, owner.st_uid, owner.st_gid)
script_path = os.path.join(bundle, "probe.py")
os.chmod(script_path, 0o644)
with open(script_path, "w"):
    pass  # the empty placeholder serve's bundle holds until its request
script_inode = os.stat(script_path).st_ino
spec["process"]["args"] = ["/usr/bin/python3", "-I", "-S", "-B", "-c", WAITER]
with open(os.path.join(bundle, "config.json"), "w") as f:
    json.dump(spec, f, indent=2)

report = {}
try:
    created = runsc("create", "--bundle", bundle, "--pid-file", os.path.join(work, "pid"), container)
    started = runsc("start", container) if created[0] == 0 else (None, "")
    if tap.ok(created[0] == 0 and started[0] == 0, "runsc creates and starts the waiting sandbox",
              created[1] + started[1]):
        time.sleep(2)  # the waiter has stat'd probe.py and written the repository by now
        with open(script_path, "r+") as f:  # the same inode, as sp_bundle_put_script writes it
            f.write(SCRIPT)
        tap.ok(os.stat(script_path).st_ino == script_inode, "the script went into the placeholder's inode")
        with open(os.path.join(bundle, "tmp", "go"), "w"):
            pass
        # The sandbox process (the pid file's) ends with the probe.  Not
        # `runsc wait` or `state`: runsc 2022 loses the exit status of a
        # sandbox whose parent (`create`) is gone, and may say `stopped` of
        # one that runs (docs/runtimes.md, "Interpreters started ahead").
        with open(os.path.join(work, "pid")) as f:
            sandbox = int(f.read())
        deadline, running = time.monotonic() + WAIT_S + 30, True
        while running and time.monotonic() < deadline:
            try:
                with open(f"/proc/{sandbox}/stat") as f:
                    running = f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                running = False
            if running:
                time.sleep(0.2)
        tap.ok(not running, "the sandbox ran to its end", f"sandbox {sandbox} still runs")
        with open(os.path.join(bundle, "out")) as f:
            text = f.read()
        try:
            report = json.loads(text)
        except ValueError:
            report = {}
        tap.ok(bool(report), "the host reads the sandbox's answer from out after it exits", repr(text[:500]))
except subprocess.TimeoutExpired as e:
    tap.ok(False, "runsc answers in time", str(e))
finally:
    subprocess.run(B.kill_argv(root, container, bundle=bundle), capture_output=True)
    subprocess.run(B.delete_argv(root, container, bundle=bundle), capture_output=True)

if report:
    tap.ok(report.get("size_before") == 0, "before the script, probe.py was the empty placeholder",
           report.get("size_before"))
    tap.ok("signal" not in report, "the signal the host made in /tmp (shared) reached the waiting sandbox",
           report.get("signal"))
    tap.ok(report.get("script_bytes") == len(SCRIPT.encode()),
           "the waiting sandbox read the whole script written after `start` (probe.py stays shared)",
           f"read {report.get('script_bytes')} bytes of {len(SCRIPT.encode())}")
    tap.ok(report.get("script") == "ran", "the script ran and its answer reached the host (out stays shared)",
           report)
    seeds = [f"seed-{i}" for i in range(3)]
    tap.ok(report.get("repo_before") == seeds, "the sandbox saw the repository as it was before `create`",
           report.get("repo_before"))
    tap.ok(report.get("read_back") == "before"
           and report.get("repo_after") == sorted(seeds + ["made-after", "renamed"]),
           "writes, renames and reads in the exclusive /probe/repo agree with each other", report)

# The debug log's mount lines: runsc 2022 writes `Mounted "SRC" to "DST" type:
# bind, internal-options: "..."`, with cache=remote_revalidating on a shared
# mount and without it on an exclusive one.
mounted = {}
for name in os.listdir(logs):
    with open(os.path.join(logs, name), errors="replace") as f:
        for line in f:
            m = re.search(r'Mounted "[^"]*" to "([^"]*)" type: bind, internal-options: "([^"]*)"', line)
            if m:
                mounted[m.group(1)] = m.group(2)
if not report:
    tap.skip("runsc serves /probe/repo exclusive and probe.py, out and /tmp shared", "the sandbox did not run")
elif not mounted:
    tap.skip("runsc serves /probe/repo exclusive and probe.py, out and /tmp shared",
             f"this runsc's debug log ({logs}) has no `Mounted ... internal-options` lines to read it from")
else:
    shared = {d: "cache=remote_revalidating" in mounted.get(d, "") for d in ("/probe/probe.py", "/probe/out", "/tmp")}
    tap.ok("/probe/repo" in mounted and "cache=" not in mounted["/probe/repo"],
           "runsc mounts /probe/repo exclusive (no cache=remote_revalidating): the hint took effect",
           mounted.get("/probe/repo"))
    tap.ok(all(shared.values()), "runsc mounts probe.py, out and /tmp shared (cache=remote_revalidating)", mounted)

unmount_under(work)
shutil.rmtree(work, ignore_errors=True)
tap.finish()
