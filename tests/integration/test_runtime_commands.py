"""What the runtime is asked to do is what the dry run says it would be
(docs/bundle.md, docs/runtimes.md): `bundle --dry-run` writes
runtime-commands.json, and `serve`, with its runtime binary behind a wrapper
that logs every argv, execs create, start, kill (on a timeout) and delete for
a probe with exactly those argv once the run id, container id and bundle path
are put in: same flags, same order, same verbs.  Under runc there is no
delete: once the init is reaped serve removes the container's cgroup and
state directory itself (the dry run's `remove` step), and right after each
answer, with serve still up, neither is left; a cgroup that cannot simply
be removed (the test makes a child cgroup in it while the probe runs) is
left to `delete --force`, which removes both.  No flag ever comes from a
request: a script that spells `--allow-flag-override`, `--debug` and the like
reaches no argv.  Runs on the backend SP_BACKEND names (runc by default).

On docker there is no binary: serve talks HTTP to the daemon, so it is given
the socket of a logging forwarding proxy the test owns (sp_fake_docker.py
--forward, in front of the tests' daemon), and each request it sends is
compared with the requests the dry run describes: the create body equal up
to run, invocation and bundle paths, each container's requests in the
documented order with the described paths up to its name or id, the image
step the image serve uses, no pull, nothing of the script in any request,
and the socket's path in neither the dry run, the audit log nor serve's
stderr.

On sbx the binary is the test double of the sbx CLI (tests/doubles/sbx/sbx),
which logs every call's argv and whole environment itself.  serve, started
with DOCKER_SANDBOXES_PROXY, XDG_CONFIG_HOME, GH_TOKEN, HOME and SP_* of its
own, answers a probe whose script, outcomes and repository name carry
canaries: its calls are verify's, the orphan sweeps' and create, exec, stop,
rm, ls for each invocation, each argv the dry run's word for word up to the
VM name and the workspace, every environment exactly PATH, root's HOME and
LC_ALL=C, and no canary in any of them."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import RUNTIME_SEARCH_PATH, Tap, find_runtime, remove_bundle, require_root_and  # noqa: E402

require_root_and("git")
import sp_backend as B  # noqa: E402

REAL = B.require_backend()
import sp_serve as S  # noqa: E402

STEPS = ["create", "start", "kill (on timeout or stop)", "delete"]
# runc's removal is no command either: serve removes the reaped container's
# cgroup and state directory itself; `delete` is its fallback and the
# orphan sweep's (docs/runtimes.md, "One run").
DIRECT_REMOVE = B.BACKEND == "runc"
if DIRECT_REMOVE:
    STEPS = ["create", "start", "kill (on timeout or stop)", "remove", "delete"]
VERBS = {"create": "create", "start": "start", "kill (on timeout or stop)": "kill", "delete": "delete"}
# runc's start is no command: serve reads the created init's exec fifo, as
# `runc start` does (docs/runtimes.md, "One run"); runsc's is `runsc start`.
FIFO_START = B.BACKEND == "runc"
NEVER = ("--allow-flag-override", "--debug", "--strace", "--profile")
MARKER = "SP-FLAG-CANARY-" + os.urandom(6).hex()
# Flags a request might try to smuggle, in the script's own text.
SMUGGLED = ("--allow-flag-override", "--debug", "--debug-log=/tmp/sp-x", "--strace", "--profile",
            "--network=host", "--net-raw", "--oci-seccomp=false", "--rootless", "--systemd-cgroup",
            f"--{MARKER}")
SCRIPT = (f"# {MARKER} " + " ".join(SMUGGLED) + "\n" + S.answer_script("YES"))
SLEEPER = "# " + " ".join(SMUGGLED) + "\nimport time\ntime.sleep(600)\n"
# Runs long enough for the test to find its cgroup and make a child in it.
HELD = "import time\ntime.sleep(2)\n" + S.answer_script("YES")
CHILD_CGROUP = "sp-test-child"

tap = Tap()
work = S.Work(f"sp-runtime-commands-{B.BACKEND}-")
bins = B.FakeBins()


def dry_run(config, state, script_text, *extra, repo="acme/one", backend_args=True):
    """`bundle --dry-run` with extra, and the backend's own options unless
    extra names them (or backend_args is false): (result, parsed
    runtime-commands.json, the --out bundle, removed)."""
    script = work.path("script") + ".py"
    with open(script, "w") as f:
        f.write(script_text)
    out = work.path("bundle")
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", repo, "--script",
                        script, "--out", out, "--rootfs", work.rootfs, "--state", state, *extra,
                        *(S.B.proxy_args(extra) if backend_args else ())],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    doc = None
    try:
        with open(os.path.join(out, "runtime-commands.json")) as f:
            doc = json.load(f)
        with open(os.path.join(out, "config.json")) as f:
            LAST_CONFIG[:] = [json.load(f)]
    except (OSError, ValueError):
        LAST_CONFIG[:] = []
    remove_bundle(out)
    return r, doc, out


LAST_CONFIG = []  # dry_run's config.json, parsed


def started_ahead_refused(config, state, repo="acme/one"):
    """Where the backend does not start ahead: `bundle --dry-run
    --started-ahead` is refused, naming the option, and leaves no bundle."""
    r, doc, out = dry_run(config, state, "print(1)\n", "--started-ahead", repo=repo)
    tap.ok(r.returncode != 0 and "--started-ahead" in r.stderr and "does not start an interpreter ahead" in r.stderr
           and not os.path.lexists(out),
           f"dry run --started-ahead is refused on {B.BACKEND}, naming the option", r.stderr)


def after(argv, flag):
    i = argv.index(flag) if flag in argv else -1
    return argv[i + 1] if 0 <= i < len(argv) - 1 else None


def template(argv, run, cid, bundle):
    """argv with what differs per run put as placeholders."""
    out = []
    for a in argv:
        if bundle is not None:
            a = a.replace(bundle, "<BUNDLE>")
        out.append(a.replace(cid, "<CID>").replace(run, "<RUN>"))
    return out


def verb_of(argv):
    return next((a for a in argv[1:] if a in ("create", "start", "kill", "delete", "--version", "state", "list")),
                None)


def removed_now(state, run):
    """{container id: what of it is left} for every container of run that
    serve's audit log has a record of: its cgroup in any hierarchy and its
    state directory under the run's --root.  An answered probe's sandbox may
    go after its answer (immediate release), so this waits up to 15 s for
    the state directory, which goes last; the cgroups are looked at once it
    is gone.  Looked at while serve runs, so that its stop's orphan sweep
    cannot have removed them."""
    root = os.path.join(state, B.STATE_DIR_NAME, run or "none")
    out = {}
    for rec in S.audit_lines(state):
        name = f"{run}-{rec['sandbox'] or S.audit_id_inv(rec)}"
        path = os.path.join(root, f"sp-{name}")
        deadline = time.monotonic() + 15
        while os.path.lexists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        out[f"sp-{name}"] = ([path] if os.path.lexists(path) else []) + [
            d for d in S.cgroup_dirs(run or "none") if d.endswith(f"/{name}")]
    return out


def occupy_probe_cgroup(run, found, timeout=20):
    """Makes a child cgroup in the cgroup (in one hierarchy) of the running
    probe of run, found by its python3's command line and not waiting for
    its script: the container's
    cgroup then cannot be removed by a plain rmdir.  found gets the path."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in S.cgroup_dirs(run or "none"):
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = f.read().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        running = b"/probe/probe.py" in f.read()
                    # Not the pool's next sandbox, whose interpreter started
                    # ahead waits in read(0, ...) (docs/runtimes.md).
                    with open(f"/proc/{pid}/syscall") as f:
                        running = running and not f.read().startswith("0 0x0 ")
                except OSError:
                    continue
                if running:
                    os.mkdir(os.path.join(d, CHILD_CGROUP))
                    found.append(d)
                    return
        time.sleep(0.02)


def forbidden_in(argvs):
    """Every argv element that is a never-flag, or that came from the script."""
    bad = []
    for argv in argvs:
        for a in argv:
            if a.split("=")[0] in NEVER or MARKER in a or a in SMUGGLED:
                bad.append(a)
    return bad


# ---- docker: the requests serve sends, through a logging proxy ----------------
#
# Docker has no binary to wrap: serve talks HTTP to the daemon over
# --docker-socket.  So serve is given a logging forwarding proxy's socket
# (sp_fake_docker.py --forward, in front of the tests' daemon), and what it
# asks is compared with the requests `bundle --dry-run` describes.

DOCKER_STEPS = ["image", "create", "attach", "start", "wait (under the timeout)", "kill (on timeout or stop)",
                "inspect", "remove"]
# Started ahead (issue 29): the container's interpreter starts at create and
# waits for the end of its stdin, the attach connection (the signal).
DOCKER_AHEAD_STEPS = ["image", "create", "attach", "start (the interpreter, ahead of the request)",
                      "inspect (its pid, held by a pidfd)", "wait (under the timeout)", "kill (on timeout or stop)",
                      "inspect", "remove"]
INVOCATION_LABEL = "org.sealed-probe.invocation"
SHORT = {"wait (under the timeout)": "wait", "kill (on timeout or stop)": "kill",
         "start (the interpreter, ahead of the request)": "start", "inspect (its pid, held by a pidfd)": "inspect"}
# What a request might try to smuggle into a create body, in the script's text.
DOCKER_SMUGGLED = SMUGGLED + ('"Privileged": true', '"NetworkMode": "host"', '"CapAdd": ["ALL"]',
                              '"Binds": ["/:/host"]', "fromImage=evil/" + MARKER, "/var/run/docker.sock")


def docker_dry_run(config, state, script_text, socket_path, ids, *extra):
    """`bundle --dry-run --docker-socket socket_path --probe-ids ids [extra]`:
    (result, parsed runtime-commands.json, its text, the --out bundle)."""
    script = work.path("script") + ".py"
    with open(script, "w") as f:
        f.write(script_text)
    out = work.path("bundle")
    r = subprocess.run([S.PROXY, "bundle", "--dry-run", "--config", config, "--repo", "acme/one", "--script",
                        script, "--out", out, "--rootfs", work.rootfs, "--state", state,
                        "--probe-ids", ids, B.BINARY_OPTION, socket_path, *extra],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    doc, text = None, ""
    try:
        with open(os.path.join(out, "runtime-commands.json")) as f:
            text = f.read()
        doc = json.loads(text)
    except (OSError, ValueError):
        pass
    remove_bundle(out)
    return r, doc, text, out


def substitute(value, subs):
    """value with every (old, new) of subs replaced in each string, keys too."""
    if isinstance(value, dict):
        return {substitute(k, subs): substitute(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, subs) for v in value]
    if isinstance(value, str):
        for old, new in subs:
            value = value.replace(old, new)
    return value


def with_invocation(body, inv):
    """body with its invocation inv (the dry run's is 0) as <INV>: in its
    label and in its cgroup parent, the bundle's cgroupsPath
    /sealed-probe/<run>-<inv>."""
    labels = body.get("Labels") if isinstance(body, dict) else None
    if isinstance(labels, dict) and labels.get(INVOCATION_LABEL) == inv:
        body = dict(body, Labels=dict(labels, **{INVOCATION_LABEL: "<INV>"}))
    host = body.get("HostConfig") if isinstance(body, dict) else None
    if isinstance(host, dict) and isinstance(host.get("CgroupParent"), str) \
            and host["CgroupParent"].endswith(f"-{inv}"):
        body = dict(body, HostConfig=dict(host, CgroupParent=host["CgroupParent"][:-len(inv)] + "<INV>"))
    return body


def path_template(path, refs):
    """A request path with any of refs (the container's name, its id, or the
    dry run's `ID`) as <C>, as a path segment or as create's ?name=."""
    base, _, query = path.partition("?")
    segments = ["<C>" if seg in refs else seg for seg in base.split("/")]
    pairs = [("name", "<C>") if k == "name" and v in refs else (k, v)
             for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)]
    return "/".join(segments) + ("?" + urllib.parse.urlencode(pairs, safe="<>") if query else "")


def container_of(req):
    """The container a request names: create's ?name=, or the segment after
    /containers/ (None for /containers/json and /containers/create)."""
    base, _, query = req["target"].partition("?")
    parts = base.split("/")
    if len(parts) >= 4 and parts[2] == "containers":
        if parts[3] == "create":
            return (urllib.parse.parse_qs(query).get("name") or [None])[0]
        if parts[3] != "json":
            return urllib.parse.unquote(parts[3])
    return None


def docker_main():
    from sp_fake_docker import ForwardingProxy

    proxy_dir = tempfile.mkdtemp(prefix="sp-fwd-")  # short: sun_path holds 107 bytes
    proxy = ForwardingProxy(os.path.join(proxy_dir, "docker.sock"), S.B.socket, os.path.join(proxy_dir, "log.jsonl"))
    script_text = (f"# {MARKER} " + " ".join(DOCKER_SMUGGLED) + "\n" + S.answer_script("YES"))
    sleeper = "# " + " ".join(DOCKER_SMUGGLED) + "\nimport time\ntime.sleep(600)\n"
    socket_texts = (proxy.socket, proxy_dir, os.path.realpath(S.B.socket))
    state, rc, proxy_err = None, None, ""
    try:
        proxy.start()
        clone = work.make_clone("one", {"README.md": b"commands\n"})
        staged_config = work.write_config(["acme/one"])
        config = work.write_config(["acme/one"], runtime=B.RUNTIME, timeout=5, maxInvocations=50)
        state = work.staged_state(staged_config, [("acme/one", clone)])
        # The dry run's bundle is slot 0 of the range; serve's probes, one at a
        # time, run in slot 0 of the same range: the same User.
        ids = S.probe_ids()

        # ---- the dry run ----
        r, doc, text, dry_out = docker_dry_run(config, state, script_text, proxy.socket, ids)
        tap.ok(r.returncode == 0 and doc is not None, "dry run writes runtime-commands.json beside config.json",
               r.stderr)
        doc = doc or {"requests": []}
        steps = [q.get("step") for q in doc.get("requests", [])]
        image = doc.get("image") or ""
        tap.ok(doc.get("runtime") == "docker" and steps == DOCKER_STEPS
               and re.fullmatch(r"sealed-probe/rootfs:[0-9a-f]{12}", image) is not None,
               "runtime-commands.json names runtime docker, the image sealed-probe/rootfs:<12 hex>, and the steps "
               + ", ".join(SHORT.get(x, x) for x in DOCKER_STEPS) + " in order", text[:1500])
        dry = {q["step"]: q for q in doc.get("requests", []) if "step" in q}
        create_req = dry.get("create", {})
        dry_name = (urllib.parse.parse_qs(create_req.get("path", "").partition("?")[2]).get("name") or [""])[0]
        dry_run_id = dry_name[len("sp-"):].rsplit("-", 1)[0] if dry_name.startswith("sp-dry-") else ""
        dry_body = create_req.get("body") or {}
        tap.ok(dry_run_id.startswith("dry-") and dry_name == f"sp-{dry_run_id}-0"
               and create_req.get("method") == "POST"
               and create_req.get("path") == f"/v1.41/containers/create?name={dry_name}"
               and dry.get("image", {}).get("path") == f"/v1.41/images/{image}/json"
               and dry_body.get("Image") == image,
               "dry run: container sp-dry-XXXX-0 created by name, the image's GET, the create body's Image",
               json.dumps(dry)[:1500])
        refs_dry = {"ID", dry_name}
        described = {SHORT.get(k, k): (q.get("method"), path_template(q.get("path", ""), refs_dry))
                     for k, q in dry.items()}
        want_paths = {"create": ("POST", "/v1.41/containers/create?name=<C>"),
                      "attach": ("POST", "/v1.41/containers/<C>/attach?stream=1&stdin=1"),
                      "start": ("POST", "/v1.41/containers/<C>/start"),
                      "wait": ("POST", "/v1.41/containers/<C>/wait"),
                      "kill": ("POST", "/v1.41/containers/<C>/kill?signal=KILL"),
                      "inspect": ("GET", "/v1.41/containers/<C>/json"),
                      "remove": ("DELETE", "/v1.41/containers/<C>?force=1&v=1")}
        tap.ok(all(described.get(k) == v for k, v in want_paths.items()),
               "dry run: every container request names the container (ID or its name) and nothing else",
               json.dumps(described))
        binds = [m for m in (dry_body.get("HostConfig") or {}).get("Mounts") or [] if m.get("Type") == "bind"]
        tap.ok(binds and all(m.get("Source", "").startswith(dry_out + "/") for m in binds),
               "dry run: every bind source is under the --out bundle", json.dumps(binds))
        dumped = json.dumps(doc)
        tap.ok(not any(x in dumped or x in text for x in (MARKER,) + DOCKER_SMUGGLED)
               and (dry_body.get("HostConfig") or {}).get("Privileged") is False,
               "dry run: nothing of the request's script in any request; Privileged false",
               [x for x in (MARKER,) + DOCKER_SMUGGLED if x in text])
        tap.ok(not any(x in text for x in socket_texts), "dry run: the socket's path is not in runtime-commands.json",
               [x for x in socket_texts if x in text])
        tap.ok(proxy.requests() == [], "dry run: no request reaches the daemon", proxy.requests()[:3])
        r2, doc2, text2, _ = docker_dry_run(config, state, "print(1)\n", S.B.socket, ids)
        reqs2 = (doc2 or {}).get("requests", [])
        dry_name2 = next(((urllib.parse.parse_qs(q.get("path", "").partition("?")[2]).get("name") or [""])[0]
                          for q in reqs2 if q.get("step") == "create"), "")
        same = [(q.get("step"), q.get("method"), path_template(q.get("path", ""), {"ID", dry_name2}))
                for q in reqs2] == [(q.get("step"), q.get("method"), path_template(q.get("path", ""), refs_dry))
                                    for q in doc.get("requests", [])]
        tap.ok(r2.returncode == 0 and same and not any(x in text2 for x in socket_texts),
               "dry run with another socket (the daemon's own): the same requests, and no socket path",
               text2[:800] + r2.stderr)

        # ---- the dry run of a sandbox started ahead (issue 29) ----
        r_a, doc_a, text_a, dry_out_a = docker_dry_run(config, state, script_text, proxy.socket, ids,
                                                       "--started-ahead")
        reqs_a = (doc_a or {}).get("requests", [])
        steps_a = [q.get("step") for q in reqs_a]
        dry_a = {q["step"]: q for q in reqs_a if "step" in q}
        name_a = (urllib.parse.parse_qs((dry_a.get("create") or {}).get("path", "").partition("?")[2])
                  .get("name") or [""])[0]
        run_a = name_a[len("sp-"):].rsplit("-", 1)[0]
        body_a = (dry_a.get("create") or {}).get("body") or {}
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "bundle",
                               "waiter.py")) as f:
            waiter = f.read()
        cmd_cold, cmd_a = dry_body.get("Cmd") or [], body_a.get("Cmd") or []
        python = ["/usr/bin/python3", "-I", "-S", "-B"]
        attach_a, attach = dry_a.get("attach") or {}, dry.get("attach") or {}
        tap.ok(r_a.returncode == 0 and steps_a == DOCKER_AHEAD_STEPS
               and attach_a.get("upgrade") == attach.get("upgrade") == "tcp"
               and attach_a.get("path") == attach.get("path", "").replace(dry_name, name_a)
               and "once probe.py holds the script (the signal)" in attach_a.get("stdin", "")
               and "at once, before the start" in attach.get("stdin", ""),
               "dry run --started-ahead: the interpreter starts at create and its pid is inspected; the attach's "
               "connection is its stdin, closed as the signal (cold: at once, before the start)",
               (r_a.stderr, steps_a, attach_a, attach))
        tap.ok(cmd_cold[-5:] == python + ["/probe/probe.py"] and cmd_a[-6:] == python + ["-c", waiter]
               and cmd_a[:-6] == cmd_cold[:-5]
               and dry_body.get("OpenStdin") is True and dry_body.get("StdinOnce") is True
               and json_diff(substitute(dict(dry_body, Cmd=None), [(dry_out, "<B>"), (dry_name, "<C>"),
                                                                   (dry_run_id, "<RUN>")]),
                             substitute(dict(body_a, Cmd=None), [(dry_out_a, "<B>"), (name_a, "<C>"),
                                                                 (run_a, "<RUN>")])) == [],
               "dry run --started-ahead: the create body is the cold one's but for the command's tail, "
               "python3 -I -S -B -c and src/bundle/waiter.py whole; both open a stdin for one attach",
               (cmd_cold[-5:], cmd_a[-6:-1]))

        # ---- serve, through the logging proxy ----
        with S.serving(work, config, state, binary=proxy.socket, probe_id_base=int(ids)) as srv:
            yes = srv.probe(script_text, "acme/one")
            tap.ok(yes == S.answer("YES"), "serve answers a probe through the logging proxy", yes)
            slept = srv.probe(sleeper, "acme/one")
            tap.ok(slept == S.ERROR_LINE, "a probe past the timeout answers ERROR", slept)
            rc = srv.stop()
            tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
            serve_err = srv.stderr()
        records = S.audit_lines(state)
        run = records[0].get("run") if records else None
        tap.ok(run is not None and [x["status"] for x in records] == ["answered", "timed_out"],
               "the audit log holds the answered probe and the timed-out one", records)
        logged = proxy.requests()
        tap.ok(logged and all(q.get("status") is not None and q["target"].startswith(("/_ping", "/version", "/v1.41/"))
                              for q in logged),
               "serve's every request went through the proxy, answered, under /v1.41 (but /_ping, /version)",
               [(q["method"], q["target"], q.get("status")) for q in logged if q.get("status") is None][:5])

        # Every container serve created, by its name: {name: (id, create request)}.
        created = {}
        for q in logged:
            if q["method"] == "POST" and q["path"] == "/v1.41/containers/create":
                cid = (q.get("response_json") or {}).get("Id")
                created[container_of(q)] = (cid, q)

        def requests_of(name):
            cid = created.get(name, (None, None))[0]
            refs = {name} | ({cid} if cid else set())
            return [q for q in logged if container_of(q) in refs], refs

        def step_of(q, refs):
            key = (q["method"], path_template(q["target"], refs))
            return next((k for k, v in described.items() if v == key), f"? {q['method']} {q['target']}")

        # What serve sends beyond one request per described step (docs/runtimes.md
        # "Verification" and "One run"): after the first create of the run (the
        # canary's, at start, or a probe's), an inspect to see every field applied;
        # after a kill, a bounded second wait; after the remove, an inspect that
        # must answer 404.  Each is a described step's request.
        first_create = next((container_of(q) for q in logged
                             if q["method"] == "POST" and q["path"] == "/v1.41/containers/create"), None)
        expect = {"answered": ["create", "attach", "start", "wait", "inspect", "remove", "inspect"],
                  "timed_out": ["create", "attach", "start", "wait", "kill", "wait", "inspect", "remove",
                                "inspect"]}
        dry_subs = [(dry_out, "<BUNDLE>"), (dry_name, "<C>"), (dry_run_id, "<RUN>")]
        # The containers: the canary's, which serve runs at start before it is
        # ready (the run's first create; invocation 1 of the audit's count),
        # then the two probes'.
        # A probe's container is the sandbox its record names (pN when it was
        # made ahead of its request, --pool); one made ahead that no request
        # took is only created, then removed at the stop.
        probe_names = [f"sp-{run}-{rec['sandbox'] or S.audit_id_inv(rec)}" for rec in records[:2]]
        canary = [n for n in created if n and n.startswith(f"sp-{run}-") and n not in probe_names
                  and n.rsplit("-", 1)[1].isdigit()]
        unstarted = [n for n in created if n and n.startswith(f"sp-{run}-") and n not in probe_names
                     and S.POOL_NAME.fullmatch(n.rsplit("-", 1)[1])]
        tap.ok(len(canary) == 1 and first_create == canary[0]
               and sorted(created) == sorted(canary + probe_names + unstarted),
               "serve creates the canary's container first, then the two probes' (and, with a pool, the waiting "
               "ones no request took)", sorted(created))
        # A sandbox made ahead is started ahead too: its interpreter's pid is
        # inspected after the start; one no request took is removed running.
        expect["unstarted"] = ["create", "attach", "start", "inspect", "remove", "inspect"]
        who = [(canary[0] if canary else f"sp-{run}-?", "canary", "answered")] + \
            [(n, f"{rec['status']} probe", rec["status"]) for n, rec in zip(probe_names, records)] + \
            [(n, "waiting sandbox", "unstarted") for n in unstarted]
        for name, label, status in who:
            inv = name.rsplit("-", 1)[1]
            reqs, refs = requests_of(name)
            want_seq = list(expect[status])
            ahead = S.POOL_NAME.fullmatch(inv) is not None
            if ahead and status != "unstarted":
                want_seq.insert(3, "inspect")
            if name == first_create:
                want_seq.insert(1, "inspect")
            got_seq = [step_of(q, refs) for q in reqs]
            tap.ok(got_seq == want_seq,
                   f"serve's requests for the {label}: {' -> '.join(want_seq)}",
                   [f"{q['method']} {q['target']} -> {q.get('status')}" for q in reqs])
            statuses = [q.get("status") for q in reqs]
            tap.ok(statuses and statuses[-1] == 404 and all(s is not None and s < 300 for s in statuses[:-1]),
                   f"serve's requests for the {label} succeed; the last, after the remove, is 404",
                   [f"{q['method']} {q['target']} -> {q.get('status')}" for q in reqs])
            cid, create = created.get(name, (None, {}))
            body = create.get("json") if create else None
            bundle = os.path.join(S.B.run_root(state, run), inv, "bundle")
            serve_binds = [m for m in ((body or {}).get("HostConfig") or {}).get("Mounts") or []
                           if m.get("Type") == "bind"]
            tap.ok(cid and re.fullmatch(r"[0-9a-f]{64}", cid) and serve_binds
                   and all(m.get("Source", "").startswith(bundle + "/") for m in serve_binds),
                   f"serve's create ({label}): by name, its bind sources under STATE/docker-work/<run>/<inv>/bundle",
                   json.dumps(serve_binds))
            want = with_invocation(substitute(body_a, [(dry_out_a, "<BUNDLE>"), (name_a, "<C>"), (run_a, "<RUN>")])
                                   if ahead else substitute(dry_body, dry_subs), "0")
            got = with_invocation(substitute(body, [(bundle, "<BUNDLE>"), (name, "<C>"), (run, "<RUN>")]), inv)
            # The user is the probe id of the sandbox's slot (the dry run's is
            # slot 0's; a sandbox made ahead holds a slot of its own).
            user = (got or {}).get("User", "") if isinstance(got, dict) else ""
            uid = user.partition(":")[0]
            if uid.isdigit() and user == f"{uid}:{uid}" and 0 <= int(uid) - int(ids) < 64 \
                    and (int(uid) - int(ids)) % 2 == 1 and isinstance(want, dict):
                got = dict(got, User=want.get("User"))
            diffs = json_diff(want, got)
            tap.ok(body is not None and diffs == [],
                   f"serve's create body ({label}) is the {'--started-ahead ' if ahead else ''}dry run's, up to run, "
                   "invocation and bundle",
                   "\n".join(diffs[:30]) or json.dumps(body)[:800])
        image_gets = [q for q in logged if q["method"] == "GET" and q["path"].startswith("/v1.41/images/")]
        used = {(q.get("json") or {}).get("Image") for _, (_, q) in created.items()
                if container_of(q) and container_of(q).startswith(f"sp-{run}-") and q.get("json")}
        tap.ok(image_gets and all(q["target"] == dry["image"]["path"] for q in image_gets) and used == {image},
               "serve's image step is the dry run's GET of the image it creates every container from",
               [q["target"] for q in image_gets] + sorted(str(u) for u in used))
        pulls = [q["target"] for q in logged if "fromImage" in q.get("query", {})
                 or (q["path"].startswith("/v1.41/images/create") and q.get("query", {}).get("fromSrc") != ["-"])]
        tap.ok(pulls == [], "serve never asks for a registry pull (fromImage); an import is fromSrc=- only", pulls)
        smuggled = [x for x in (MARKER,) + DOCKER_SMUGGLED
                    if any(x in q["target"] or x in json.dumps(q.get("json")) for q in logged)]
        privileged = [container_of(q) for _, (_, q) in created.items()
                      if ((q.get("json") or {}).get("HostConfig") or {}).get("Privileged") is not False]
        tap.ok(smuggled == [] and privileged == [],
               "serve: nothing of the request's script in any request; every create has Privileged false",
               smuggled + privileged)
        kinds = [(r"GET /_ping", r"GET /version", r"GET /v1\.41/info"),
                 (r"GET /v1\.41/images/[^/?]+/[^/?]+/json", r"POST /v1\.41/images/create\?fromSrc=-&.*",
                  r"GET /v1\.41/containers/json\?all=1&filters=.*", r"POST /v1\.41/containers/create\?name=sp-.*",
                  r"(POST|GET|DELETE) /v1\.41/containers/[^/?]+(/(start|wait|json|kill\?signal=KILL|attach\?stream=1&stdin=1)"
                  r"|\?force=1&v=1)")]
        others = [f"{q['method']} {q['target']}" for q in logged
                  if not any(re.fullmatch(k, f"{q['method']} {q['target']}") for group in kinds for k in group)]
        tap.ok(others == [], "serve asks only for verify, the image, orphans, and its containers' create, attach, "
               "start, wait, kill, inspect and remove", others[:5])
        stray = [f"{q['method']} {q['target']}" for q in logged
                 if container_of(q) not in (None,) + tuple(created) + tuple(c for c, _ in created.values())]
        tap.ok(stray == [], "serve names no container but those it created", stray[:5])
        audit = S.audit_raw(state).decode("utf-8", "replace")
        tap.ok(not any(x in audit or x in serve_err for x in socket_texts),
               "the socket's path is in neither the audit log nor serve's stderr",
               [x for x in socket_texts if x in audit or x in serve_err])
        left = B.leftover_containers(state)
        tap.ok(left == [] and S.cgroup_dirs(run or "none") == [], "nothing of the run is left", left)
    finally:
        rc = proxy.stop()
        proxy_err = proxy.stderr()
        if state:
            B.force_delete(state)
        work.close()
        shutil.rmtree(proxy_dir, ignore_errors=True)
    tap.ok(rc == 0 and proxy_err == "" and not os.path.lexists(proxy_dir),
           "the proxy stops cleanly, printed nothing, and its directory is removed", f"{rc} {proxy_err[-800:]}")
    tap.finish()


def json_diff(want, got, at=""):
    """Where two JSON values differ: one line per difference, by path."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append(f"{at}.{k}: only in the dry run: {json.dumps(want[k])[:200]}")
            elif k not in want:
                out.append(f"{at}.{k}: only in serve's: {json.dumps(got[k])[:200]}")
            else:
                out += json_diff(want[k], got[k], f"{at}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got)) for d in json_diff(w, g, f"{at}[{i}]")]
    return [] if want == got and type(want) is type(got) else \
        [f"{at or '.'}: dry run {json.dumps(want)[:200]}, serve {json.dumps(got)[:200]}"]


# ---- sbx: the argv and environment serve gives the CLI, through its double ----
#
# sbx is a CLI, like runc, but its test double (tests/doubles/sbx/sbx, not
# Docker Sandboxes) logs every call itself: its argv and its whole
# environment (SbxDouble.argv_log).  So serve is started with the double as
# its --sbx, and with a hostile environment of its own (the variables that
# would redirect sbx's daemon or its credential lookup, a token, SP_*), and
# given a probe whose script, outcomes and repository carry canaries; then
# each invocation's argv is compared with what `bundle --dry-run` wrote,
# step by step, and every call's environment with the fixed one.

SBX_STEPS = ["create", "exec", "stop", "rm", "ls (confirms the VM is gone)"]


def sbx_word(argv):
    """What a logged call (argv without argv[0]) is: `create`, `exec`, `stop`,
    `rm`, or the whole argv of a query (`version`, `ls -q`, `create --help`)."""
    if argv and argv[0] in ("create", "exec", "stop", "rm") and "--help" not in argv:
        return argv[0]
    return " ".join(argv)


def sbx_template(argv, vm, ws):
    """argv with the VM name as <VM> and the workspace directory as <WS>
    (a whole word, or the start of a path word)."""
    out = []
    for a in argv:
        if a == vm:
            a = "<VM>"
        elif a == ws or a.startswith(ws + "/"):
            a = "<WS>" + a[len(ws):]
        out.append(a)
    return out


def sbx_main():
    import pwd
    import sp_sbx

    double = S.B.double
    tag = os.urandom(5).hex()
    repo = f"acme/sbx-canary-repo-{tag}"
    script_canary = f"CANARY-SCRIPT-{tag}"
    outcomes = (f"CANARY-OUT-A-{tag}", f"CANARY-OUT-B-{tag}", f"CANARY-OUT-C-{tag}")
    script_text = f"# {script_canary} {MARKER} " + " ".join(SMUGGLED) + "\n" + S.answer_script(outcomes[1])
    sleeper = f"# {script_canary} " + " ".join(SMUGGLED) + "\nimport time\ntime.sleep(600)\n"
    fixed_env = {"PATH": sp_sbx.PROXY_ENV["PATH"], "HOME": pwd.getpwuid(os.geteuid()).pw_dir, "LC_ALL": "C"}
    fixed_list = [f"{k}={v}" for k, v in fixed_env.items()]
    # serve's own environment: everything sbx must never see.
    hostile = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
               "DOCKER_SANDBOXES_PROXY": f"http://127.0.0.1:9/CANARY-PROXY-{tag}",
               "XDG_CONFIG_HOME": f"/tmp/CANARY-XDG-{tag}", "GH_TOKEN": f"ghp_CANARY{tag}",
               "GITHUB_TOKEN": f"ghp_CANARY{tag}", "SP_CANARY": f"CANARY-SP-{tag}",
               "HOME": f"/tmp/CANARY-HOME-{tag}", "LANG": "C.UTF-8", "DOCKER_HOST": f"unix:///CANARY-{tag}"}
    never = (script_canary, MARKER, repo, repo.split("/", 1)[1]) + outcomes + \
        tuple(v for k, v in hostile.items() if "CANARY" in v)
    state = None
    try:
        clone = work.make_clone(repo.split("/", 1)[1], {"README.md": b"commands\n"})
        staged_config = work.write_config([repo])
        config = work.write_config([repo], runtime=B.RUNTIME, timeout=5, maxInvocations=50)
        state = work.staged_state(staged_config, [(repo, clone)])
        key = sp_sbx.state_key(state)

        # ---- the dry run ----
        double.clear_log()
        r, doc, dry_out = dry_run(config, state, script_text, repo=repo)
        tap.ok(r.returncode == 0 and doc is not None, "dry run writes runtime-commands.json beside config.json",
               r.stderr)
        tap.ok(double.argv_log() == [], "dry run: no sbx command is run", double.argv_log()[:3])
        started_ahead_refused(config, state, repo)
        doc = doc or {"commands": []}
        steps = [c.get("step") for c in doc.get("commands", [])]
        tap.ok(doc.get("runtime") == "sbx" and steps == SBX_STEPS,
               "runtime-commands.json names runtime sbx and the steps create, exec, stop, rm, ls in order",
               json.dumps(doc)[:1500])
        tap.ok(doc.get("environment") == fixed_list,
               "dry run: the environment is exactly PATH (the runtime search path), root's HOME and LC_ALL=C",
               doc.get("environment"))
        dry = {c["step"]: c["argv"] for c in doc.get("commands", []) if "step" in c and "argv" in c}
        create = dry.get("create", [])
        dry_vm = after(create, "--name") or ""
        dry_run_id = dry_vm[len("sp-"):].rsplit(".", 1)[0].rsplit("-", 1)[0] if dry_vm.startswith("sp-dry-") else ""
        tap.ok(dry_run_id.startswith("dry-") and dry_vm == f"sp-{dry_run_id}-0.{key}"
               and create[-4:] == ["--", f"{dry_out}/repo", f"{dry_out}/probe.py:ro", f"{dry_out}/out"]
               and dry.get("exec", [])[-7:-5] == [dry_vm, "--"] and dry.get("stop", [])[1:] == ["stop", dry_vm]
               and dry.get("rm", [])[1:] == ["rm", dry_vm] and dry.get("ls (confirms the VM is gone)", [])[1:]
               == ["ls", "-q"],
               "dry run: VM sp-dry-XXXX-0.<state key> in create, exec, stop and rm; the --out bundle's repo, "
               "probe.py (read-only) and out after create's --; ls -q", json.dumps(dry)[:1500])
        tap.ok(all(argv and argv[0] == double.path for argv in dry.values()) and len(dry) == len(SBX_STEPS),
               f"dry run: every command runs the {B.BINARY_OPTION} binary", json.dumps(dry)[:1500])
        bad = forbidden_in(dry.values())
        tap.ok(bad == [] and not any(x in json.dumps(doc) for x in never),
               "dry run: nothing of the request (script, repository) in any argv; never --allow-flag-override, "
               "--debug, --strace or --profile", bad + [x for x in never if x in json.dumps(doc)])
        installed = find_runtime("sbx")
        r2, doc2, out2 = dry_run(config, state, "print(1)\n", "--sbx-template", double.template, repo=repo,
                                 backend_args=False)
        if installed is None:
            tap.ok(r2.returncode != 0 and f"no `sbx` in {RUNTIME_SEARCH_PATH}" in r2.stderr and doc2 is None
                   and not os.path.lexists(out2),
                   f"dry run without {B.BINARY_OPTION}, and no sbx in the search path: refused, naming the path, "
                   "and no bundle", f"exit {r2.returncode}: {r2.stderr}")
        else:
            argv0 = {c["argv"][0] for c in (doc2 or {}).get("commands", [])}
            tap.ok(r2.returncode == 0 and {os.path.realpath(a) for a in argv0} == {os.path.realpath(installed)},
                   f"dry run without {B.BINARY_OPTION}: the installed sbx, {installed}", json.dumps(doc2)[:800])
        r3, doc3, out3 = dry_run(config, state, "print(2)\n", repo=repo)
        vm3 = after(((doc3 or {}).get("commands") or [{}])[0].get("argv", []), "--name") or "?"
        tap.ok(r3.returncode == 0 and vm3 != dry_vm
               and [sbx_template(c["argv"], vm3, out3) for c in doc3["commands"]]
               == [sbx_template(c["argv"], dry_vm, dry_out) for c in doc["commands"]]
               and doc3.get("environment") == doc.get("environment"),
               "dry run of another script: the same command lines and environment, up to VM name and --out",
               json.dumps(doc3)[:800] + r3.stderr)

        # ---- serve, with the double logging every call ----
        double.clear_log()
        with S.serving(work, config, state, env=hostile) as srv:
            yes = srv.probe(script_text, repo, outcomes)
            tap.ok(yes == S.answer(outcomes[1]), "serve answers a probe with canary outcomes through the double",
                   yes + srv.stderr()[-400:])
            slept = srv.probe(sleeper, repo, outcomes)
            tap.ok(slept == S.ERROR_LINE, "a probe past the timeout answers ERROR", slept)
            rc = srv.stop()
            tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
        logged = double.argv_log()
        records = S.audit_lines(state)
        run = records[0].get("run") if records else None
        tap.ok(run is not None and [x["status"] for x in records] == ["answered", "timed_out"],
               "the audit log holds the answered probe and the timed-out one", records)

        # (4) The calls, in order: verify, the orphan sweep, the canary's
        # invocation, the two probes', the sweep at stop.
        probe_invs = [S.audit_id_inv(rec) for rec in records[:2]]
        creates = [after(a, "--name") for a, _ in logged if sbx_word(a) == "create"]
        canary_inv = None
        if creates and creates[0] and creates[0].startswith(f"sp-{run}-"):
            with contextlib.suppress(ValueError):
                canary_inv = int(creates[0][len(f"sp-{run}-"):].rsplit(".", 1)[0])
        invocation = ["create", "exec", "stop", "rm", "ls -q"]
        want = ["version", "ls -q", "create --help", "exec --help", "ls -q"] + invocation * 3 + ["ls -q"]
        got = [sbx_word(a) for a, _ in logged]
        tap.ok(got == want,
               "serve's sbx calls: version, ls -q, create --help, exec --help (verify); ls -q (the orphan sweep); "
               "create, exec, stop, rm, ls -q for the canary, then for each probe; ls -q (the sweep at stop)",
               "\n".join(" ".join(a) for a, _ in logged))
        vms = [f"sp-{run}-{i}.{key}" for i in [canary_inv] + probe_invs]
        tap.ok(canary_inv is not None and canary_inv not in probe_invs and creates == vms,
               "serve creates three VMs, sp-<run>-<inv>.<state key>: the canary's first, then the two probes'",
               creates)

        # (1) Each invocation's argv is the dry run's, up to VM name and workspace.
        want_lines = [sbx_template(dry[s][1:], dry_vm, dry_out) for s in SBX_STEPS]
        for label, inv in zip(("canary", "answered probe", "timed_out probe"), [canary_inv] + probe_invs):
            vm = f"sp-{run}-{inv}.{key}"
            at = next((i for i, (a, _) in enumerate(logged) if sbx_word(a) == "create" and after(a, "--name") == vm),
                      None)
            calls = [a for a, _ in logged[at:at + len(SBX_STEPS)]] if at is not None else []
            ws = os.path.join(S.B.run_root(state, run), str(inv), "bundle")
            tap.ok(calls and calls[0][-4:] == ["--", f"{ws}/repo", f"{ws}/probe.py:ro", f"{ws}/out"],
                   f"serve's create ({label}): the workspace is STATE/sbx-work/<run>/<inv>/bundle", calls[:1])
            for n, step in enumerate(SBX_STEPS):
                got_argv = sbx_template(calls[n], vm, ws) if n < len(calls) else None
                tap.ok(got_argv == want_lines[n],
                       f"serve's {step.split()[0]} ({label}) is the dry run's, word for word, up to VM name and "
                       "workspace", f"dry:   {want_lines[n]}\nserve: {got_argv}")

        # (2) The environment of every call is exactly the fixed one.
        envs = [e for _, e in logged]
        tap.ok(logged and all(e == fixed_env for e in envs),
               "every sbx call's environment is exactly PATH, root's HOME and LC_ALL=C: nothing of serve's own "
               "(DOCKER_SANDBOXES_PROXY, XDG_CONFIG_HOME, GH_TOKEN, HOME, SP_*)",
               [e for e in envs if e != fixed_env][:3])
        # (3) Nothing from the request, or serve's environment, in any argv.
        leaked = sorted({x for a, _ in logged for w in a for x in never if x in w})
        bad = forbidden_in(a for a, _ in logged)
        tap.ok(leaked == [] and bad == [],
               "serve: no sbx argv word holds the script's canary, an outcome, the repository, a flag from the "
               "request or a value of serve's environment", leaked + bad)
        tap.ok(not any(x in json.dumps(e) for _, e in logged for x in never),
               "serve: no sbx call's environment holds the script's canary, an outcome, the repository or a value "
               "of serve's environment")
        left = S.B.leftover_containers(state)
        tap.ok(left == [] and S.B.host_processes(state) == [], "nothing of the run is left: no VM, no process",
               left)
    finally:
        if state:
            S.B.force_delete_state(state)
        work.close()
    tap.finish()


if B.BACKEND == "docker":
    docker_main()
if B.BACKEND == "sbx":
    sbx_main()

try:
    clone = work.make_clone("one", {"README.md": b"commands\n"})
    staged_config = work.write_config(["acme/one"])
    config = work.write_config(["acme/one"], runtime=B.RUNTIME, timeout=5, maxInvocations=50)
    state = work.staged_state(staged_config, [("acme/one", clone)])
    wrapper, log = bins.logging_wrapper(REAL, B.BINARY_NAME)
    root_dir = os.path.join(state, B.STATE_DIR_NAME)

    # ---- the dry run ----
    r, doc, dry_out = dry_run(config, state, SCRIPT, B.BINARY_OPTION, wrapper)
    tap.ok(r.returncode == 0 and doc is not None, "dry run writes runtime-commands.json beside config.json",
           r.stderr)
    doc = doc or {"commands": []}
    steps = [c.get("step") for c in doc.get("commands", [])]
    tap.ok(doc.get("runtime") == B.RUNTIME and steps == STEPS,
           f"runtime-commands.json names runtime {B.RUNTIME} and the steps {', '.join(STEPS)} in order",
           json.dumps(doc)[:1500])
    dry = {c["step"]: c["argv"] for c in doc.get("commands", []) if "step" in c and "argv" in c}
    create = dry.get("create", [])
    dry_cid = create[-1] if create else ""
    dry_run_id = dry_cid[len("sp-"):].rsplit("-", 1)[0] if dry_cid.startswith("sp-dry-") else ""
    dry_root = os.path.join(root_dir, dry_run_id)
    tap.ok(dry_run_id.startswith("dry-") and dry_cid == f"sp-{dry_run_id}-0"
           and after(create, "--bundle") == dry_out and after(create, "--pid-file") == f"{dry_root}/{dry_cid}.pid"
           and all(after(argv, "--root") == dry_root for argv in dry.values()),
           "dry run: container sp-dry-XXXX-0, the --out bundle, its pid file and --root below --state",
           json.dumps(dry)[:1500])
    fifo_step = next((c for c in doc.get("commands", []) if c.get("step") == "start"), {})
    tap.ok(all(argv and argv[0] == os.path.realpath(wrapper) for argv in dry.values())
           and all(verb_of(dry.get(s, [])) == VERBS[s] for s in STEPS
                   if not (FIFO_START and s == "start") and s != "remove"),
           f"dry run: every command runs the {B.BINARY_OPTION} binary, with its step's verb",
           json.dumps(dry)[:1500])
    if FIFO_START:
        tap.ok("start" not in dry and fifo_step.get("exec_fifo") == f"{dry_root}/{dry_cid}/exec.fifo",
               "dry run (runc): the start is no command but the read of the init's exec fifo, in its --root",
               fifo_step)
    if DIRECT_REMOVE:
        remove_step = next((c for c in doc.get("commands", []) if c.get("step") == "remove"), {})
        # The bundle is gone by now; test_bundle_structure compares the
        # cgroup with its config.json's cgroupsPath.
        tap.ok("remove" not in dry and set(remove_step) == {"step", "cgroup", "state"}
               and remove_step.get("state") == f"{dry_root}/{dry_cid}"
               and remove_step.get("cgroup") == f"/sealed-probe/{dry_cid[len('sp-'):]}",
               "dry run (runc): the removal is no command but the container's cgroup, /sealed-probe/<run>-0, and "
               "its state directory in its --root", remove_step)
    bad = forbidden_in(dry.values())
    tap.ok(bad == [] and MARKER not in json.dumps(doc),
           "dry run: no flag from the request, and never --allow-flag-override, --debug, --strace or --profile",
           bad)
    r2, doc2, _ = dry_run(config, state, "print(1)\n")
    steps2 = {c["step"]: c["argv"] for c in (doc2 or {}).get("commands", []) if "argv" in c}
    tap.ok(r2.returncode == 0 and steps2 and all(a[0] == REAL for a in steps2.values()),
           f"dry run without {B.BINARY_OPTION}: the installed {B.BINARY_NAME}, {REAL}", json.dumps(doc2)[:800])
    if B.BACKEND == "gvisor":
        flags = create[3:6] if len(create) > 6 else []
        tap.ok(flags == ["--network=none", "--oci-seccomp", "--platform=ptrace"],
               "dry run (gvisor): --network=none --oci-seccomp --platform=ptrace follow --root", create)

    # ---- the dry run of a sandbox started ahead (issue 29) ----
    cold_args = (LAST_CONFIG[0] if LAST_CONFIG else {}).get("process", {}).get("args", []) if r2 else []
    r3, doc3, _ = dry_run(config, state, "print(1)\n", "--started-ahead")
    args3 = (LAST_CONFIG[0] if LAST_CONFIG else {}).get("process", {}).get("args", [])
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "bundle", "waiter.py")) as f:
        waiter = f.read()
    tap.ok(r3.returncode == 0 and cold_args[:4] == args3[:4] == ["/usr/bin/python3", "-I", "-S", "-B"]
           and cold_args[4:] == ["/probe/probe.py"] and args3[4:] == ["-c", waiter],
           "dry run --started-ahead: the process is python3 -I -S -B -c and src/bundle/waiter.py whole, where a "
           "cold one names /probe/probe.py", (r3.stderr, cold_args, args3[:5]))
    steps3 = [c.get("step") for c in (doc3 or {}).get("commands", [])]
    signal_step = next((c for c in (doc3 or {}).get("commands", []) if c.get("step") == "signal"), {})
    tap.ok(steps3 == STEPS[:2] + ["signal"] + STEPS[2:] and "closes the write end" in signal_step.get("stdin", ""),
           "dry run --started-ahead: runtime-commands.json has the signal (stdin closed) between start and kill",
           steps3)

    # ---- serve, through the logging wrapper ----
    extra = (B.BINARY_OPTION, wrapper)
    with S.serving(work, config, state, extra=extra) as srv:
        run = B.run_of(state)
        yes = srv.probe(SCRIPT, "acme/one")
        tap.ok(yes == S.answer("YES"), "serve answers a probe through the logging wrapper", yes)
        gone_after = {"answered": removed_now(state, run)}
        slept = srv.probe(SLEEPER, "acme/one")
        tap.ok(slept == S.ERROR_LINE, "a probe past the timeout answers ERROR", slept)
        gone_after["timed_out"] = removed_now(state, run)
        occupied = []
        if DIRECT_REMOVE:
            occupier = threading.Thread(target=occupy_probe_cgroup, args=(run, occupied))
            occupier.start()
            held = srv.probe(HELD, "acme/one")
            occupier.join()
            tap.ok(held == S.answer("YES") and len(occupied) == 1,
                   "runc: a probe whose cgroup got a child cgroup while it ran still answers", (held, occupied))
            gone_after["answered (its cgroup busy)"] = removed_now(state, run)
        rc = srv.stop()
        tap.ok(rc == 0, "serve stops cleanly", srv.stderr()[-400:])
    records = S.audit_lines(state)
    tap.ok(run is not None and [r["status"] for r in records]
           == ["answered", "timed_out"] + (["answered"] if DIRECT_REMOVE else []),
           "the audit log holds the answered probe and the timed-out one"
           + (" (runc: and the one whose cgroup was busy)" if DIRECT_REMOVE else ""), records)
    logged = B.read_log(log)
    real_wrapper = os.path.realpath(wrapper)
    tap.ok(logged and all(a[0] == real_wrapper for a in logged),
           f"serve runs every {B.BINARY_NAME} command through the binary it verified", logged[:3])

    def commands_of(cid):
        return [a for a in logged if cid in a]

    expect = {"answered": ["create", "start", "delete"], "timed_out": ["create", "start", "kill", "delete"]}
    if FIFO_START:
        expect = {k: [v for v in seq if v != "start"] for k, seq in expect.items()}
    if DIRECT_REMOVE:
        expect = {k: [v for v in seq if v != "delete"] for k, seq in expect.items()}
    for rec in records[:2]:
        # The sandbox it ran in: its own number, or pN when made ahead.
        cid = f"sp-{run}-{rec['sandbox'] or S.audit_id_inv(rec)}"
        cmds = commands_of(cid)
        verbs = [verb_of(a) for a in cmds]
        tap.ok(verbs == expect[rec["status"]],
               f"serve's commands for the {rec['status']} probe: {' -> '.join(expect[rec['status']])}",
               [" ".join(a) for a in cmds])
        if DIRECT_REMOVE:
            left = gone_after.get(rec["status"], {}).get(cid, ["not looked at"])
            tap.ok(left == [], f"runc, {rec['status']}: right after the answer, with serve still up, neither the "
                   f"container's state directory nor its cgroup in any hierarchy is left", left)
        bundle = after(cmds[0], "--bundle") if cmds else None
        work_run = os.path.join(S.work_dir(state), run or "")
        tap.ok(bundle is not None and bundle.startswith(work_run + "/")
               and after(cmds[0], "--pid-file") == os.path.join(root_dir, run, cid + ".pid"),
               f"serve's create ({rec['status']}): a bundle in its work directory, the pid file in its --root",
               cmds[:1])
        for argv in cmds:
            step = {"create": "create", "start": "start", "kill": "kill (on timeout or stop)",
                    "delete": "delete"}.get(verb_of(argv))
            want = template(dry.get(step, []), dry_run_id, dry_cid, dry_out)
            got = template(argv, run, cid, bundle)
            tap.ok(step is not None and got == want,
                   f"serve's {verb_of(argv)} ({rec['status']}) is the dry run's, up to run, container and bundle",
                   f"dry:   {want}\nserve: {got}")
    if DIRECT_REMOVE and len(records) > 2:
        rec = records[2]
        cid = f"sp-{run}-{rec['sandbox'] or S.audit_id_inv(rec)}"
        verbs = [verb_of(a) for a in commands_of(cid)]
        left = gone_after.get("answered (its cgroup busy)", {}).get(cid, ["not looked at"])
        tap.ok(verbs == ["create", "delete"] and left == [],
               "runc: a cgroup that rmdir cannot remove (a child cgroup in it) falls back to `delete --force`, "
               "which removes the child, the cgroup in every hierarchy and the state directory",
               {"verbs": verbs, "left": left, "occupied": occupied})
    bad = forbidden_in(logged)
    tap.ok(bad == [] and not any(MARKER in " ".join(a) for a in logged),
           "serve: no argv holds a flag from the request, nor --allow-flag-override, --debug, --strace, --profile",
           bad)
    # delete stays allowed under runc: the orphan sweeps at start and stop
    # run it for whatever a run left (here nothing).
    allowed = ("create", "kill", "delete", "--version") + (() if FIFO_START else ("start",))
    others = [a for a in logged if verb_of(a) not in allowed]
    tap.ok(others == [], f"serve runs {B.BINARY_NAME} only for {', '.join(allowed)}", others[:5])
    left = B.leftover_containers(state)
    tap.ok(left == [] and S.cgroup_dirs(run or "none") == [], "nothing of the run is left", left)
finally:
    made = list(bins.dirs)
    bins.close()
    B.force_delete(work.states[0] if work.states else "/nonexistent")
    work.close()
tap.ok(made and not any(os.path.lexists(d) for d in made), "the wrapper and its directory are removed")
tap.finish()
