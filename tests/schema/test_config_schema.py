#!/usr/bin/python3
"""The config loader and docs/config.schema.json agree on every vector.

For each file in $SP_VECTORS/accept and $SP_VECTORS/reject:
  (a) `$SP_PROXY config --config FILE` accepts exactly the accept/ vectors
      (exit 0, one JSON line, empty stderr) and rejects the reject/ ones
      (exit 1, one message line on stderr, empty stdout);
  (b) the JSON Schema ($SP_SCHEMA, Draft 2020-12) gives the same verdict;
  (c) the same bytes on stdin (`--config -`) give byte-identical stdout,
      stderr and exit status.
Accepted vectors also have their effective settings checked against the
document with the schema's defaults applied, and no output may echo a
canary token or a privateRepos value.

Some rules are not expressible in JSON Schema, which sees a parsed value.
They are enforced here at parse level, mirroring the loader's strict parser,
and docs/config.md lists them: duplicate keys anywhere; a number with a
fraction or exponent is never an integer (30.0, 3e1); NaN and Infinity;
\\u0000 and unpaired surrogates; a byte order mark and invalid UTF-8;
whitespace other than space, tab, LF and CR; nesting deeper than 64; and a
document larger than 1048576 bytes.

TAP on stdout; stdlib and jsonschema only.
"""

import json
import os
import subprocess
import sys
import tempfile

from jsonschema import Draft202012Validator

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
CANARY = "ghp_CANARY"
PREFIX = "sealed-probe-proxy: config: "

if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)  # the loader reads integers of any length


class ParseReject(Exception):
    """The document fails before schema validation, as it does in the loader."""


class NotAnInteger:
    """Stands for a JSON number with a fraction or exponent.  It is neither
    int nor float, so "type": "integer" rejects it, as the loader does."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"NotAnInteger({self.text})"


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ParseReject(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _reject_constant(name):
    raise ParseReject(f"non-JSON constant {name}")


def _check_value(value, depth):
    if isinstance(value, (dict, list)):
        depth += 1
        if depth > MAX_DEPTH:
            raise ParseReject(f"nesting deeper than {MAX_DEPTH}")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _check_string(key)
            _check_value(item, depth)
    elif isinstance(value, str):
        _check_string(value)


def _check_string(s):
    if "\x00" in s:
        raise ParseReject("\\u0000 in a string")
    try:
        s.encode("utf-8")  # an unpaired surrogate escape cannot be encoded
    except UnicodeEncodeError:
        raise ParseReject("unpaired surrogate") from None


def strict_load(raw):
    """Parses like the loader: returns the document or raises ParseReject."""
    if len(raw) > MAX_BYTES:
        raise ParseReject("larger than 1 MiB")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ParseReject("byte order mark")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise ParseReject(f"invalid UTF-8: {e}") from None
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_float=NotAnInteger,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as e:
        raise ParseReject(f"invalid JSON: {e}") from None
    _check_value(doc, 0)
    return doc


def effective(doc, schema):
    """The settings the loader should print: the block with defaults applied."""
    block = doc.get("sealedProbes", {})
    if not block.get("enabled", False):
        return {"enabled": False}
    props = schema["properties"]["sealedProbes"]["properties"]
    get = lambda k: block.get(k, props[k].get("default"))
    memory = get("memoryLimit")
    unit = {"m": 1 << 20, "g": 1 << 30}[memory[-1].lower()]  # 2G means 2g
    return {
        "enabled": True,
        "privateRepos": block["privateRepos"],
        "runtime": get("runtime"),
        "timeout": get("timeout"),
        "memoryLimit": memory,
        "memoryLimitBytes": int(memory[:-1]) * unit,
        "interpreter": get("interpreter"),
        "maxInvocations": get("maxInvocations"),
    }


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, ok, name, detail=""):
        self.n += 1
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}")
        if not ok:
            self.failed += 1
            for line in str(detail).splitlines() or [""]:
                print(f"#   {line}")
        return ok

    def done(self):
        print(f"1..{self.n}")
        return 1 if self.failed else 0


def run_proxy(proxy, args, stdin_bytes=None):
    p = subprocess.run(
        [proxy, "config"] + args,
        input=stdin_bytes if stdin_bytes is not None else b"",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    return p.returncode, p.stdout, p.stderr


def repo_values(raw):
    """privateRepos strings worth looking for in output (long enough not to
    coincide with the fixed message text)."""
    try:
        doc = json.loads(raw.decode("utf-8", "replace"), parse_constant=lambda c: None)
        repos = doc.get("sealedProbes", {}).get("privateRepos", [])
        return [r for r in repos if isinstance(r, str) and len(r) >= 8]
    except Exception:
        return []


def check_vector(tap, proxy, validator, schema, name, raw, expect_accept):
    path_result = None
    with tempfile.NamedTemporaryFile(prefix="sp-vector-", suffix=".json") as f:
        f.write(raw)
        f.flush()
        path_result = run_proxy(proxy, ["--config", f.name])
    rc, out, err = path_result

    # (a) the loader
    if expect_accept:
        ok = rc == 0 and err == b"" and out.endswith(b"\n") and out.count(b"\n") == 1
        tap.check(ok, f"{name}: loader accepts", f"exit {rc}, stderr {err!r}")
    else:
        ok = (
            rc == 1
            and out == b""
            and err.startswith(PREFIX.encode())
            and err.endswith(b"\n")
            and err.count(b"\n") == 1
        )
        tap.check(ok, f"{name}: loader rejects with one message line", f"exit {rc}, stdout {out!r}, stderr {err!r}")

    # (b) the schema
    try:
        doc = strict_load(raw)
        errors = list(validator.iter_errors(doc))
        schema_accepts = not errors
        why = "; ".join(e.message for e in errors[:3]) or "valid"
    except ParseReject as e:
        doc = None
        schema_accepts = False
        why = f"parse level: {e}"
    tap.check(
        schema_accepts == expect_accept,
        f"{name}: schema {'accepts' if expect_accept else 'rejects'}",
        why,
    )

    # (c) stdin behaves exactly as the file
    stdin_result = run_proxy(proxy, ["--config", "-"], raw)
    tap.check(
        stdin_result == path_result,
        f"{name}: stdin gives identical stdout, stderr and exit",
        f"file {path_result!r}\nstdin {stdin_result!r}",
    )

    # never echo a secret or a repository value
    leaked = [v for v in repo_values(raw) if v.encode() in out + err and not expect_accept]
    tap.check(
        CANARY.encode() not in out + err and not leaked,
        f"{name}: output echoes no canary and no repository value",
        f"stdout {out!r}\nstderr {err!r}",
    )

    if expect_accept and rc == 0 and doc is not None:
        try:
            printed = json.loads(out)
        except ValueError:
            printed = None
        want = effective(doc, schema)
        tap.check(printed == want, f"{name}: effective settings have defaults applied", f"got {printed}\nwant {want}")


def generated_vectors():
    """Boundary sweeps of the two patterns, so that they are checked value by
    value against the loader rather than only at a few vectors."""
    enabled = lambda **kw: {"sealedProbes": dict({"enabled": True, "privateRepos": ["octo/hello"]}, **kw)}
    out = []
    for m in [0, 1, 9, 10, 63, 64, 65, 99, 100, 512, 999, 1000, 1024, 7999, 8000, 8099, 8100, 8189, 8190, 8191,
              8192, 8193, 8200, 8999, 9000, 9999, 10000, 65536]:
        for u in "mM":
            out.append((f"memory-{m}{u}", enabled(memoryLimit=f"{m}{u}"), 64 <= m <= 8192))
    for g in [0, 1, 2, 7, 8, 9, 10, 16, 80]:
        for u in "gG":
            out.append((f"memory-{g}{u}", enabled(memoryLimit=f"{g}{u}"), 1 <= g <= 8))
    for text in ["512k", "512K", "1t", "1T", "512Mi", "2GB", "2Gb", "512mb", "2 G", " 2G", "2G ", "+2G", "2.5G"]:
        out.append((f"memory-{text!r}", enabled(memoryLimit=text), False))
    names = {
        "a/b": True, "a-b/c": True, "a/-": True, "a/_.-": True, "0/0": True, "a/.a": True, "a/..a": True,
        "a/a..": True, "a/.gitx": True, "a/x.git": False, "a/.git": False, "a/X": False, "a-/b": False,
        "-a/b": False, "a--b/c": False, "a/.": False, "a/..": False, "a/b/": False, "/a/b": False,
        "a//b": False, "a.b/c": False, "a/b c": False, "a/b\t": False, "a/b\n": False, "a/b?": False,
        "a/b#": False, "a/b*": False, "a@b/c": False, "a:b/c": False, "a/b%": False, "a/b~": False,
        "a" * 39 + "/b": True, "a" * 40 + "/b": False, "a/" + "b" * 100: True, "a/" + "b" * 101: False,
    }
    for i, (n, ok) in enumerate(names.items()):
        out.append((f"repo-name-{i}", {"sealedProbes": {"enabled": True, "privateRepos": [n]}}, ok))
    for t in [-1, 0, 1, 2, 299, 300, 301]:
        out.append((f"timeout-{t}", enabled(timeout=t), 1 <= t <= 300))
    for v in [0, 1, 99999, 100000, 100001]:
        out.append((f"invocations-{v}", enabled(maxInvocations=v), 1 <= v <= 100000))
    return [(f"generated/{n}", (json.dumps(d) + "\n").encode(), ok) for n, d, ok in out]


def check_cli(tap, proxy, vectors):
    sample = os.path.join(vectors, "accept", "enabled-minimal.json")
    cases = [
        ("no arguments", [], 2),
        ("--config without a value", ["--config"], 2),
        ("unknown option", ["--bogus"], 2),
        ("extra argument", ["--config", sample, "extra"], 2),
        ("repeated --config", ["--config", sample, "--config", sample], 2),
        ("empty --config= value", ["--config="], 2),
    ]
    for what, args, want in cases:
        rc, out, err = run_proxy(proxy, args)
        tap.check(
            rc == want and out == b"" and b"usage: sealed-probe-proxy config --config PATH|-" in err,
            f"cli: {what} is a usage error (exit 2)",
            f"exit {rc}, stdout {out!r}, stderr {err!r}",
        )
    tap.check(
        run_proxy(proxy, ["--config=" + sample]) == run_proxy(proxy, ["--config", sample]),
        "cli: --config=PATH is the same as --config PATH",
    )
    rc, out, err = run_proxy(proxy, ["--help"])
    tap.check(rc == 0 and out.startswith(b"usage:") and err == b"", "cli: --help prints usage on stdout, exit 0")
    missing = os.path.join(vectors, "no-such-file.json")
    rc, out, err = run_proxy(proxy, ["--config", missing])
    tap.check(
        rc == 1 and out == b"" and err.startswith(PREFIX.encode()) and b"no-such-file.json" in err,
        "cli: a missing file is exit 1 and names the path",
        f"exit {rc}, stderr {err!r}",
    )


def check_oversized(tap, proxy):
    # Not a stored vector (it would be 1 MiB); the limit is parse level.
    raw = b'{"sealedProbes": {"enabled": false}, "pad": "' + b"x" * MAX_BYTES + b'"}'
    with tempfile.NamedTemporaryFile(prefix="sp-big-", suffix=".json") as f:
        f.write(raw)
        f.flush()
        by_path = run_proxy(proxy, ["--config", f.name])
    by_stdin = run_proxy(proxy, ["--config", "-"], raw)
    for how, (rc, out, err) in (("file", by_path), ("stdin", by_stdin)):
        tap.check(
            rc == 1 and out == b"" and b"larger than 1048576 bytes" in err,
            f"generated/oversized: loader rejects from {how}",
            f"exit {rc}, stderr {err!r}",
        )
    try:
        strict_load(raw)
        tap.check(False, "generated/oversized: parse level rejects")
    except ParseReject:
        tap.check(True, "generated/oversized: parse level rejects")


def main():
    tap = Tap()
    proxy = os.environ.get("SP_PROXY")
    schema_path = os.environ.get("SP_SCHEMA")
    vectors = os.environ.get("SP_VECTORS")
    if not (proxy and schema_path and vectors):
        print("Bail out! SP_PROXY, SP_SCHEMA and SP_VECTORS must be set (tests/meson.build sets them)")
        return 1

    with open(schema_path, "rb") as f:
        schema = json.loads(f.read(), object_pairs_hook=_no_duplicates)
    try:
        Draft202012Validator.check_schema(schema)
        tap.check(True, "schema: is a valid Draft 2020-12 schema")
    except Exception as e:  # jsonschema.SchemaError
        tap.check(False, "schema: is a valid Draft 2020-12 schema", e)
        return tap.done()
    validator = Draft202012Validator(schema)

    counts = {}
    canaries = 0
    for kind in ("accept", "reject"):
        directory = os.path.join(vectors, kind)
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
        counts[kind] = len(names)
        for n in names:
            with open(os.path.join(directory, n), "rb") as f:
                raw = f.read()
            canaries += CANARY.encode() in raw
            check_vector(tap, proxy, validator, schema, f"{kind}/{n}", raw, kind == "accept")

    tap.check(
        counts["accept"] >= 20 and counts["reject"] >= 40,
        "vectors: at least 20 accept and 40 reject vectors",
        counts,
    )
    tap.check(canaries >= 1, "vectors: a reject vector carries a credential canary", canaries)

    for name, raw, ok in generated_vectors():
        check_vector(tap, proxy, validator, schema, name, raw, ok)
    check_oversized(tap, proxy)
    check_cli(tap, proxy, vectors)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
