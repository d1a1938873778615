#!/usr/bin/python3
"""The agent firewall's own enclaves config test cases, against this proxy.

Each row below was written by hand from reading the firewall's tests at its
snapshot f5509576 (2026-08-22): src/parsers/enclave-parser.test.ts
("normalizeEnclavesConfig", "enclaves JSON Schema") and
src/enclave/preflight.test.ts ("validateEnclavesConfig"), with the bounds of
its docs/awf-config.schema.json and src/enclave/preflight.ts.  A row holds
the document, the firewall's verdict, ours, a fragment our one-line message
must hold, and, where the verdicts differ, the docs/config.md text that says
why ours is stricter.  The test requires:
  - `sealed-probe-proxy config --config -` gives our verdict (exit 0 with one
    JSON line, or exit 1 with one message line holding the fragment);
  - every difference is one way (the firewall accepts, we refuse: never the
    reverse) and is documented: its reason text is in docs/config.md;
  - no message echoes a repository name or a model name of the document.
Rows whose firewall case needs its host settings (API proxy routes, Docker
socket mounts) are left out: they have no counterpart here.

TAP on stdout; stdlib only.
"""

import json
import os
import subprocess
import sys

PREFIX = b"sealed-probe-proxy: config: "
REPO = {"repo": "octo-org/private-service", "sensitivity": "confidential"}  # the firewall's test repository


def entry(kind="script", **kw):
    e = {"script": {}} if kind == "script" else {"agent": {"model": "gpt-5"}}
    e["repos"] = [REPO]
    e.update(kw)
    return e


# (name, where in the firewall, document, firewall accepts, we accept,
#  fragment of our message, docs/config.md text saying why we are stricter)
VECTORS = [
    ("script entry, empty script object", "enclave-parser.test.ts: accepts the gh-aw keyed-array contract",
     {"enclaves": [entry()]}, True, True, None, None),
    ("script entry with timeout 45", "enclave-parser.test.ts: normalizes the keyed-array contract",
     {"enclaves": [entry(timeout=45)]}, True, True, None, None),
    ("minimal preflight config (internal repository)", "preflight.test.ts: accepts a minimal normalized foundation",
     {"enclaves": [{"script": {}, "repos": [{"repo": "octo/private", "sensitivity": "internal"}]}]},
     True, True, None, None),
    ("script and agent entries", "enclave-parser.test.ts: accepts the gh-aw keyed-array contract",
     {"enclaves": [entry(timeout=45), entry("agent", timeout=180)]}, True, False,
     "enclaves[1].agent: is refused: an agent entry runs a model", "no model runs in this proxy"),
    ("agent entry alone", "enclave-parser.test.ts: accepts the gh-aw keyed-array contract",
     {"enclaves": [entry("agent")]}, True, False, "enclaves[0].agent: is refused", "no model runs in this proxy"),
    ("runtime gvisor with an image override", "enclave-parser.test.ts: preserves trusted executor overrides",
     {"enclaves": [entry(runtime="gvisor", image="registry/script@sha256:abc")]}, True, False,
     "enclaves[0].image: is refused", "never an image named in the config"),
    ("runtime gvisor", "enclave-parser.test.ts: preserves trusted executor overrides (without the image)",
     {"enclaves": [entry(runtime="gvisor")]}, True, True, None, None),
    ("entry without repos", "enclave-parser.test.ts: requires repos and exactly one executor key per entry",
     {"enclaves": [{"script": {}}]}, False, False, "enclaves[0].repos: required", None),
    ("entry without an executor key", "enclave-parser.test.ts: requires repos and exactly one executor key",
     {"enclaves": [{"repos": [REPO]}]}, False, False, "must declare exactly one of \"script\" and \"agent\"", None),
    ("entry with both executor keys", "enclave-parser.test.ts: rejects entries that do not declare exactly one",
     {"enclaves": [{"script": {}, "agent": {"model": "gpt-5"}, "repos": [REPO]}]}, False, False,
     "must declare exactly one of \"script\" and \"agent\"", None),
    ("two script entries", "enclave-parser.test.ts: allows at most one entry per executor kind",
     {"enclaves": [entry(), entry()]}, False, False, "enclaves[1]: is a second \"script\" entry", None),
    ("two agent entries", "enclave-parser.test.ts: allows at most one entry per executor kind",
     {"enclaves": [entry("agent"), {"agent": {"model": "gpt-4"}, "repos": [REPO]}]}, False, False,
     "enclaves[0].agent: is refused", None),
    ("agent entry without model", "enclave-parser.test.ts: requires agent.model and rejects legacy shapes",
     {"enclaves": [{"agent": {}, "repos": [REPO]}]}, False, False, "enclaves[0].agent: is refused", None),
    ("legacy object shape", "enclave-parser.test.ts: requires agent.model and rejects legacy shapes",
     {"enclaves": {"enabled": True, "privateRepos": [REPO], "executors": {"script": {"enabled": True}}}},
     False, False, "enclaves: must be an array of executor entries", None),
    ("repositories instead of repos", "enclave-parser.test.ts: rejects legacy shapes",
     {"enclaves": [{"script": {}, "repositories": [REPO]}]}, False, False, "enclaves[0].repos: required", None),
    ("script.enabled", "enclave-parser.test.ts: rejects legacy shapes",
     {"enclaves": [{"script": {"enabled": True}, "repos": [REPO]}]}, False, False,
     "enclaves[0].script: unknown key \"enabled\"", None),
    ("maxScriptBytes 65537", "enclave-parser.test.ts: keeps trusted controls closed and bounded",
     {"enclaves": [entry(script={"maxScriptBytes": 65537})]}, False, False,
     "enclaves[0].script.maxScriptBytes: must be an integer from 1 to 65536", None),
    ("maxScriptBytes 65536", "the schema's maximum", {"enclaves": [entry(script={"maxScriptBytes": 65536})]},
     True, True, None, None),
    ("agent with a tools key", "enclave-parser.test.ts: keeps trusted controls closed and bounded",
     {"enclaves": [{"agent": {"model": "gpt-5", "tools": ["shell"]}, "repos": [REPO]}]}, False, False,
     "enclaves[0].agent: is refused", None),
    ("timeout 541, script", "enclave-parser.test.ts: keeps trusted controls closed and bounded",
     {"enclaves": [entry(timeout=541)]}, False, False, "enclaves[0].timeout: must be at most 300 seconds", None),
    ("timeout 540, script", "the schema's maximum (MAX_ENCLAVE_TIMEOUT_SECONDS)",
     {"enclaves": [entry(timeout=540)]}, True, False, "enclaves[0].timeout: must be at most 300 seconds",
     "a probe holds a sandbox slot"),
    ("timeout 0", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(timeout=0)]}, False, False, "enclaves[0].timeout: must be an integer from 1 to 300", None),
    ("runtime invalid", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(runtime="invalid")]}, False, False, "enclaves[0].runtime: must be one of", None),
    ("memoryLimit lots", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(memoryLimit="lots")]}, False, False, "enclaves[0].memoryLimit: must be a string of digits",
     None),
    ("memoryLimit 262144k", "preflight.ts: a Docker size (k is KiB)",
     {"enclaves": [entry(memoryLimit="262144k")]}, True, False, "enclaves[0].memoryLimit: must be a string of digits",
     "Other units (`k`, `t`"),
    ("memoryLimit 32m", "preflight.ts: any Docker size",
     {"enclaves": [entry(memoryLimit="32m")]}, True, False, "enclaves[0].memoryLimit: must be at least \"64m\"",
     "leaving python3 room"),
    ("cpuLimit 0", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(cpuLimit="0")]}, False, False, "enclaves[0].cpuLimit: must be a Docker --cpus value", None),
    ("cpuLimit all", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(cpuLimit="all")]}, False, False, "enclaves[0].cpuLimit: must be a Docker --cpus value",
     None),
    ("cpuLimit 0.5", "enclave-parser.test.ts: keeps trusted controls closed and bounded (in an agent entry)",
     {"enclaves": [entry(cpuLimit="0.5")]}, True, False, "enclaves[0].cpuLimit: asks less than \"1\"",
     "one CPU, this proxy's fixed limit"),
    ("cpuLimit 2", "the firewall's pattern", {"enclaves": [entry(cpuLimit="2")]}, True, True, None, None),
    ("pidsLimit 0", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(pidsLimit=0)]}, False, False, "enclaves[0].pidsLimit: must be an integer from 1 to 4096",
     None),
    ("pidsLimit 32", "enclave-parser.test.ts: keeps trusted controls closed and bounded (in an agent entry)",
     {"enclaves": [entry(pidsLimit=32)]}, True, False,
     "enclaves[0].pidsLimit: 32 is stricter than 64 processes", "this proxy's fixed limit"),
    ("pidsLimit 128, the firewall's default", "enclave-options.ts: ENCLAVE_SCRIPT_EXECUTOR_DEFAULTS",
     {"enclaves": [entry(pidsLimit=128)]}, True, True, None, None),
    ("pidsLimit 4097", "the schema's maximum", {"enclaves": [entry(pidsLimit=4097)]}, False, False,
     "enclaves[0].pidsLimit: must be an integer from 1 to 4096", None),
    ("tmpfsLimit 64", "preflight.test.ts: rejects malformed executor controls (no unit)",
     {"enclaves": [entry(tmpfsLimit="64")]}, False, False, "enclaves[0].tmpfsLimit: must be a Docker size", None),
    ("tmpfsLimit 24m", "enclave-parser.test.ts: keeps trusted controls closed and bounded (in an agent entry)",
     {"enclaves": [entry(tmpfsLimit="24m")]}, True, True, None, None),
    ("tmpfsLimit 8m", "preflight.ts: any Docker size", {"enclaves": [entry(tmpfsLimit="8m")]}, True, False,
     "enclaves[0].tmpfsLimit: asks less than \"16m\"", "this proxy's fixed /tmp"),
    ("maxOutputBytes 0", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(maxOutputBytes=0)]}, False, False,
     "enclaves[0].maxOutputBytes: must be an integer from 1 to 8192", None),
    ("maxOutputBytes 8193", "preflight.test.ts: rejects script disclosure bounds the container cannot enforce",
     {"enclaves": [entry(maxOutputBytes=8193)]}, False, False,
     "enclaves[0].maxOutputBytes: must be an integer from 1 to 8192", None),
    ("maxOutputBytes 2048", "enclave-parser.test.ts: keeps trusted controls closed and bounded (in an agent entry)",
     {"enclaves": [entry(maxOutputBytes=2048)]}, True, False,
     "enclaves[0].maxOutputBytes: 2048 is stricter than 8192 bytes", "the largest output this proxy reads"),
    ("maxInvocations 0", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(maxInvocations=0)]}, False, False,
     "enclaves[0].maxInvocations: must be an integer from 1 to 10000", None),
    ("maxInvocations 3", "enclave-parser.test.ts: keeps trusted controls closed and bounded",
     {"enclaves": [entry(maxInvocations=3)]}, True, True, None, None),
    ("repo not-a-slug", "preflight.test.ts: rejects malformed executor controls",
     {"enclaves": [entry(repos=[{"repo": "not-a-slug", "sensitivity": "internal"}])]}, False, False,
     "enclaves[0].repos[0].repo: must be", None),
    ("repo with capitals", "PRIVATE_REPOSITORY_PATTERN accepts [A-Za-z]",
     {"enclaves": [entry(repos=[{"repo": "Octo/Private", "sensitivity": "internal"}])]}, True, False,
     "enclaves[0].repos[0].repo: must be lowercase", "normalized only: lowercase"),
    ("repo listed twice with conflicting classes", "preflight.test.ts: rejects repositories shared with conflicting",
     {"enclaves": [entry(repos=[REPO, dict(REPO, sensitivity="internal")])]}, False, False,
     "enclaves[0].repos[1]: duplicate of enclaves[0].repos[0]", None),
    ("repos empty", "preflight.test.ts: rejects an empty repository list (the schema's minItems 1)",
     {"enclaves": [entry(repos=[])]}, False, False, "enclaves[0].repos: must be an array", None),
    ("repo without sensitivity", "the schema: repos items require repo and sensitivity",
     {"enclaves": [entry(repos=[{"repo": "octo/private"}])]}, False, False,
     "enclaves[0].repos[0].sensitivity: required", None),
    ("empty enclaves list", "the schema's minItems 1", {"enclaves": []}, False, False,
     "enclaves: must be an array of executor entries", None),
    ("sealed repository", "enclave-options.ts: ENCLAVE_SENSITIVITY_RUN_BITS sealed 0 (accepted; never runs)",
     {"enclaves": [entry(repos=[{"repo": "octo/private", "sensitivity": "sealed"}])]}, True, True, None, None),
]


def run(proxy, doc):
    p = subprocess.run([proxy, "config", "--config", "-"], input=(json.dumps(doc) + "\n").encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout, p.stderr


def values(doc):
    """The repository and model names of a document: never to be echoed."""
    out = []
    for e in doc.get("enclaves", []) if isinstance(doc.get("enclaves"), list) else []:
        for r in e.get("repos", []) if isinstance(e.get("repos"), list) else []:
            out.append(r.get("repo", "") if isinstance(r, dict) else r)
        out.append(e.get("agent", {}).get("model", "") if isinstance(e.get("agent"), dict) else "")
    return [v for v in out if isinstance(v, str) and len(v) >= 5]


def main():
    proxy, docs = os.environ.get("SP_PROXY"), os.environ.get("SP_CONFIG_DOC")
    if not (proxy and docs):
        print("Bail out! SP_PROXY and SP_CONFIG_DOC must be set (tests/meson.build sets them)")
        return 1
    with open(docs, encoding="utf-8") as f:
        reference = f.read()
    print(f"1..{3 * len(VECTORS) + 1}")
    n, failed = 0, 0

    def check(ok, name, detail=""):
        nonlocal n, failed
        n += 1
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} - {name}")
        if not ok and detail:
            print("# " + str(detail).replace("\n", "\n# "))

    for name, where, doc, theirs, ours, fragment, why in VECTORS:
        rc, out, err = run(proxy, doc)
        if ours:
            check(rc == 0 and err == b"" and out.count(b"\n") == 1, f"{name}: accepted, as {where}",
                  f"exit {rc}, stderr {err!r}")
        else:
            check(rc == 1 and out == b"" and err.startswith(PREFIX) and err.count(b"\n") == 1
                  and fragment.encode() in err, f"{name}: refused with '{fragment}'", f"exit {rc}, stderr {err!r}")
        if theirs == ours:
            check(why is None, f"{name}: agrees with the firewall ({'accepts' if ours else 'refuses'})")
        else:
            check(theirs and not ours and why is not None and why in reference,
                  f"{name}: stricter than the firewall, documented in docs/config.md", f"why: {why!r}")
        leaked = [v for v in values(doc) if v.encode() in err]
        check(not leaked, f"{name}: the message echoes no repository or model name", leaked)
    agree = sum(t == o for _, _, _, t, o, _, _ in VECTORS)
    check(agree >= len(VECTORS) // 2, f"vectors: {agree} of {len(VECTORS)} agree with the firewall outright")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
