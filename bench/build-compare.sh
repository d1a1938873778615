#!/usr/bin/env bash
# Builds an older commit of this repository beside the current one, for
# bench/realistic.py --compare-build DIR/build --compare-rootfs ROOTFS: a
# detached git worktree of the commit, its meson build (no tests), and a
# rootfs built by that commit's own sealed-probe-rootfs from that commit's
# own lock, with the same .deb cache as scripts/rootfs-fetch fills.  Nothing
# of it is committed; `git worktree remove --force DIR` and `rm -rf ROOTFS`
# undo it.
#
# usage: bench/build-compare.sh [--commit 754432d] [--dir /tmp/sp-754432d]
#                               [--rootfs DIR.rootfs] [--debs DIR]
#   --debs defaults to $SP_DEB_CACHE, else /var/cache/sealed-probe/debs.
# Prints the two options to give bench/realistic.py.  Run as root (the
# rootfs builder keeps owners).  Rerunning it reuses what is there: an
# existing worktree (at the same commit), build directory and rootfs that
# verifies.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
commit=754432d
dir=
rootfs=
debs=${SP_DEB_CACHE:-/var/cache/sealed-probe/debs}

die() {
  echo "build-compare: $*" >&2
  exit 1
}

usage() {
  echo "usage: bench/build-compare.sh [--commit REV] [--dir DIR] [--rootfs DIR] [--debs DIR]" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
  --commit) [ $# -ge 2 ] || usage; commit=$2; shift ;;
  --dir) [ $# -ge 2 ] || usage; dir=$2; shift ;;
  --rootfs) [ $# -ge 2 ] || usage; rootfs=$2; shift ;;
  --debs) [ $# -ge 2 ] || usage; debs=$2; shift ;;
  *) usage ;;
  esac
  shift
done

full=$(git -C "$repo" rev-parse --verify "$commit^{commit}") || die "no commit \`$commit\` in $repo"
short=$(git -C "$repo" rev-parse --short "$full")
dir=${dir:-/tmp/sp-$short}
# Not DIR/rootfs: that is the commit's manifest and lock.
rootfs=${rootfs:-$dir.rootfs}

if [ -e "$dir/.git" ]; then
  [ "$(git -C "$dir" rev-parse HEAD)" = "$full" ] || die "$dir is a worktree of another commit; give --dir"
  echo "build-compare: reusing the worktree $dir ($short)"
else
  [ ! -e "$dir" ] || die "$dir exists and is not a worktree; give --dir"
  git -C "$repo" worktree add --detach "$dir" "$full" >/dev/null
  echo "build-compare: worktree $dir at $short"
fi

# The programs only: the benchmark needs serve, stage, bundle, unstage, the
# client and the rootfs builder, never the old test programs.
if [ ! -f "$dir/build/build.ninja" ]; then
  meson setup "$dir/build" "$dir" -Dtests=false >"$dir/meson-setup.log" 2>&1 ||
    die "meson setup failed: see $dir/meson-setup.log"
fi
ninja -C "$dir/build" >"$dir/ninja.log" 2>&1 || die "ninja failed: see $dir/ninja.log"
for p in src/sealed-probe src/sealed-probe-proxy src/rootfs/sealed-probe-rootfs; do
  [ -x "$dir/build/$p" ] || die "the build has no $p"
done
echo "build-compare: built $dir/build"

# The commit's own lock, fetched into the shared cache (a no-op when the
# lock is the current one's), built by the commit's own builder.
"$repo/scripts/rootfs-fetch" --lock "$dir/rootfs/rootfs.lock" --debs "$debs"
builder=$dir/build/src/rootfs/sealed-probe-rootfs
if [ -d "$rootfs" ] && "$builder" verify "$rootfs" >/dev/null 2>&1; then
  echo "build-compare: reusing the rootfs $rootfs"
else
  [ ! -e "$rootfs" ] || die "$rootfs exists and does not verify with $builder: remove it first"
  mkdir -p "$(dirname "$rootfs")"
  "$builder" build --lock "$dir/rootfs/rootfs.lock" --debs "$debs" --out "$rootfs" >/dev/null
fi
echo "build-compare: rootfs $rootfs verifies as $("$builder" verify "$rootfs")"
echo "--compare-build $dir/build --compare-rootfs $rootfs"
