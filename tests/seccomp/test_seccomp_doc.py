#!/usr/bin/env python3
"""docs/seccomp.md agrees with seccomp/probe.json and tests/seccomp/denied.h (TAP).

- The table under "## Allowed, rule by rule" has one row per rule of
  probe.json, numbered from 1 in the same order, and its names column lists
  exactly that rule's names, in order.
- Every system call that denied.h says the profile must never list is named
  in the doc.
"""
import json
import os
import re
import sys
from pathlib import Path

source = Path(os.environ["SP_SECCOMP_SOURCE"])
doc_path = Path(os.environ["SP_SECCOMP_DOC"])
denied_h = Path(__file__).with_name("denied.h")

results = []


def check(ok, name, why=""):
    results.append((bool(ok), name, why))


rules = json.loads(source.read_text())["syscalls"]
doc = doc_path.read_text()

section = re.search(r"^## Allowed, rule by rule\n(.*?)(?=^## )", doc, re.M | re.S)
check(section, "doc has an 'Allowed, rule by rule' section")
rows = []
if section:
    for line in section.group(1).splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|", line)
        if m:
            rows.append((int(m.group(1)), re.findall(r"`([a-z0-9_]+)`", m.group(3))))

check(len(rows) == len(rules), "doc table has one row per rule", f"{len(rows)} rows, {len(rules)} rules")
check([n for n, _ in rows] == list(range(1, len(rows) + 1)), "doc table rows are numbered from 1 in order")
for i, rule in enumerate(rules):
    got = rows[i][1] if i < len(rows) else None
    check(got == rule["names"], f"doc row {i + 1} lists the names of syscalls[{i}]", f"doc {got}, json {rule['names']}")

denied = re.findall(r"^\s*X \((\w+)\)", denied_h.read_text(), re.M)
check(len(denied) > 50, "denied.h lists the denied system calls", f"{len(denied)} found")
for name in denied:
    check(f"`{name}`" in doc, f"doc names denied system call {name}")

for n, (ok, name, why) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {n} - {name}" + ("" if ok or not why else f" # {why}"))
print(f"1..{len(results)}")
sys.exit(0 if all(ok for ok, _, _ in results) else 1)
