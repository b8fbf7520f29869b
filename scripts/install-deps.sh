#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing, so
# that it costs nothing when everything is present. Needs root (or sudo) only when
# something is missing.
set -euo pipefail

packages=(
  cmake          # >= 3.25 (Debian 12 ships 3.25.1)
  ninja-build
  g++
  libgomp1       # OpenMP runtime (g++ brings the headers)
  libhwy-dev     # Google Highway: portable SIMD with run-time dispatch
  libgtest-dev   # GoogleTest, for the test suite
  python3-venv   # the Python package's tests run in a venv
  python3-dev
  libbenchmark-dev  # Google Benchmark, for bench/
  # smax bench compares against these when they are installed (each is optional)
  libdnnl-dev        # oneDNN 2.6
  libxnnpack-dev     # XNNPACK (2022 snapshot), which links with the next two
  libpthreadpool-dev
  libcpuinfo-dev
  python3-matplotlib # scripts/plot_bench.py: smax bench --plot
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
