"""The docker backend refuses a daemon that does not give the sandbox it
promises (docs/runtimes.md), before anything runs, against a fake Docker
Engine API on a Unix socket (sp_fake_docker.py, one mode per case):

    down             nothing at --docker-socket      "daemon is not reachable"
    old-api          ApiVersion 1.40                 "API version", "1.40", "1.41"
    no-runc          no `runc` in Runtimes           "runc"
    no-seccomp       no name=seccomp option          "seccomp"
    bad-image-label  the image's label is another    "digest label does not match the rootfs"
                     digest
    drops-field      inspect shows a HostConfig      the field's name ("PidsLimit",
                     field changed                   "MaskedPaths")

For each, `sealed-probe-proxy check --docker-socket FAKE` (config runtime
"docker") exits 1 with stdout empty and a message holding every needle, and
the socket's path appears nowhere in what it prints.  The fake's request log
shows that it stopped at the cause: the verify calls in their order, nothing
after the call that showed the cause (for drops-field, only the created
container's delete), no containers/create before one was due, no import over
an image with the wrong label, every path under /v1.41 (but /_ping and
/version), and never a registry pull (fromImage, X-Registry-Auth).  No audit
line and no workspace are left.

A control with the capable fake: every check up to the canary passes (the
import is of the rootfs tar with its digest label, the container is created,
inspected, started, waited for, inspected and deleted, in that order), and
then the canary fails, since the fake runs nothing.

Registered once, only when tests/meson.build's sp_backends has docker; it
runs with SP_BACKEND=runc (SP_BACKEND_FIXED): staging takes a runc config,
and check then reads a docker one.  Selected with docker by SP_BACKENDS."""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, bail_out, ci, require_root_and, skip_all  # noqa: E402

require_root_and("runc", "git")
_selected = os.environ.get("SP_BACKENDS")
if _selected is not None and "docker" not in [b.strip() for b in _selected.split(",")]:
    if ci():
        bail_out(f"backend docker not selected by SP_BACKENDS={_selected}: under CI=true every backend must run")
    skip_all("backend docker not selected by SP_BACKENDS")

import sp_serve as S  # noqa: E402
from sp_fake_docker import DIGEST_LABEL, FakeDocker  # noqa: E402

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
API = "/v1.41/"
VERIFY = [("GET", "/_ping"), ("GET", "/version"), ("GET", "/v1.41/info")]
HOST_CONFIG_KEYS = ("NetworkMode", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "Memory", "MemorySwap", "PidsLimit",
                    "NanoCpus", "Ulimits", "Tmpfs", "MaskedPaths", "ReadonlyPaths", "Runtime", "OomScoreAdj",
                    "IpcMode", "CgroupnsMode", "CgroupParent", "Mounts")
CREATE_KEYS = ("Image", "Cmd", "Entrypoint", "WorkingDir", "Env", "User", "Hostname", "Domainname", "Labels",
               "NetworkDisabled", "HostConfig")

# mode, --field, the strings the message must hold (case-sensitive).
CASES = [
    ("down", None, ["daemon is not reachable"]),
    ("old-api", None, ["API version", "1.40", "1.41"]),
    ("no-runc", None, ["runc"]),
    ("no-seccomp", None, ["seccomp"]),
    ("bad-image-label", None, ["digest label does not match the rootfs"]),
    ("drops-field", "PidsLimit", ["PidsLimit"]),
    ("drops-field", "MaskedPaths", ["MaskedPaths"]),
]

tap = Tap()
work = S.Work("sp-docker-verify-")
sockets = tempfile.mkdtemp(prefix="sp-dsock-")  # short: sun_path holds 107 bytes


def check(config, state, socket_path):
    argv = [S.PROXY, "check", "--config", config, "--state", state, "--rootfs", work.rootfs, "--probe-ids",
            S.probe_ids(), "--docker-socket", socket_path, "--run-dir", S.B.run_dir]
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, env=ENV)


def step(e):
    return (e["method"], e["path"])


def is_container_op(e, op):
    return re.fullmatch(r"/v1\.41/containers/[^/]+/" + op, e["path"]) is not None


def pulls(log):
    """Requests that would reach a registry: fromImage anywhere, a registry
    credential header, a push or a distribution lookup."""
    return [e["target"] for e in log
            if "fromImage" in e["target"] or "fromImage" in str(e.get("json", ""))
            or any(k.lower() == "x-registry-auth" for k, _ in e.get("headers", []))
            or "/distribution/" in e["path"] or e["path"].endswith("/push") or e["path"].startswith("/v1.41/auth")]


def unversioned(log):
    return [e["target"] for e in log if e["path"] not in ("/_ping", "/version") and not e["path"].startswith(API)]


def is_sweep(e):
    """The proxy's orphan sweep of its own state's containers: the one
    listing it makes at start, once verified, and again as it stops, the
    refusal included.  It creates, starts and removes nothing by itself."""
    return e["method"] == "GET" and e["path"] == "/v1.41/containers/json" and e["status"] == 200


def stopped_at_cause(mode, log):
    """What the log shows happened after the cause was seen; [] when nothing
    should have and nothing did.  The orphan sweep (is_sweep) is the one
    call a verified runtime still gets after a refusal: the proxy's
    cleanup as it stops."""
    bad = []
    log = [e for e in log if not is_sweep(e)]
    creates = [e for e in log if e["path"] == "/v1.41/containers/create"]
    imports = [e for e in log if e["path"] == "/v1.41/images/create"]
    if mode == "down":
        return [f"requests reached a server that is not there: {log}"] if log else []
    if not log:
        return ["no request reached the fake"]
    expect = VERIFY[:2] if mode == "old-api" else VERIFY
    if [step(e) for e in log[:len(expect)]] != expect:
        bad.append(f"the verify calls are not {expect}: {[step(e) for e in log[:3]]}")
    if mode == "old-api":
        if step(log[-1]) != ("GET", "/version") or any(e["path"].startswith(API) for e in log):
            bad.append("requests after /version showed ApiVersion 1.40")
    elif mode in ("no-runc", "no-seccomp"):
        if step(log[-1]) != ("GET", "/v1.41/info"):
            bad.append(f"requests after /v1.41/info: {[e['target'] for e in log[3:]]}")
    elif mode == "bad-image-label":
        if imports:
            bad.append(f"an import over the mislabelled image: {[e['target'] for e in imports]}")
        last = log[-1]
        if not (last["method"] == "GET" and re.fullmatch(r"/v1\.41/images/sealed-probe/rootfs:[0-9a-f]{12}/json",
                                                         last["path"]) and last["status"] == 200):
            bad.append(f"requests after the image's inspect: {last['target']}")
    elif mode == "drops-field":
        if len(creates) != 1 or creates[0]["status"] != 201:
            bad.append(f"{len(creates)} creates, not one")
            return bad
        cid = creates[0]["container"]
        at = log.index(creates[0])
        after = log[at + 1:]
        if not after or step(after[0]) != ("GET", f"/v1.41/containers/{cid}/json"):
            bad.append(f"the create is not followed by its inspect: {[e['target'] for e in after[:1]]}")
            return bad
        # The delete, then a look that finds the container gone (404).
        rest = after[1:]
        confirm = [e for e in rest if step(e) == ("GET", f"/v1.41/containers/{cid}/json") and e["status"] == 404]
        rest = [e for e in rest if e not in confirm]
        if not confirm:
            bad.append("the delete was not confirmed by an inspect answered 404")
        if any(e["method"] != "DELETE" or e["path"] != f"/v1.41/containers/{cid}" for e in rest):
            bad.append(f"requests after the inspect other than the container's delete: {[e['target'] for e in rest]}")
        deletes = [e for e in rest if e["method"] == "DELETE" and e["status"] == 204
                   and e["query"].get("force") == ["1"] and e["query"].get("v") == ["1"]]
        if not deletes:
            bad.append("the created container was not deleted (DELETE ?force=1&v=1, 204)")
    if mode != "drops-field" and creates:
        bad.append(f"containers/create before any run was due: {[e['target'] for e in creates]}")
    if any(is_container_op(e, "start") or is_container_op(e, "wait") for e in log):
        bad.append("a container was started or waited for")
    return bad


def nothing_left(state):
    found = []
    lines = S.audit_lines(state, admissions=True)
    if lines:
        found.append(f"audit lines: {lines}")
    if os.path.isdir(S.work_dir(state)) and os.listdir(S.work_dir(state)):
        found.append(f"{S.work_dir(state)} holds {os.listdir(S.work_dir(state))}")
    return found


def fake_for(mode, field):
    d = tempfile.mkdtemp(prefix="d", dir=sockets)
    return FakeDocker(os.path.join(d, "docker.sock"), mode, os.path.join(d, "requests.jsonl"), field=field)


def run_case(mode, field, needles, staged_config, config, clone):
    name = mode if field is None else f"{mode} ({field})"
    state = work.staged_state(staged_config, [("acme/one", clone)])
    fake = fake_for(mode, field).start()
    try:
        r = check(config, state, fake.socket)
    finally:
        rc = fake.stop()
    log = fake.requests()
    out = r.stdout + r.stderr
    tap.ok(r.returncode == 1 and r.stdout == "" and all(n in r.stderr for n in needles),
           f"{name}: check exits 1 naming {needles}", f"exit {r.returncode}: {out}")
    leaked = [p for p in (fake.socket, os.path.dirname(fake.socket), sockets) if p in out]
    tap.ok(not leaked, f"{name}: the docker socket's path appears nowhere in check's output", f"{leaked}: {out}")
    tap.ok(rc == 0 and not stopped_at_cause(mode, log), f"{name}: the fake saw nothing after the cause",
           f"fake exit {rc}; {stopped_at_cause(mode, log)}; log: {[(e['method'], e['target']) for e in log]}; "
           f"fake's stderr: {fake.stderr()}")
    tap.ok(not pulls(log) and not unversioned(log), f"{name}: no registry pull, every call under /v1.41",
           f"pulls {pulls(log)}, unversioned {unversioned(log)}")
    left = nothing_left(state)
    tap.ok(left == [], f"{name}: no audit line and no workspace left", left)


def control(staged_config, config, clone):
    """The capable fake: check gets through verify, the image and a whole
    canary run, and fails only because nothing ran."""
    state = work.staged_state(staged_config, [("acme/one", clone)])
    fake = fake_for("capable", None).start()
    try:
        r = check(config, state, fake.socket)
    finally:
        rc = fake.stop()
    log = fake.requests()
    out = r.stdout + r.stderr
    steps = [step(e) for e in log]
    tap.ok(rc == 0 and r.returncode == 1 and r.stdout == "" and "canary" in r.stderr,
           "capable (control): check gets as far as the canary, which fails: the fake runs nothing",
           f"exit {r.returncode}: {out}; log: {steps}")
    tap.ok(steps[:3] == VERIFY, "capable (control): verify is /_ping, /version, /v1.41/info, in that order", steps)
    imports = [e for e in log if e["path"] == "/v1.41/images/create"]
    problems = []
    if len(imports) != 1:
        problems.append(f"{len(imports)} imports")
    else:
        imp = imports[0]
        q = imp["query"]
        m = re.fullmatch(rf"LABEL {re.escape(DIGEST_LABEL)}=sha256:([0-9a-f]{{64}})", (q.get("changes") or [""])[0])
        headers = {k.lower(): v for k, v in imp["headers"]}
        at = log.index(imp)
        image_path = f"/v1.41/images/sealed-probe/rootfs:{(q.get('tag') or [''])[0]}/json"
        if not m or q.get("fromSrc") != ["-"] or q.get("repo") != ["sealed-probe/rootfs"] \
                or q.get("tag") != [m.group(1)[:12]] or len(q.get("changes", [])) != 1:
            problems.append(f"the import's query: {imp['target']}")
        if headers.get("content-type") != "application/x-tar" or imp["body_length"] < 1 << 20 or imp["status"] != 200:
            problems.append(f"the import's body: {headers.get('content-type')}, {imp['body_length']} bytes, "
                            f"status {imp['status']}")
        before = [e for e in log[:at] if e["path"] == image_path]
        after = [e for e in log[at + 1:] if e["path"] == image_path]
        if not before or before[-1]["status"] != 404:
            problems.append("the import was not preceded by a 404 inspect of its image")
        if not after or after[0]["status"] != 200:
            problems.append("the import was not followed by an inspect of its image")
    tap.ok(not problems, "capable (control): the rootfs is imported once, as a tar with its digest label, "
           "between a 404 and a 200 inspect", problems)
    creates = [e for e in log if e["path"] == "/v1.41/containers/create"]
    problems = []
    if len(creates) != 1 or creates[0]["status"] != 201:
        problems.append(f"{len(creates)} creates: {[e['status'] for e in creates]}")
    else:
        c = creates[0]
        cid = c["container"]
        body = c.get("json") or {}
        if not re.fullmatch(r"sp-[0-9a-f]{12}-[0-9]+", (c["query"].get("name") or [""])[0]):
            problems.append(f"the container's name: {c['target']}")
        missing = [k for k in CREATE_KEYS if k not in body]
        missing += [f"HostConfig.{k}" for k in HOST_CONFIG_KEYS if k not in (body.get("HostConfig") or {})]
        if missing:
            problems.append(f"the create body lacks {missing}")
        base = f"/v1.41/containers/{cid}"
        run = [step(e) for e in log[log.index(c) + 1:] if e["path"].startswith(base)]
        want = [("GET", base + "/json"), ("POST", base + "/attach"), ("POST", base + "/start"),
                ("POST", base + "/wait"), ("GET", base + "/json"), ("DELETE", base), ("GET", base + "/json")]
        if run != want:
            problems.append(f"the run's calls: {run}")
    tap.ok(not problems, "capable (control): one container, created with every mapped field, then inspect, attach "
           "(its stdin), start, wait, inspect, delete", problems)
    tap.ok(not pulls(log) and not unversioned(log), "capable (control): no registry pull, every call under /v1.41",
           f"pulls {pulls(log)}, unversioned {unversioned(log)}")
    leaked = [p for p in (fake.socket, os.path.dirname(fake.socket), sockets) if p in out]
    tap.ok(not leaked, "capable (control): the docker socket's path appears nowhere in check's output", out)


try:
    clone = work.make_clone("one", {"README.md": b"verify me\n"})
    # stage takes a runc config (verb_stage.c); check then reads a docker one.
    staged_config = work.write_config(["acme/one"], maxInvocations=50, runtime="runc")
    config = work.write_config(["acme/one"], maxInvocations=50, runtime="docker")
    for mode, field, needles in CASES:
        run_case(mode, field, needles, staged_config, config, clone)
    control(staged_config, config, clone)
finally:
    work.close()
    subprocess.run(["rm", "-rf", sockets])
tap.finish()
