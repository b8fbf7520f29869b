#!/usr/bin/env bash
# The whole test suite from a fresh machine: dependencies, the release build and its
# tests, the ASan + UBSan build and its tests (without the slow "long" tests), then
# the Python package, installed with pip into a venv, and its pytest suite, and last
# the aarch64 build under qemu (scripts/test-aarch64.sh: NEON kernels, the tests but
# the slowest under emulation).
# The sanitized build is -O1 -g1, without ASan's use-after-scope checks and without the
# SSSE3 and SSE4 kernels (the release build tests every target): sanitized Highway code
# compiles 7-10x slower, and at -O2 -g for every target it alone took 77 of CI's 90
# minutes on 2 cores. Each of the three cuts saves 40-55% of it (docs/PERFORMANCE.md);
# with GCC it also skips the points-to analysis and checks addresses by calls
# (CMakeLists.txt: 749 s to build instead of about 1240).
# The Python package's build takes the release build's objects from ccache
# (CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

jobs=$(nproc)
for preset in release sanitize; do
  echo "== $preset: build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== $preset: test"
  ctest --preset "$preset" -j "$jobs"
done

echo "== python: pip install . and pytest"
python/run_tests.sh

echo "== aarch64: cross build, tests under qemu"
scripts/test-aarch64.sh
