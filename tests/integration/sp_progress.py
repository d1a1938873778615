"""Reading `stage`'s and `unstage`'s progress line as a terminal shows it
(docs/staging.md, "Progress"): what each carriage return began, the live
lines, the words a line may hold, and what must never be on it."""

import os
import re

CLEAR = b"\x1b[K"

# Every word a progress line may hold besides its subject and numbers: the
# phases', the units' and the final line's.
WORDS = {w.encode() for w in (
    "copy the git directory write tree index list objects check pack remove old normalize digest resolve ref "
    "download check gzip stream extract staged files file object of B KiB MiB GiB downloaded in s min").split()}


def pieces(seen):
    """What each "\\r" began: a live line (no newline) or a final one."""
    return [p for p in seen.split(b"\r") if p]


def live_lines(seen):
    """The live lines drawn, without their clear-to-end-of-line."""
    return [p[:-len(CLEAR)] for p in pieces(seen) if p.endswith(CLEAR) and p != CLEAR]


def foreign_words(seen, subjects):
    """Every word of the progress lines that is not a subject (a regex: the
    repository's name, or seeds/RUN), a phase or unit word, or a number.
    stdout's own lines (`staged ...`) and an interrupted stage's last line,
    which its test checks whole, are left aside."""
    found = []
    for piece in pieces(seen):
        line = piece.removesuffix(b"\n").removesuffix(CLEAR).removeprefix(CLEAR)
        if line == b"" or line.startswith((b"staged ", b"sealed-probe-proxy: stage: interrupted by ")):
            continue
        subject = next((s for s in subjects if re.match(s + rb"(:|$)", line)), None)
        if subject is None:
            found.append(line)
            continue
        rest = re.sub(subject, b"", line, count=1)
        found += [t for t in re.split(rb"[ ,:()%]+", rest)
                  if t and t not in WORDS and not re.fullmatch(rb"\d+(\.\d)?", t)]
    return found


def leaks(seen, names, also=()):
    """Every path component (and a .txt one's stem), canary or secret found
    in seen."""
    text = seen.decode("latin-1")
    found = [n for n in list(names) + list(also) if n in text]
    found += [os.path.splitext(n)[0] for n in names if n.endswith(".txt") and os.path.splitext(n)[0] in text]
    return found
