#!/usr/bin/env bash
# The main job: builds the CLI and runs the five variants side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target smax_cli -j "$(nproc)"
build/release/smax demo "$@"
