"""The man pages and the programs agree on every option, both ways.

- sealed-probe-proxy(8): the verbs come from `sealed-probe-proxy --help`, so a
  new verb fails here until its section is written.  For each verb, the
  options its `VERB --help` prints, the option entries of its section and the
  options of the section's synopsis are the same set; and --help lists every
  option the verb's parser accepts, found by offering the parser every
  `--word` the binary holds (a verb that accepts one --help does not print
  fails).  A section for a verb the program does not have fails too, but for
  the verbs of PENDING, which SKIP until they are merged and then are checked
  like every other.
- Each verb's --help describes every option of its usage line, each with
  its default or "Required" (the descriptions are generated from the page's
  entries by man/help_text.py, which refuses an entry without either).
- The global options (`--version`) against the page's OPTIONS section.
- sealed-probe-rootfs(8): each command's options in --help against its
  section.
- sealed-probe(1): the client has no --help on purpose (docs/protocol.md: it
  prints one JSON line whatever it is given), so its options are the `--word`
  strings its binary compares argv against; they must be the page's OPTIONS
  entries and synopsis.
- Self-checks: the comparison run on doctored pages and help texts (an option
  dropped, one added, a new verb, a synopsis short of one) reports each.

The pages are read in their scdoc source: an option entry is a line that
starts with `*--name*`; a synopsis is the paragraph that starts with the
program's name in bold."""

import os
import re
import subprocess
import sys
import tempfile

# The integration suite's TAP writer, shared rather than copied.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap, env_path  # noqa: E402

# Verbs documented ahead of their merge: SKIP while the program lacks them,
# checked in full once it has them.  Empty while none is pending.
PENDING = {}

# An option's name starts with a letter and has two characters at least: a
# bare `--2` or `--x` in the strings is machine code that happens to print.
LONG = re.compile(r"(?<![A-Za-z0-9-])--[a-z][a-z0-9-]+")
# Accepted by every verb and every command; the pages say so once.
HELP = {"--help"}


# ---- the pages ----------------------------------------------------------------

def page_sections(text):
    """{'# TITLE': body, '## sub': body}: the body of each section and
    subsection, up to the next heading of any level.  A subsection's key is
    prefixed with its section's: 'VERBS/stage'."""
    out = {}
    top = None
    key = None
    for line in text.splitlines():
        m = re.match(r"^(#{1,2}) (.+?)\s*$", line)
        if m:
            if m.group(1) == "#":
                top = m.group(2)
                key = top
            else:
                key = f"{top}/{m.group(2)}"
            out[key] = []
            continue
        if key is not None:
            out[key].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def entry_options(body):
    """The options of the entries: lines that start with `*--name*`."""
    found = set()
    for line in body.splitlines():
        if re.match(r"^\*--[a-z0-9]", line):
            found |= set(LONG.findall(line))
    return found - HELP


def synopsis_options(body, program_words):
    """The options of the first paragraph that starts with the bold program
    name (`*sealed-probe-proxy stage*`); None when there is none."""
    for para in re.split(r"\n\s*\n", body):
        if para.lstrip().startswith(f"*{program_words}*"):
            return set(LONG.findall(para)) - HELP
    return None


def subsections(sections, top):
    return {k.split("/", 1)[1]: v for k, v in sections.items() if k.startswith(top + "/")}


# ---- the programs -------------------------------------------------------------

def run(argv, env=None):
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30,
                          env=env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                          cwd=tempfile.gettempdir())


def proxy_help_verbs(text):
    """The verb table of `sealed-probe-proxy --help`: the lines under
    `verbs:`, two spaces, a name, then its summary."""
    verbs = []
    in_table = False
    for line in text.splitlines():
        if line.strip() == "verbs:":
            in_table = True
            continue
        if in_table:
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s{2,}\S", line)
            if not m:
                if line.strip():
                    continue
                if verbs:
                    in_table = False
                continue
            verbs.append(m.group(1))
    return verbs


def usage_lines(text):
    """The usage block: from `usage:` to the first blank line."""
    block = text.split("\n\n", 1)[0]
    return block if block.startswith("usage:") else ""


# An entry says its default, or that the option is required.
SAYS_DEFAULT = re.compile(r"\bDefault\b|\b[Rr]equired\b")


def help_entries(text, heading="options:"):
    """{option: description} of the options block a verb's --help prints
    after its usage (generated from the page by man/help_text.py): an
    option's line starts with two spaces and `--`, its description is
    indented further."""
    entries, current, inside = {}, None, False
    for line in text.splitlines():
        if line.strip() == heading:
            inside = True
            continue
        if not inside:
            continue
        m = re.match(r"^  (--[a-z][a-z0-9-]*)", line)
        if m:
            current = m.group(1)
            entries[current] = ""
        elif line.startswith("    ") and current:
            entries[current] += " " + line.strip()
        elif not line.strip():
            break
    return entries


def entries_problems(entries, want):
    """What is wrong with a --help's option entries against the options its
    usage names: missing or extra entries, and entries without a default."""
    problems = []
    got = set(entries) - HELP
    if got != want:
        problems.append(f"usage: {sorted(want)}; described: {sorted(got)}")
    problems += [f"{o} says neither its default nor that it is required: {d.strip()!r}"
                 for o, d in sorted(entries.items()) if o not in HELP and not SAYS_DEFAULT.search(d)]
    if "--help" not in entries:
        problems.append("--help itself is not described")
    return problems


def binary_words(path):
    """Every `--word` in the binary's strings: the option names its parsers
    compare against are among them."""
    r = subprocess.run(["strings", "-a", "-n", "3", path], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    return set(LONG.findall(r.stdout))


NO_SUCH = "--sp-no-such-option"


def accepted_by_parser(proxy, verb, candidates):
    """The candidates the verb's parser accepts.  Each is offered as
    `VERB OPT x --sp-no-such-option`, so that the parse always fails (a value
    option takes x, then meets an unknown option; a flag meets an unexpected
    argument) and nothing runs; an option is accepted unless the verb calls
    it unknown.  Returns (accepted, problems)."""
    accepted, problems = set(), []
    r = run([proxy, verb, NO_SUCH])
    if r.returncode != 2 or f"unknown option `{NO_SUCH}`" not in r.stderr:
        return None, [f"`{verb} {NO_SUCH}` did not report it as an unknown option (exit {r.returncode}): "
                      f"{r.stderr.strip()[:200]}; this test cannot probe the verb's parser"]
    for opt in sorted(candidates):
        r = run([proxy, verb, opt, "x", NO_SUCH])
        if r.returncode != 2:
            problems.append(f"`{verb} {opt} x {NO_SUCH}` exited {r.returncode}, not 2 (bad usage)")
        if f"unknown option `{opt}`" not in r.stderr:
            accepted.add(opt)
    return accepted, problems


# ---- the comparison -----------------------------------------------------------

def compare_verbs(help_options, page_verbs, pending):
    """help_options: {verb: options its --help prints}; page_verbs: {verb:
    (entry options, synopsis options or None)}.  Returns (results, skips):
    results is a list of (verb, property, problem or None)."""
    results, skips = [], []
    for verb, want in help_options.items():
        if verb not in page_verbs:
            results.append((verb, "has a section in the man page", "no `## " + verb + "` section under VERBS"))
            continue
        entries, synopsis = page_verbs[verb]
        missing, extra = want - entries, entries - want
        results.append((verb, "the section's option entries are exactly the options --help prints",
                        None if not missing and not extra else
                        f"in --help but not the page: {sorted(missing)}; in the page but not --help: {sorted(extra)}"))
        if synopsis is None:
            results.append((verb, "the section's synopsis lists exactly the options --help prints",
                            "no synopsis paragraph starting with the bold program and verb"))
        else:
            missing, extra = want - synopsis, synopsis - want
            results.append((verb, "the section's synopsis lists exactly the options --help prints",
                            None if not missing and not extra else
                            f"in --help but not the synopsis: {sorted(missing)}; in the synopsis but not "
                            f"--help: {sorted(extra)}"))
    for verb in page_verbs:
        if verb in help_options:
            continue
        if verb in pending:
            skips.append((verb, pending[verb]))
        else:
            results.append((verb, "is a verb of the program",
                            "the man page documents it, but `--help` does not list it"))
    return results, skips


def main():
    tap = Tap()
    proxy = env_path("SP_PROXY")
    client = env_path("SP_CLIENT")
    rootfs_tool = env_path("SP_ROOTFS_TOOL")
    man_dir = env_path("SP_MAN_SOURCE_DIR")

    def read_page(name):
        with open(os.path.join(man_dir, name + ".scd"), encoding="utf-8") as f:
            return f.read()

    # ---- sealed-probe-proxy(8) ----
    proxy_page = read_page("sealed-probe-proxy.8")
    sections = page_sections(proxy_page)
    r = run([proxy, "--help"])
    verbs = proxy_help_verbs(r.stdout)
    tap.ok(r.returncode == 0 and len(verbs) >= 7, "proxy: `--help` lists the verbs (at least the seven of today)",
           r.stdout + r.stderr)

    help_options = {}
    for verb in verbs:
        r = run([proxy, verb, "--help"])
        usage = usage_lines(r.stdout)
        ok = tap.ok(r.returncode == 0 and r.stderr == "" and usage.startswith(f"usage: sealed-probe-proxy {verb}"),
                    f"proxy {verb}: `--help` prints its usage on stdout and exits 0", r.stdout + r.stderr)
        if ok:
            help_options[verb] = set(LONG.findall(usage)) - HELP
            problems = entries_problems(help_entries(r.stdout), help_options[verb])
            tap.ok(not problems, f"proxy {verb}: `--help` describes every option of its usage, each with its default",
                   "; ".join(problems))

    page_verbs = {}
    for verb, body in subsections(sections, "VERBS").items():
        page_verbs[verb] = (entry_options(body), synopsis_options(body, f"sealed-probe-proxy {verb}"))
    results, skips = compare_verbs(help_options, page_verbs, PENDING)
    for verb, prop, problem in results:
        tap.ok(problem is None, f"proxy {verb}: {prop}", problem)
    for verb, reason in skips:
        tap.skip(f"proxy {verb}: documented, and checked once the program has it", reason)

    # --help is complete: every option the parser takes is printed.
    words = binary_words(proxy)
    if tap.ok(words is not None and "--config" in words, "proxy: `strings` finds the option names in the binary"):
        for verb in help_options:
            candidates = (words | help_options[verb] | page_verbs.get(verb, (set(), None))[0]) - HELP
            accepted, problems = accepted_by_parser(proxy, verb, candidates)
            if accepted is None:
                tap.ok(False, f"proxy {verb}: --help lists every option its parser accepts", problems[0])
                continue
            missing = accepted - help_options[verb]
            unaccepted = help_options[verb] - accepted
            tap.ok(not problems and not missing and not unaccepted,
                   f"proxy {verb}: --help lists every option its parser accepts, and only those",
                   "; ".join(problems + [f"accepted but not in --help: {sorted(missing)}",
                                         f"in --help but refused as unknown: {sorted(unaccepted)}"]))

    # The global options.
    r = run([proxy, "--help"])
    top = set(LONG.findall(usage_lines(r.stdout))) - HELP
    page_top = entry_options(sections.get("OPTIONS", ""))
    tap.ok(top == page_top and "--version" in top,
           "proxy: the global options of `--help` are exactly the OPTIONS section's",
           f"--help: {sorted(top)}; page: {sorted(page_top)}")
    r = run([proxy, "--version"])
    tap.ok(r.returncode == 0 and re.match(r"sealed-probe-proxy \S+\ncommit: ", r.stdout),
           "proxy: --version, as documented, prints the name and version, then the commit", r.stdout + r.stderr)

    # ---- sealed-probe-rootfs(8) ----
    rootfs_page = read_page("sealed-probe-rootfs.8")
    r = run([rootfs_tool, "--help"])
    usage = usage_lines(r.stdout)
    commands = {}
    for line in usage.splitlines():
        m = re.match(r"^(?:usage:)?\s*sealed-probe-rootfs ([a-z]+)\b(.*)$", line)
        if m:
            commands[m.group(1)] = set(LONG.findall(m.group(2))) - HELP
    tap.ok(r.returncode == 0 and set(commands) >= {"build", "verify"},
           "rootfs: `--help` gives a usage line per command", r.stdout + r.stderr)
    rootfs_sections = subsections(page_sections(rootfs_page), "COMMANDS")
    page_cmds = {c: (entry_options(b), synopsis_options(b, f"sealed-probe-rootfs {c}"))
                 for c, b in rootfs_sections.items()}
    results, skips = compare_verbs(commands, page_cmds, {})
    for cmd, prop, problem in results:
        tap.ok(problem is None, f"rootfs {cmd}: {prop}", problem)
    for cmd in sorted(commands):
        r = run([rootfs_tool, cmd, "--help"])
        problems = entries_problems(help_entries(r.stdout, f"{cmd} options:"), commands[cmd])
        tap.ok(r.returncode == 0 and not problems,
               f"rootfs {cmd}: `{cmd} --help` describes every option of its usage, each with its default",
               "; ".join(problems) + r.stderr)

    # ---- sealed-probe(1) ----
    client_page = read_page("sealed-probe.1")
    csections = page_sections(client_page)
    words = binary_words(client)
    page_opts = entry_options(csections.get("OPTIONS", ""))
    synopsis = synopsis_options(csections.get("SYNOPSIS", ""), "sealed-probe")
    tap.ok(words is not None and words == page_opts and page_opts,
           "client: the options the binary compares argv against are exactly the OPTIONS entries",
           f"binary: {sorted(words or [])}; page: {sorted(page_opts)}")
    tap.ok(synopsis == page_opts, "client: the synopsis names exactly the OPTIONS entries",
           f"synopsis: {sorted(synopsis or [])}; entries: {sorted(page_opts)}")
    r = run([client, "--help"])
    tap.ok(r.stdout == '{"result":"ERROR"}\n' and r.returncode == 0 and re.search(r"not even\s+\*--help\*", client_page),
           "client: it has no --help, and its page says so", r.stdout)

    # ---- self-checks: the comparison can fail ----
    # Against the page's own stage section, so that they hold whatever the
    # program says.
    stage = subsections(sections, "VERBS").get("stage", "")
    base = {"stage": entry_options(stage)}
    doctored = "\n".join(line for line in stage.splitlines() if not line.startswith("*--catalog*"))
    results, _ = compare_verbs(base,
                               {"stage": (entry_options(doctored), synopsis_options(doctored, "sealed-probe-proxy stage"))},
                               {})
    tap.ok(any(p and "--catalog" in p for _, _, p in results),
           "self-check: a page missing one option entry (--catalog) is reported", results)
    doctored = stage + "\n\n*--frobnicate* _N_\n\tNot an option.\n"
    results, _ = compare_verbs(base,
                               {"stage": (entry_options(doctored), synopsis_options(doctored, "sealed-probe-proxy stage"))},
                               {})
    tap.ok(any(p and "--frobnicate" in p for _, _, p in results),
           "self-check: a page with an option --help does not print is reported", results)
    doctored = stage.replace("[*--github-ca* _FILE_]", "")
    results, _ = compare_verbs(base,
                               {"stage": (entry_options(doctored), synopsis_options(doctored, "sealed-probe-proxy stage"))},
                               {})
    tap.ok(any(p and "--github-ca" in p and "synopsis" in p for _, _, p in results),
           "self-check: a synopsis short of one option (--github-ca) is reported", results)
    results, skips = compare_verbs(dict(help_options, frobnicate={"--state"}), page_verbs, PENDING)
    tap.ok(any(v == "frobnicate" and p for v, _, p in results),
           "self-check: a verb in --help with no section is reported", results)
    results, skips = compare_verbs({}, {"status": (set(), set()), "gone": (set(), set())},
                                   {"status": "pending in this self-check"})
    tap.ok([v for v, _, p in results if p] == ["gone"] and [v for v, _ in skips] == ["status"],
           "self-check: a documented verb the program lacks fails, a pending one skips", (results, skips))
    sample = "usage: x\n\noptions:\n  --state DIR\n        Where. Default: here.\n  --json\n        As JSON.\n" \
             "  --help, -h\n        Help.\n"
    problems = entries_problems(help_entries(sample), {"--state", "--json", "--out"})
    tap.ok(any("--out" in p for p in problems) and any(p.startswith("--json says neither") for p in problems)
           and not any(p.startswith("--state") for p in problems),
           "self-check: a --help entry missing (--out) and one without its default (--json) are reported", problems)
    accepted, problems = accepted_by_parser(proxy, "unstage", {"--state", "--frobnicate"})
    tap.ok(accepted == {"--state"} and not problems,
           "self-check: probing unstage's parser finds --state and not --frobnicate", (accepted, problems))

    tap.finish()


if __name__ == "__main__":
    main()
