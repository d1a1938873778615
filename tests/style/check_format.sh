#!/usr/bin/env bash
# Every C file matches the checked-in .clang-format (TAP, one line per file).
set -u
root=${1:?usage: check_format.sh REPO_ROOT}
cd "$root" || exit 1

if ! command -v clang-format >/dev/null 2>&1; then
  echo "1..0 # SKIP clang-format is not installed (scripts/install-deps --test installs it)"
  exit 0
fi

n=0
failed=0
while IFS= read -r -d '' file; do
  n=$((n + 1))
  if clang-format --dry-run --Werror "$file" >/dev/null 2>&1; then
    echo "ok $n - $file is formatted"
  else
    echo "not ok $n - $file is formatted (run: clang-format -i $file)"
    failed=1
  fi
done < <(find src tests rootfs seccomp bench -name '*.[ch]' -print0 2>/dev/null | sort -z)
echo "1..$n"
exit $failed
