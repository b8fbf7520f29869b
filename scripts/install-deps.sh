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
  libgtest-dev   # GoogleTest, for the test suite
  libbenchmark-dev  # Google Benchmark, for bench/
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
