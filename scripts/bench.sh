#!/usr/bin/env bash
# The main job: installs what is missing (oneDNN, XNNPACK, matplotlib included, and
# PyTorch's libtorch from PyPI, without which the bench still runs), builds the
# release CLI and runs `smax bench`: every smax variant beside a copy and the other
# libraries, a table per workload, the sweep plotted to docs/bench-sweep.svg and
# every measurement in build/bench.json.
# Extra arguments go to smax bench, e.g. scripts/bench.sh --workload all --bytes 256M
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-deps.sh --pytorch || echo "bench: PyTorch could not be installed from PyPI; the bench runs without it" >&2
cmake --preset release >/dev/null
cmake --build --preset release --target smax_cli -j "$(nproc)"
build/release/smax bench --plot docs/bench-sweep.svg --json build/bench.json --csv build/bench.csv "$@"
