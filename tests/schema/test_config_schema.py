#!/usr/bin/python3
"""The config loader and docs/config.schema.json agree on every vector.

For each file in $SP_VECTORS/accept and $SP_VECTORS/reject:
  (a) `$SP_PROXY config --config FILE` accepts exactly the accept/ vectors
      (exit 0, one JSON line, empty stderr) and rejects the reject/ ones
      (exit 1, one message line on stderr, empty stdout);
  (b) the JSON Schema ($SP_SCHEMA, Draft 2020-12) gives the same verdict;
  (c) the same bytes on stdin (`--config -`) give byte-identical stdout,
      stderr and exit status to a file whose name is sniffed the same way
      (no extension); and to the `.json` file whenever the text is JSON by
      its syntax.  A text that is not JSON goes on to YAML on stdin (the
      agent firewall's rule, docs/config.md): then stdin must give what a
      `.yaml` file of the same bytes gives, or, when that is a YAML syntax
      error, the one "neither JSON (...) nor YAML (...)" message naming both;
  (d) the vector's YAML twin (generated here from the parsed JSON, through
      PyYAML's event emitter, so that duplicate keys and number texts
      survive) gives, from a `.yaml` file and from stdin, the same verdict
      and the same message (byte positions aside), and for an accepted
      vector byte-identical `config` output.  A vector whose point is JSON
      syntax (a trailing comma, a byte order mark, ...) has no twin: it is
      skipped, with the reason printed.
Accepted vectors also have their effective settings checked against the
document with the schema's defaults applied (every repository's submodule
policy listed), and no output may echo a
canary token or a privateRepos value.  Refused YAML documents with planted
canaries, and examples/sealed-probes.yaml against its JSON twin, are
checked too.

Some rules are not expressible in JSON Schema, which sees a parsed value.
They are enforced here at parse level, mirroring the loader's strict parser,
and docs/config.md lists them: duplicate keys anywhere; a number with a
fraction or exponent is never an integer (30.0, 3e1); NaN and Infinity;
\\u0000 and unpaired surrogates; a byte order mark and invalid UTF-8;
whitespace other than space, tab, LF and CR; nesting deeper than 64; and a
document larger than 1048576 bytes.  One rule compares two keys' values,
which JSON Schema cannot do either: a name in a `submodules` list must be
one of privateRepos, and in one list only (beyond_schema, applied after the
schema's verdict).

TAP on stdout; stdlib, jsonschema and PyYAML (its emitter only).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml
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


def strict_load(raw, allow_duplicates=False, check_depth=True):
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
            object_pairs_hook=dict if allow_duplicates else _no_duplicates,
            parse_float=NotAnInteger,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as e:
        raise ParseReject(f"invalid JSON: {e}") from None
    _check_value(doc, 0 if check_depth else -(1 << 30))
    return doc


CLASSES = ("none", "public", "internal", "confidential", "sealed")
DEFAULT_BUDGETS = {"public": None, "internal": 64, "confidential": 8, "sealed": 0}  # the firewall's
# The limits this proxy fixes for every sandbox (src/base/bounds.h), printed
# for both forms; an enclaves document may ask for them only as loosely or more.
FIXED = {"maxOutputBytes": 8192, "pidsLimit": 64, "cpuLimit": "1", "tmpfsLimit": "16m"}


def repo_entries(doc):
    """(name, class) of each repository the document lists, in order."""
    if "enclaves" in doc:
        return [(r["repo"], r["sensitivity"]) for r in doc["enclaves"][0]["repos"]]
    return [(r, "none") if isinstance(r, str) else (r["repo"], r["sensitivity"])
            for r in doc["sealedProbes"]["privateRepos"]]


def effective(doc, schema):
    """The settings the loader should print: the block, or the enclaves
    document's script entry, with defaults applied, the same fields for
    both.  A document without either says so, apart from a disabled block."""
    if "enclaves" in doc:
        entry = doc["enclaves"][0]
        props = schema["properties"]["enclaves"]["items"]["properties"]
        block = {k: v for k, v in entry.items() if k in ("runtime", "timeout", "memoryLimit", "maxInvocations")}
        script_bytes = entry["script"].get("maxScriptBytes", 65536)
        form = "enclaves"
    elif "sealedProbes" not in doc:
        return {"enabled": False, "block": "absent"}
    else:
        block = doc["sealedProbes"]
        if not block.get("enabled", False):
            return {"enabled": False}
        props = schema["properties"]["sealedProbes"]["properties"]
        script_bytes = 65536
        form = "sealedProbes"
    get = lambda k: block.get(k, props[k].get("default") if k in props else "python3")
    memory = get("memoryLimit")
    unit = {"m": 1 << 20, "g": 1 << 30}[memory[-1].lower()]  # 2G means 2g
    entries = repo_entries(doc)
    repos = [name for name, _ in entries]
    budgets = dict(DEFAULT_BUDGETS, **block.get("sensitivityBudgets", {}))
    return dict({
        "enabled": True,
        "privateRepos": repos,
        "runtime": get("runtime"),
        "timeout": get("timeout"),
        "memoryLimit": memory,
        "memoryLimitBytes": int(memory[:-1]) * unit,
        "interpreter": get("interpreter"),
        "maxInvocations": get("maxInvocations"),
        "submodules": {policy: [r for r in repos if policy_of(block, r) == policy]
                       for policy in ("omit", "reject")},
        "sensitivity": {c: [name for name, cls in entries if cls == c] for c in CLASSES},
        "sensitivityBudgets": budgets,
        "maxScriptBytes": script_bytes,
    }, **FIXED, form=form)


def policy_of(block, repo):
    """A repository's submodule policy: the list that names it, else omit."""
    lists = block.get("submodules", {})
    return "reject" if repo in lists.get("reject", []) else "omit"


def beyond_schema(doc):
    """The rules between two keys' values, which JSON Schema cannot state and
    the loader enforces after the block is read (docs/config.md): every name
    in a submodules list is one of privateRepos, and in one list only; and
    no repository is listed twice, whatever the form or class of each entry
    (uniqueItems compares whole items).  Returns why the document is
    refused, or None.  Called on a document the schema accepts, so the types
    are the schema's."""
    if not isinstance(doc, dict):
        return None
    if "enclaves" in doc or isinstance(doc.get("sealedProbes"), dict) and "privateRepos" in doc["sealedProbes"]:
        names = [name for name, _ in repo_entries(doc)]
        if len(set(names)) != len(names):
            return "a repository is listed twice"
    block = doc.get("sealedProbes")
    if not isinstance(block, dict) or "submodules" not in block:
        return None
    repos = [name for name, _ in repo_entries(doc)] if "privateRepos" in block else []
    seen = {}
    for policy, names in block["submodules"].items():
        for i, name in enumerate(names):
            if name not in repos:
                return f"submodules.{policy}[{i}] is not in privateRepos"
            if name in seen:
                return f"submodules.{policy}[{i}] is also in submodules.{seen[name]}"
            seen[name] = f"{policy}[{i}]"
    return None


def at_least(n):
    """A regex for decimal integers without a leading zero that are at least
    n (n >= 1): more digits than n, or as many and greater at the first
    digit that differs, or n itself."""
    s = str(n)
    alts = [f"[1-9][0-9]{{{len(s)},}}"]
    for i, ch in enumerate(s):
        lo = int(ch) + 1
        if lo > 9:
            continue
        rest = len(s) - i - 1
        alts.append(s[:i] + (f"[{lo}-9]" if lo < 9 else "9")
                    + (f"[0-9]{{{rest}}}" if rest > 1 else "[0-9]" * rest))
    return "(?:" + "|".join(alts + [s]) + ")"


def tmpfs_pattern():
    """The enclaves document's tmpfsLimit: a Docker size (the firewall's
    /^[1-9][0-9]*[bkmgBKMG]$/) of at least 16m, this proxy's fixed /tmp."""
    return ("^(?:" + at_least(16 << 20) + "[bB]|" + at_least(16 << 10) + "[kK]|" + at_least(16)
            + "[mM]|[1-9][0-9]*[gG])" + END)


# The misspelt block (docs/config.md, "Rules for the whole document"): a
# top-level key other than sealedProbes that equals it ignoring ASCII case,
# or is one edit from it ignoring ASCII case.  An edit inserts, deletes or
# substitutes one character (a code point) or swaps two adjacent ones.
BLOCK = "sealedProbes"
MISSPELT = b'is refused as a misspelling: did you mean "sealedProbes"?'
END = r"(?![\s\S])"  # end of input, in Python and ECMA-262
ANY = r"[\s\S]"  # one character, a line break included, in Python and ECMA-262


def _fold(s):
    return "".join(c.lower() if c.isascii() else c for c in s)


def near_miss(key):
    """The rule, written plainly: the reference the loader and the schema's
    pattern are both checked against."""
    if key == BLOCK:
        return False
    a, b = _fold(key), _fold(BLOCK)
    if abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if len(a) == len(b) + 1:
        return a[i + 1 :] == b[i:]
    if len(b) == len(a) + 1:
        return a[i:] == b[i + 1 :]
    if i == len(a) or a[i + 1 :] == b[i + 1 :]:
        return True
    return i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]


def _ci(ch):
    return f"[{ch.lower()}{ch.upper()}]" if ch.isascii() and ch.isalpha() else re.escape(ch)


def _exact(s):
    return "".join(_ci(c) for c in s)


def _one_edit_from(word, i):
    """word[i:] with one edit still allowed: match word[i] and go on, or spend
    the edit here (substitute or delete it, insert before it, or swap it with
    the next)."""
    if i == len(word):
        return ANY + "?"
    alts = [_ci(word[i]) + _one_edit_from(word, i + 1), ANY + "?" + _exact(word[i + 1 :]), ANY + _exact(word[i:])]
    if i + 1 < len(word):
        alts.append(_ci(word[i + 1]) + _ci(word[i]) + _exact(word[i + 2 :]))
    return "(?:" + "|".join(alts) + ")"


def near_miss_pattern():
    """The schema's propertyNames pattern: the rule spelt out for BLOCK."""
    return "^(?!" + re.escape(BLOCK) + r"(?![\s\S]))" + _one_edit_from(BLOCK, 0) + r"(?![\s\S])"


def near_miss_keys():
    """Every kind of single edit of BLOCK at every position: a deletion, a
    swap, and an insertion and a substitution by two characters taken in turn
    from a small alphabet (a letter in either case, punctuation, a line break,
    non-ASCII in and beyond the BMP); case variants; and each of those with a
    second edit.  One proxy run per key, so the sweep stays near 150 keys."""
    alphabet = "aE_\n\u015b\U0001F600"
    one = {BLOCK, BLOCK.upper(), BLOCK.lower(), BLOCK.swapcase()}
    for i in range(len(BLOCK) + 1):
        for c in (alphabet[i % len(alphabet)], alphabet[(i + 3) % len(alphabet)]):
            one.add(BLOCK[:i] + c + BLOCK[i:])
            if i < len(BLOCK):
                one.add(BLOCK[:i] + c + BLOCK[i + 1 :])
        if i < len(BLOCK):
            one.add(BLOCK[:i] + BLOCK[i + 1 :])
        if i + 1 < len(BLOCK):
            one.add(BLOCK[:i] + BLOCK[i + 1] + BLOCK[i] + BLOCK[i + 2 :])
    two = set()
    for n, k in enumerate(sorted(one)):
        j = len(k) // 3
        two.add([k[:j] + k[j + 1 :], k + "x", k[:-2] + k[-1] + k[-2], "x" + k][n % 4])
    return sorted(one | two)


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

    def skip(self, name, why):
        self.n += 1
        print(f"ok {self.n} - {name} # SKIP {why}")

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
    """privateRepos names (strings or objects' repo), an enclaves entry's
    repos, and the names in submodules lists, worth looking for in output
    (long enough not to coincide with the fixed message text)."""
    try:
        doc = json.loads(raw.decode("utf-8", "replace"), parse_constant=lambda c: None)
        block = doc.get("sealedProbes", {})
        repos = list(block.get("privateRepos", []))
        for entry in doc.get("enclaves", []) if isinstance(doc.get("enclaves"), list) else []:
            repos += entry.get("repos", []) if isinstance(entry, dict) and isinstance(entry.get("repos"), list) else []
        repos = [r.get("repo") if isinstance(r, dict) else r for r in repos]
        lists = block.get("submodules", {})
        for names in lists.values() if isinstance(lists, dict) else []:
            repos += names if isinstance(names, list) else []
        return [r for r in repos if isinstance(r, str) and len(r) >= 8]
    except Exception:
        return []


def run_file(proxy, raw, suffix):
    """`config --config FILE` on raw written to a file ending in suffix
    ("" for a name that is sniffed like stdin)."""
    with tempfile.NamedTemporaryFile(prefix="sp-vector-", suffix=suffix) as f:
        f.write(raw)
        f.flush()
        return run_proxy(proxy, ["--config", f.name])


def is_json_text(raw):
    """What the loader calls JSON when it sniffs: the lexical pre-pass (its
    depth cap included) and the grammar accept the text.  Duplicate keys are
    a rule of a JSON text, not its syntax."""
    try:
        strict_load(raw, allow_duplicates=True)
        return True
    except ParseReject:
        return False


class Number(str):
    """A JSON number's text, kept as written for the YAML twin."""


class Pairs(list):
    """A JSON object's members in order, duplicates kept."""


PLAIN_SAFE = re.compile(r"[A-Za-z][A-Za-z0-9/._-]*|[1-9][0-9]*[a-z]")
# Words that YAML 1.1 or 1.2 reads as other than a string when plain.
PLAIN_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _scalar(value, plain):
    if plain:
        return yaml.ScalarEvent(None, None, (True, False), value, style=None)
    return yaml.ScalarEvent(None, None, (False, True), value, style='"')


def _string_event(s):
    return _scalar(s, PLAIN_SAFE.fullmatch(s) is not None and s.lower() not in PLAIN_WORDS)


def _events(node):
    if isinstance(node, Pairs):
        yield yaml.MappingStartEvent(None, None, True, flow_style=False)
        for key, value in node:
            yield _string_event(key)
            yield from _events(value)
        yield yaml.MappingEndEvent()
    elif isinstance(node, list):
        yield yaml.SequenceStartEvent(None, None, True, flow_style=False)
        for item in node:
            yield from _events(item)
        yield yaml.SequenceEndEvent()
    elif isinstance(node, Number):
        yield _scalar(str(node), True)
    elif node is True or node is False or node is None:
        yield _scalar({True: "true", False: "false", None: "null"}[node], True)
    else:
        yield _string_event(node)


def yaml_twin(name, raw):
    """The vector as block-style YAML with the same tree, or (None, why)
    when the vector's point is JSON syntax and it has no twin.  Strings are
    plain where no YAML reader can take them for anything else, and
    double-quoted (non-ASCII escaped) otherwise; numbers are plain and
    keep their text."""
    try:
        strict_load(raw, allow_duplicates=True, check_depth=False)
    except ParseReject as e:
        return None, f"the vector's point is JSON syntax ({e})"
    doc = json.loads(
        raw.decode("utf-8"),
        object_pairs_hook=Pairs,
        parse_int=Number,
        parse_float=Number,
    )
    events = [yaml.StreamStartEvent(), yaml.DocumentStartEvent(explicit=False)]
    events += list(_events(doc))
    events += [yaml.DocumentEndEvent(explicit=False), yaml.StreamEndEvent()]
    text = f"# The YAML twin of {name}.\n" + yaml.emit(events, width=1 << 30)
    return text.encode("utf-8"), None


POSITION = re.compile(rb"at byte \d+|at line \d+, column \d+")


def without_positions(result):
    rc, out, err = result
    return rc, out, POSITION.sub(b"at <position>", err)


YAML_SYNTAX_ERROR = re.compile(rb": invalid YAML at (byte \d+|line \d+, column \d+) \(")


def sniffed_expectation(raw, json_result, yaml_result):
    """What stdin must give: the JSON verdict for JSON text; for any other
    text the YAML verdict, or one message naming both when the YAML reader
    refused the syntax too."""
    if is_json_text(raw):
        return json_result
    rc, out, err = yaml_result
    if rc == 1 and YAML_SYNTAX_ERROR.search(err):
        json_why = json_result[2][len(PREFIX) :].rstrip(b"\n")
        yaml_why = err[len(PREFIX) :].rstrip(b"\n")
        return 1, b"", PREFIX.encode() + b"(document): neither JSON (" + json_why + b") nor YAML (" + yaml_why + b")\n"
    return yaml_result


def check_vector(tap, proxy, validator, schema, name, raw, expect_accept):
    path_result = run_file(proxy, raw, ".json")
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
        if schema_accepts and beyond_schema(doc):
            schema_accepts, why = False, f"beyond the schema: {beyond_schema(doc)}"
    except ParseReject as e:
        doc = None
        schema_accepts = False
        why = f"parse level: {e}"
    tap.check(
        schema_accepts == expect_accept,
        f"{name}: schema {'accepts' if expect_accept else 'rejects'}",
        why,
    )

    # (c) stdin behaves exactly as a file read the same way
    stdin_result = run_proxy(proxy, ["--config", "-"], raw)
    sniffed_file = run_file(proxy, raw, "")
    tap.check(
        stdin_result == sniffed_file,
        f"{name}: stdin gives identical stdout, stderr and exit to a file without extension",
        f"file {sniffed_file!r}\nstdin {stdin_result!r}",
    )
    as_yaml = run_file(proxy, raw, ".yaml")
    want = sniffed_expectation(raw, path_result, as_yaml)
    tap.check(
        stdin_result == want,
        f"{name}: stdin reads {'JSON text as the .json file' if is_json_text(raw) else 'non-JSON text as YAML'}",
        f"want {want!r}\nstdin {stdin_result!r}",
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

    check_yaml_twin(tap, proxy, name, raw, path_result)


def check_yaml_twin(tap, proxy, name, raw, json_result):
    twin, why = yaml_twin(name, raw)
    if twin is None:
        tap.skip(f"{name}: YAML twin gives the same verdict and message", why)
        return
    by_file = run_file(proxy, twin, ".yaml")
    by_stdin = run_proxy(proxy, ["--config", "-"], twin)
    tap.check(
        without_positions(by_file) == without_positions(json_result),
        f"{name}: YAML twin gives the same verdict and message"
        + (" and byte-identical output" if json_result[0] == 0 else ""),
        f"json {json_result!r}\nyaml {by_file!r}\ntwin:\n{twin.decode()[:2000]}",
    )
    tap.check(
        by_stdin == sniffed_expectation(twin, run_file(proxy, twin, ".json"), by_file),
        f"{name}: YAML twin on stdin gives what its file gives",
        f"file {by_file!r}\nstdin {by_stdin!r}",
    )
    tap.check(
        CANARY.encode() not in by_file[1] + by_file[2] + by_stdin[1] + by_stdin[2],
        f"{name}: YAML twin's output echoes no canary",
        f"file {by_file!r}\nstdin {by_stdin!r}",
    )


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
    out += enclaves_vectors()
    return [(f"generated/{n}", (json.dumps(d) + "\n").encode(), ok) for n, d, ok in out]


def enclaves_vectors():
    """Boundary sweeps of the enclaves document's keys and of the budgets
    key: each value on both sides of the firewall's bound and of ours."""
    def entry(**kw):
        e = {"script": kw.pop("script", {}), "repos": [{"repo": "octo/hello", "sensitivity": "internal"}]}
        return {"enclaves": [dict(e, **kw)]}

    out = []
    for t in [0, 1, 300, 301, 540, 541]:
        out.append((f"enclaves-timeout-{t}", entry(timeout=t), 1 <= t <= 300))
    for v in [0, 1, 63, 64, 128, 4096, 4097]:
        out.append((f"enclaves-pids-{v}", entry(pidsLimit=v), 64 <= v <= 4096))
    for v in [0, 1, 4096, 8191, 8192, 8193]:
        out.append((f"enclaves-output-{v}", entry(maxOutputBytes=v), v == 8192))
    for v in [0, 1, 10000, 10001]:
        out.append((f"enclaves-invocations-{v}", entry(maxInvocations=v), 1 <= v <= 10000))
    for v in [0, 1, 65536, 65537]:
        out.append((f"enclaves-script-bytes-{v}", entry(script={"maxScriptBytes": v}), 1 <= v <= 65536))
    for text, ok in {"1": True, "01": True, "1.5": True, "2": True, "99.999": True, "0.5": False, "0.999": False,
                     "0": False, "00": False, "1.": False, ".5": False, "100": False, "1.0000": False, "1e0": False,
                     " 1": False, "1,5": False}.items():
        out.append((f"enclaves-cpu-{text!r}", entry(cpuLimit=text), ok))
    for m in [1, 15, 16, 17, 64, 1000]:
        for u in "mM":
            out.append((f"enclaves-tmpfs-{m}{u}", entry(tmpfsLimit=f"{m}{u}"), m >= 16))
    for text, ok in {"16384k": True, "16383k": False, "16777216b": True, "16777215B": False, "1g": True,
                     "99999999999999999999999b": True, "016m": False, "16": False, "16mb": False, "16t": False,
                     "1.5g": False}.items():
        out.append((f"enclaves-tmpfs-{text}", entry(tmpfsLimit=text), ok))
    for rt, ok in {"docker": True, "gvisor": True, "sbx": True, "runc": False, "kata": False}.items():
        out.append((f"enclaves-runtime-{rt}", entry(runtime=rt), ok))
    for cls in ("public", "internal", "confidential", "sealed", "secret", "none"):
        doc = {"sealedProbes": {"enabled": True, "privateRepos": [{"repo": "octo/hello", "sensitivity": cls}]}}
        out.append((f"class-{cls}", doc, cls not in ("secret", "none")))
    for cls in ("public", "internal", "confidential", "sealed", "other"):
        for v in [0, 1, 1000000, 1000001]:
            doc = {"sealedProbes": {"enabled": True, "privateRepos": ["octo/hello"], "sensitivityBudgets": {cls: v}}}
            out.append((f"budget-{cls}-{v}", doc, cls in ("public", "internal", "confidential") and 1 <= v <= 1000000))
    return out


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
    raw_yaml = b"sealedProbes:\n  enabled: false\npad: " + b"x" * MAX_BYTES + b"\n"
    rc, out, err = run_file(proxy, raw_yaml, ".yaml")
    tap.check(
        rc == 1 and out == b"" and b"larger than 1048576 bytes" in err,
        "generated/oversized: loader rejects YAML from a .yaml file",
        f"exit {rc}, stderr {err!r}",
    )
    try:
        strict_load(raw)
        tap.check(False, "generated/oversized: parse level rejects")
    except ParseReject:
        tap.check(True, "generated/oversized: parse level rejects")


# Refused YAML documents, each planting a canary value where the refusal
# happens: nothing of it may reach stdout or stderr.
YAML_CANARY_DOCS = {
    "anchor": b"sealedProbes:\n  runtime: &t ghp_CANARY_anchor\n",
    "alias": b"host: &t ghp_CANARY_alias\nsealedProbes:\n  runtime: *t\n",
    "merge key": b"sealedProbes:\n  <<: {runtime: ghp_CANARY_merge}\n",
    "tag": b"sealedProbes:\n  runtime: !!str ghp_CANARY_tag\n",
    "local tag": b"sealedProbes:\n  runtime: !ghp_CANARY_tag runc\n",
    "two documents": b"sealedProbes: {}\n---\ntoken: ghp_CANARY_second\n",
    "duplicate key": b"host: {token: ghp_CANARY_dup, token: ghp_CANARY_dup2}\n",
    "non-scalar key": b"? [ghp_CANARY_key]\n: x\n",
    "YAML 1.1 boolean": b"host: {token: ghp_CANARY_b}\nsealedProbes:\n  enabled: yes\n",
    "sexagesimal": b"host: {token: ghp_CANARY_s}\nsealedProbes:\n  timeout: 1:30\n",
    "unknown runtime": b"sealedProbes:\n  runtime: ghp_CANARY_runtime\n",
    "credential in a repository": b"sealedProbes:\n  enabled: true\n  privateRepos:\n"
    b"    - https://x:ghp_CANARY_repo@github.com/o/r\n",
    "unterminated quoted string": b'sealedProbes:\n  runtime: "ghp_CANARY_open\n',
    "syntax error after a value": b"sealedProbes:\n  runtime: ghp_CANARY_syntax\n bad: [\n",
    "bad escape": b'host: "ghp_CANARY_esc\\q"\n',
    "NUL escape": b'host: "ghp_CANARY_nul\\0"\n',
    "control character": b"host: ghp_CANARY_ctl\x01\n",
    "invalid UTF-8": b"host: ghp_CANARY_utf\xff\n",
    "depth": b"host: ghp_CANARY_deep\nx: " + b"[" * 70 + b"]" * 70 + b"\n",
}


def check_yaml_canaries(tap):
    proxy = os.environ["SP_PROXY"]
    for what, raw in YAML_CANARY_DOCS.items():
        results = [run_file(proxy, raw, ".yaml"), run_file(proxy, raw, ""), run_proxy(proxy, ["--config", "-"], raw)]
        ok = all(rc == 1 and out == b"" and err.startswith(PREFIX.encode()) and err.count(b"\n") == 1
                 and CANARY.encode() not in out + err for rc, out, err in results)
        tap.check(ok, f"yaml canary: a refused document ({what}) echoes no value, from .yaml, no extension or stdin",
                  "\n".join(repr(r) for r in results))


def check_near_misses(tap, proxy, validator, schema):
    """The schema's pattern is the rule, and the loader, the schema and the
    rule agree on every key of the sweep; the loader names each refused key."""
    pattern = schema.get("propertyNames", {}).get("not", {}).get("pattern")
    tap.check(pattern == near_miss_pattern(), "near miss: the schema's propertyNames pattern is the one the rule gives",
              f"schema {pattern!r}\nrule   {near_miss_pattern()!r}")
    keys = near_miss_keys()
    wrong = []
    for key in keys:
        doc = {key: {"enabled": True, "privateRepos": ["octo/hello"]}}
        raw = (json.dumps(doc, ensure_ascii=False) + "\n").encode()
        rc, out, err = run_file(proxy, raw, ".json")
        want = near_miss(key)
        schema_refuses = not validator.is_valid(doc)
        if key == BLOCK:
            loader_ok = rc == 0 and json.loads(out) == effective(doc, schema)
        elif want:
            loader_ok = rc == 1 and out == b"" and err.startswith(PREFIX.encode() + b"(document): key ") \
                and err.endswith(MISSPELT + b"\n") and err.count(b"\n") == 1
        else:
            loader_ok = rc == 0 and json.loads(out) == {"enabled": False, "block": "absent"}
        if not loader_ok or schema_refuses != want:
            wrong.append((key, want, rc, out, err, schema_refuses))
    refused = sum(near_miss(k) for k in keys)
    tap.check(not wrong and refused and refused < len(keys),
              f"near miss: loader, schema and rule agree on {len(keys)} keys ({refused} refused, the rest the host's)",
              "\n".join(repr(w) for w in wrong[:20]))


def check_verbs_need_the_block(tap, proxy, vectors):
    """The verbs that need the block enabled tell an absent block from a
    disabled one, naming the file (skill needs no root, and shares the
    loader with serve, stage, check and bundle)."""
    cases = [
        ("absent", {"agentFirewall": {}}, b": sealedProbes: is absent (the document has no such top-level key), "
                                          b"so sealed probes are off\n"),
        ("disabled", {"sealedProbes": {"enabled": False}}, b": sealedProbes.enabled: is false, so sealed probes are off\n"),
        ("misspelt", {"sealedProbe": {"enabled": True, "privateRepos": ["octo/hello"]}},
         b': (document): key "sealedProbe" ' + MISSPELT + b"\n"),
    ]
    for what, doc, tail in cases:
        with tempfile.NamedTemporaryFile(prefix="sp-verb-", suffix=".json") as f:
            f.write(json.dumps(doc).encode())
            f.flush()
            p = subprocess.run([proxy, "skill", "--config", f.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=60)
            want = b"sealed-probe-proxy: skill: " + f.name.encode() + tail
        tap.check(p.returncode == 1 and p.stdout == b"" and p.stderr == want,
                  f"verbs: a block {what} is reported as {what}, naming the file",
                  f"exit {p.returncode}\nstderr {p.stderr!r}\nwant   {want!r}")


def check_examples(tap, proxy, examples):
    """The docs' YAML example passes `config` from a file and from stdin with
    output byte-identical to its JSON twin."""
    with open(os.path.join(examples, "sealed-probes.yaml"), "rb") as f:
        raw_yaml = f.read()
    json_result = run_proxy(proxy, ["--config", os.path.join(examples, "sealed-probes.json")])
    tap.check(json_result[0] == 0 and json_result[2] == b"", "examples: sealed-probes.json passes config",
              repr(json_result))
    for how, result in (
        ("from its file", run_proxy(proxy, ["--config", os.path.join(examples, "sealed-probes.yaml")])),
        ("from stdin", run_proxy(proxy, ["--config", "-"], raw_yaml)),
    ):
        tap.check(result == json_result,
                  f"examples: sealed-probes.yaml {how} prints exactly what sealed-probes.json prints",
                  f"yaml {result!r}\njson {json_result!r}")
    tap.check(b"#" in raw_yaml, "examples: sealed-probes.yaml keeps its comments")
    # docs/config.md shows the same bytes, so what the docs show is what is tested.
    with open(os.path.join(os.path.dirname(os.environ["SP_SCHEMA"]), "config.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    tap.check(
        raw_yaml.decode("utf-8") in blocks,
        "examples: docs/config.md shows sealed-probes.yaml verbatim",
        f"{len(blocks)} yaml blocks in docs/config.md",
    )


def main():
    tap = Tap()
    proxy = os.environ.get("SP_PROXY")
    schema_path = os.environ.get("SP_SCHEMA")
    vectors = os.environ.get("SP_VECTORS")
    examples = os.environ.get("SP_EXAMPLES")
    if not (proxy and schema_path and vectors and examples):
        print("Bail out! SP_PROXY, SP_SCHEMA, SP_VECTORS and SP_EXAMPLES must be set (tests/meson.build sets them)")
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
    check_yaml_canaries(tap)
    check_near_misses(tap, proxy, validator, schema)
    tmpfs = schema["properties"]["enclaves"]["items"]["properties"]["tmpfsLimit"]["pattern"]
    tap.check(tmpfs == tmpfs_pattern(), "schema: tmpfsLimit's pattern is the one tmpfs_pattern generates",
              f"generated {tmpfs_pattern()}")
    check_verbs_need_the_block(tap, proxy, vectors)
    check_examples(tap, proxy, examples)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
