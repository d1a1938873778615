"""Every built man page renders with `man -l`, with groff's warnings on, to
80 columns: exit 0, nothing on stderr (groff's warnings all on), a NAME section naming the page, and no
scdoc markup or build placeholder left in the text.  A self-check renders a
doctored page with an unknown request and expects the warning, so that a
silent `man` cannot pass.  Without man-db it SKIPs, saying so; under CI=true
(.ci/run), where scripts/install-deps --test has installed it, that is a
failure."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

# The integration suite's TAP writer, shared rather than copied.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sp_harness import Tap  # noqa: E402

tap = Tap()
ok = tap.ok


def render(path):
    """groff's `w` is every warning; its `all` leaves out `mac` (an
    undefined macro), which matters most here."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MANWIDTH": "80", "LC_ALL": "C.UTF-8",
           "MANPAGER": "cat", "PAGER": "cat"}
    return subprocess.run(["man", "--warnings=w", "-l", path], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env, timeout=60)


def main():
    pages = [p for p in os.environ.get("SP_MAN_PAGES", "").split(os.pathsep) if p]
    if not pages:
        print("Bail out! SP_MAN_PAGES is not set; run this test through meson", flush=True)
        sys.exit(1)
    if shutil.which("man") is None or shutil.which("groff") is None:
        reason = "man-db or groff is not installed (scripts/install-deps --test installs man-db)"
        if os.environ.get("CI") == "true":
            print(f"Bail out! {reason}; under CI=true this is a failure, not a skip", flush=True)
            sys.exit(1)
        print(f"1..0 # SKIP {reason}", flush=True)
        return

    for path in pages:
        name, section = os.path.basename(path).rsplit(".", 1)
        r = render(path)
        ok(r.returncode == 0 and r.stderr == "", f"{name}({section}): `man -l` renders it without a warning",
           f"exit {r.returncode}\n{r.stderr}")
        ok(re.search(rf"^NAME\n\s+{re.escape(name)} - \S", r.stdout, re.M) is not None,
           f"{name}({section}): the NAME section names it", r.stdout[:400])
        header = r.stdout.splitlines()[0] if r.stdout else ""
        ok(header.startswith(f"{name}({section})"), f"{name}({section}): the header names it and its section",
           header)
        leftovers = re.findall(r"@[A-Z]+@|\*--[a-z]|(?<![A-Za-z0-9])_[A-Z]+_(?![A-Za-z0-9])", r.stdout)
        ok(not leftovers, f"{name}({section}): no scdoc markup or @PLACEHOLDER@ is left in the text", leftovers)

    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "doctored.8")
        with open(pages[0], encoding="utf-8") as f:
            text = f.read()
        with open(bad, "w", encoding="utf-8") as f:
            f.write(text.replace(".SH NAME", ".SH NAME\n.XQ an unknown request", 1))
        r = render(bad)
        ok(r.stderr != "", "self-check: a page with an unknown request makes `man -l` warn", r.stderr)

    tap.finish()


if __name__ == "__main__":
    main()
