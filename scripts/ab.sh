#!/usr/bin/env bash
# Compares two builds of smax in one process (bench/ab/ab_compare.cpp): each tree's
# build/release/src/libsmax.a (cmake --preset release && cmake --build --preset
# release --target smax, in each) is linked into a shared library beside the other.
#
#   scripts/ab.sh TREE_A TREE_B [op=log|sb|lsb|ce|cei] [alg=online] [T=0.7] [t=2] [r=15] [m=MIB] [o=BYTES] [ox=BYTES] [ob=BYTES] [axis=0] [in=hot] [then=read] f:256x1024 b:8x4096 f:32x81x8732 ...
#
# TREE_A may be a worktree of an older commit: git worktree add /tmp/a HEAD~1.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
[[ $# -ge 3 ]] || { sed -n 2,9p "$0"; exit 2; }
a="$(cd "$1" && pwd)"; b="$(cd "$2" && pwd)"; shift 2
out="$(mktemp -d)"
shim() {  # TREE NAME
  local lib="$1/build/release/src/libsmax.a"
  [[ -f "$lib" ]] || { echo "ab.sh: $lib is missing: build $1 first" >&2; exit 1; }
  c++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden "$here/bench/ab/shim.cpp" -o "$out/$2.so" \
    -I"$1/include" -I"$1/build/release/include" -Wl,--whole-archive "$lib" -Wl,--no-whole-archive \
    -Wl,-Bsymbolic -Wl,--exclude-libs,ALL -fopenmp -lhwy
}
shim "$a" a
shim "$b" b
c++ -O2 -std=c++17 -fopenmp "$here/bench/ab/ab_compare.cpp" -o "$out/ab_compare" -ldl
"$out/ab_compare" "$out/a.so" "$out/b.so" "$@"
rm -rf "$out"
