#!/usr/bin/python3
"""A short libFuzzer run as a TAP test: HARNESS SEED_CORPUS SECONDS.

New inputs go to a temporary directory, so the checked-in seed corpus is read,
never written.  Any crash, leak, timeout or sanitizer report fails the test."""
import os
import subprocess
import sys
import tempfile


def main():
    harness, seeds, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    name = os.path.basename(harness)
    with tempfile.TemporaryDirectory(prefix="sp-fuzz-") as work:
        corpus = os.path.join(work, "corpus")
        os.mkdir(corpus)
        cmd = [harness, f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=2048",
               "-print_final_stats=1", f"-artifact_prefix={work}/", corpus]
        if os.path.isdir(seeds):
            cmd.append(seeds)
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace",
                              timeout=seconds + 120)
        runs = [l for l in proc.stdout.splitlines() if l.startswith("stat::number_of_executed_units")]
        execs = runs[-1].split(":")[-1].strip() if runs else "?"
        if proc.returncode == 0 and execs not in ("?", "0"):
            print(f"ok 1 - {name} ran {execs} inputs in {seconds} s with no finding")
        else:
            print(f"not ok 1 - {name} exited {proc.returncode} after {execs} inputs")
            for line in proc.stdout.splitlines()[-40:]:
                print(f"# {line}")
    print("1..1")
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
