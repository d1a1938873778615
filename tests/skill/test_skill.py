#!/usr/bin/python3
"""`sealed-probe-proxy skill` (docs/skill.md): the agent-facing SKILL.md.

Drives the real binary (env SP_PROXY).  Each example answer schema the
file gives is parsed with the proxy's own parser (env SP_SCHEMA_COUNT,
tests/skill/schema_count.c), which must count the N and bits the text says.  Checks that the file names every
configured repository and the configured limits, that it says submodules
are empty directories (the same whatever the submodule policy), that its
worked example script really works and answers within the result contract, that stdin and a
file give the same bytes, that --out is atomic and 0644, the exit codes, and
that nothing else of the config document leaks into it.

TAP on stdout; exit status 1 when any test fails.  Standard library only.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback

PROXY = os.path.abspath(os.environ["SP_PROXY"])
RUN_TIMEOUT = 30
CANARY = "ghp_CANARY_skill_5b1e0c"
STATE_CANARY = "/var/lib/sp-state-CANARY"

REPOS = ["acme/payments", "acme/web-app", "octo/tools.py"]
CONFIG = {
    "agentFirewall": {"secret": CANARY, "stateDir": STATE_CANARY, "note": "other-top-level-CANARY"},
    "sealedProbes": {
        "enabled": True,
        "privateRepos": REPOS,
        "runtime": "runc",
        "timeout": 47,
        "memoryLimit": "768m",
        "interpreter": "python3",
        "maxInvocations": 321,
    },
}
OUTCOMES = ["YES", "NO", "UNKNOWN"]
RESULT_MAX_BYTES = 4096

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def run(args, stdin=None):
    return subprocess.run([PROXY, "skill"] + args, input=stdin, capture_output=True, timeout=RUN_TIMEOUT)


class Scratch:
    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="sp-skill-")
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_config(self, doc=CONFIG, name="config.json"):
        p = self.path(name)
        with open(p, "w") as f:
            json.dump(doc, f)
        return p


_skill_cache = {}


def skill_text():
    if "text" not in _skill_cache:
        with Scratch() as s:
            p = run(["--config", s.write_config()])
            assert p.returncode == 0, p.stderr
            assert p.stderr == b"", p.stderr
            _skill_cache["text"] = p.stdout.decode("utf-8")
    return _skill_cache["text"]


def example_script(text):
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"{len(blocks)} python blocks"
    return blocks[0]


def result_contract(data, outcomes):
    """The contract of docs/result-contract.md, independently: one object with
    exactly the key "result", a string equal to exactly one outcome."""
    if not data or len(data) > RESULT_MAX_BYTES:
        return None
    text = data.decode("utf-8")  # raises on invalid UTF-8
    pairs = json.loads(text, object_pairs_hook=lambda p: p)
    if not isinstance(pairs, list) or len(pairs) != 1 or pairs[0][0] != "result":
        return None
    value = pairs[0][1]
    if not isinstance(value, str) or outcomes.count(value) != 1:
        return None
    return value


def run_example(script, files):
    """Runs the example as the sandbox would (python3 -I -S -B, cwd the repo),
    with /probe moved to a scratch directory.  Returns the bytes of out."""
    with Scratch() as s:
        probe = s.path("probe")
        repo = os.path.join(probe, "repo")
        os.makedirs(repo)
        for rel, content in files.items():
            full = os.path.join(repo, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(content)
        out = os.path.join(probe, "out")
        open(out, "w").close()
        assert "/probe/" in script
        with open(os.path.join(probe, "probe.py"), "w") as f:
            f.write(script.replace("/probe/", probe + "/"))
        p = subprocess.run(["python3", "-I", "-S", "-B", os.path.join(probe, "probe.py")], cwd=repo,
                           capture_output=True, timeout=RUN_TIMEOUT, env={"PATH": "/usr/bin:/bin"})
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        with open(out, "rb") as f:
            return f.read()


@test
def every_configured_repository_is_listed():
    text = skill_text()
    for r in REPOS:
        assert f"- `{r}`\n" in text, r


@test
def sensitivity_classes_shape_the_list_and_a_sealed_repository_is_never_named():
    doc = json.loads(json.dumps(CONFIG))
    doc["sealedProbes"]["privateRepos"] = [{"repo": "acme/vault", "sensitivity": "sealed"}, "acme/plain",
                                           {"repo": "acme/conf", "sensitivity": "confidential"},
                                           {"repo": "acme/open", "sensitivity": "public"}]
    with Scratch() as s:
        p = run(["--config", s.write_config(doc)])
    text = p.stdout.decode("utf-8")
    assert p.returncode == 0, p.stderr
    assert "acme/vault" not in text and "`sealed`" not in text, text
    assert "- `acme/plain`\n" in text and "- `acme/open`\n" in text, text
    assert "- `acme/conf` (`confidential`: its calls may carry 8 bits in all" in text, text
    # The worked example names a repository that may run.
    assert "sealed-probe --repo acme/plain --outcome YES" in text, text
    doc["sealedProbes"]["privateRepos"] = [{"repo": "acme/vault", "sensitivity": "sealed"}]
    with Scratch() as s:
        p = run(["--config", s.write_config(doc)])
    assert p.returncode == 1 and p.stdout == b"" and b"every repository is `sealed`" in p.stderr \
        and b"acme/vault" not in p.stderr, (p.returncode, p.stdout, p.stderr)


@test
def front_matter_names_the_skill_with_a_one_line_description():
    lines = skill_text().split("\n")
    assert lines[0] == "---", lines[0]
    end = lines.index("---", 1)
    meta = lines[1:end]
    assert meta[0] == "name: sealed-probe", meta
    assert len(meta) == 2 and meta[1].startswith("description: ") and len(meta[1]) > 20, meta


@test
def configured_timeout_memory_and_budget_are_stated():
    text = skill_text()
    assert "47 seconds" in text
    assert "768 MiB" in text and "805306368 bytes" in text
    assert "321 calls" in text
    assert "30 seconds" not in text and "512 MiB" not in text and "100 calls" not in text


@test
def uppercase_memory_units_read_as_the_lowercase_ones():
    for written, words, count in [("2G", "2 GiB", 2 << 30), ("256M", "256 MiB", 256 << 20)]:
        doc = json.loads(json.dumps(CONFIG))
        doc["sealedProbes"]["memoryLimit"] = written
        with Scratch() as s:
            p = run(["--config", s.write_config(doc)])
        assert p.returncode == 0, p.stderr
        text = p.stdout.decode("utf-8")
        assert f"{words} ({count} bytes)" in text, (written, text)


@test
def default_budget_is_the_firewalls_32_calls():
    doc = json.loads(json.dumps(CONFIG))
    del doc["sealedProbes"]["maxInvocations"]
    with Scratch() as s:
        p = run(["--config", s.write_config(doc)])
    assert p.returncode == 0, p.stderr
    assert "32 calls" in p.stdout.decode("utf-8")


@test
def call_line_outcome_rules_and_script_contract_are_stated():
    text = skill_text()
    for needle in ["sealed-probe --repo OWNER/NAME --outcome A --outcome B --outcome C < probe.py",
                   "python3 -I -S -B /probe/probe.py", "/probe/repo", "/probe/out", "64 bytes",
                   "`ERROR`", "UNKNOWN", "65536 bytes", "no network", "2 bits", "not a security boundary",
                   '{"result": "<one of your outcomes>"}', "Python 3.11, standard library only"]:
        assert needle in text, needle


@test
def example_script_answers_yes_when_old_api_is_imported():
    script = example_script(skill_text())
    out = run_example(script, {"README.md": "hi\n", "pkg/mod.py": "import os\nfrom old_api import thing\n"})
    assert result_contract(out, OUTCOMES) == "YES", out


@test
def example_script_answers_no_when_it_is_not():
    script = example_script(skill_text())
    out = run_example(script, {"README.md": "old_api\n", "pkg/mod.py": "import old_api_v2\n# import old_api\n",
                               ".git/x.py": "import old_api\n"})
    assert result_contract(out, OUTCOMES) == "NO", out


@test
def example_script_is_within_the_script_bound():
    assert 0 < len(example_script(skill_text()).encode()) <= 64 * 1024


@test
def stdin_and_file_give_identical_output():
    with Scratch() as s:
        path = s.write_config()
        a = run(["--config", path])
        with open(path, "rb") as f:
            b = run(["--config", "-"], stdin=f.read())
        assert a.returncode == b.returncode == 0
        assert a.stdout == b.stdout and a.stdout
        assert a.stderr == b.stderr == b""


@test
def out_writes_the_same_bytes_with_mode_0644_atomically():
    with Scratch() as s:
        target = s.path("SKILL.md")
        with open(target, "w") as f:
            f.write("old\n")
        os.chmod(target, 0o600)
        old_inode = os.stat(target).st_ino
        old_umask = os.umask(0o077)
        try:
            p = run(["--config", s.write_config(), "--out", target])
        finally:
            os.umask(old_umask)
        assert p.returncode == 0 and p.stdout == b"" and p.stderr == b"", p.stderr
        st = os.stat(target)
        assert stat.S_IMODE(st.st_mode) == 0o644, oct(st.st_mode)
        # Replaced by rename, not rewritten in place.
        assert st.st_ino != old_inode
        with open(target) as f:
            assert f.read() == skill_text()
        # Nothing left beside it.
        assert sorted(os.listdir(s.dir)) == ["SKILL.md", "config.json"], os.listdir(s.dir)


@test
def out_naming_a_directory_is_refused():
    with Scratch() as s:
        d = s.path("dir")
        os.mkdir(d)
        p = run(["--config", s.write_config(), "--out", d])
        assert p.returncode == 1, p.returncode
        assert b"directory" in p.stderr, p.stderr
        assert os.listdir(d) == [] and sorted(os.listdir(s.dir)) == ["config.json", "dir"]


@test
def disabled_config_is_refused_naming_the_key():
    with Scratch() as s:
        doc = json.loads(json.dumps(CONFIG))
        doc["sealedProbes"]["enabled"] = False
        p = run(["--config", s.write_config(doc)])
        assert p.returncode == 1, p.returncode
        assert p.stdout == b""
        assert b"sealedProbes.enabled" in p.stderr, p.stderr


@test
def invalid_config_is_refused():
    with Scratch() as s:
        doc = json.loads(json.dumps(CONFIG))
        doc["sealedProbes"]["timeout"] = 0
        p = run(["--config", s.write_config(doc)])
        assert p.returncode == 1 and p.stdout == b"" and b"sealedProbes.timeout" in p.stderr, p.stderr


@test
def unknown_flag_is_a_usage_error():
    with Scratch() as s:
        p = run(["--config", s.write_config(), "--bogus"])
        assert p.returncode == 2, p.returncode
        assert p.stdout == b"" and b"usage: sealed-probe-proxy skill" in p.stderr, p.stderr


@test
def missing_config_is_a_usage_error():
    p = run([])
    assert p.returncode == 2 and b"--config" in p.stderr, p.stderr


@test
def help_prints_usage_and_exits_0():
    p = run(["--help"])
    assert p.returncode == 0, p.returncode
    assert b"usage: sealed-probe-proxy skill --config PATH|- [--out FILE]" in p.stdout, p.stdout


@test
def skill_is_listed_among_the_verbs():
    p = subprocess.run([PROXY, "--help"], capture_output=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0 and b"skill" in p.stdout, p.stdout


@test
def submodules_are_said_to_be_empty_the_same_whatever_the_policy():
    """The agent learns that a submodule's directory is empty and where to
    look (`.gitmodules`), never which repositories have one or their paths
    (repository content, docs/skill.md): the text is the same whatever the
    operator's submodule policy."""
    text = skill_text()
    assert "Submodules are not included" in text and "is there but empty" in text, text
    assert "`.gitmodules`" in text and "couldn't tell" in text
    doc = json.loads(json.dumps(CONFIG))
    doc["sealedProbes"]["submodules"] = {"reject": [REPOS[1]], "omit": [REPOS[0]]}
    with Scratch() as s:
        p = run(["--config", s.write_config(doc)])
    assert p.returncode == 0 and p.stdout.decode("utf-8") == text, p.stderr
    assert "reject" not in text and "omit" not in text


SCHEMA_COUNT = os.environ.get("SP_SCHEMA_COUNT")
# "- what: `SCHEMA`: N = 1,001, 10 bits." in the section on answer schemas
SCHEMA_EXAMPLE = re.compile(r"^- [^`\n]*: `(\{[^`\n]*\})`: N = ([0-9,]+), ([0-9]+) bits\.$", re.M)


def schema_examples(text):
    return [(m.group(1), int(m.group(2).replace(",", "")), int(m.group(3)))
            for m in SCHEMA_EXAMPLE.finditer(text)]


def proxy_count(schema):
    """N and content bits as the proxy's own parser counts them."""
    p = subprocess.run([SCHEMA_COUNT, schema], capture_output=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, f"the proxy's parser refuses the skill's example {schema}: {p.stderr!r}"
    n, bits = p.stdout.decode().split()
    return int(n), int(bits)


@test
def answer_schemas_call_cost_and_output_are_stated():
    text = skill_text()
    for needle in ["sealed-probe --repo OWNER/NAME --answer-schema schema.json < probe.py",
                   "--answer-schema-json '{", "ceil(log2(N + 1))", "timing bits", "Three outcomes cost 2",
                   '`{"result": <value>}` to `/probe/out`', '`{"result":{"found":true,"count":3}}`',
                   "4096 bytes of JSON", "At most 8192 bytes", "| `union` |", "literal string `ERROR` anywhere is refused"]:
        assert needle in text, needle


@test
def every_example_schema_parses_with_the_stated_n_and_bits():
    examples = schema_examples(skill_text())
    # The three examples are among them: a count to 1000, one of 12
    # modules, {found, count 0..9}.
    stated = {(n, bits) for _, n, bits in examples}
    assert {(1001, 10), (12, 4), (20, 5), (3, 2)} <= stated, stated
    assert len(examples) >= 6, examples
    for schema, n, bits in examples:
        got = proxy_count(schema)
        assert got == (n, bits), f"{schema}: the text says N = {n}, {bits} bits; the proxy counts {got}"
        # And the rule the text states, independently: ceil(log2(N + 1)).
        assert bits == n.bit_length(), f"{schema}: {bits} bits for N = {n}"


@test
def example_schema_checker_fails_on_a_wrong_count():
    """Self-check: the comparison catches a stated N or bit count that the
    proxy's parser disagrees with, and a schema it refuses."""
    doctored = [("- x: `{\"type\":\"boolean\"}`: N = 3, 2 bits.", (3, 2)),
                ("- x: `{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000}`: N = 1,001, 9 bits.", (1001, 9))]
    for line, stated in doctored:
        [(schema, n, bits)] = schema_examples(line)
        assert (n, bits) == stated
        assert proxy_count(schema) != (n, bits), line
    p = subprocess.run([SCHEMA_COUNT, '{"type":"boolean","extra":1}'], capture_output=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 1 and b"refused" in p.stderr, p


@test
def other_config_keys_and_host_paths_never_appear():
    text = skill_text()
    for needle in [CANARY, STATE_CANARY, "CANARY", "agentFirewall", "stateDir", "/var/lib/sealed-probe",
                   "/run/sealed-probe", os.path.dirname(PROXY)]:
        assert needle not in text, needle


def main():
    n = failed = 0
    for fn in TESTS:
        n += 1
        try:
            fn()
            print(f"ok {n} - {fn.__name__}", flush=True)
        except Exception:
            failed += 1
            print(f"not ok {n} - {fn.__name__}", flush=True)
            for line in traceback.format_exc().splitlines()[-15:]:
                print(f"# {line}", flush=True)
    print(f"1..{n}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
