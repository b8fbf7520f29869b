#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing, so
# that it costs nothing when everything is present. Needs root (or sudo) only when
# something is missing. With --aarch64: the cross toolchain, qemu and the arm64
# packages that scripts/test-aarch64.sh builds and runs against instead. With
# --pytorch: PyTorch's libtorch for smax bench, from PyPI (below).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake          # >= 3.25 (Debian 12 ships 3.25.1)
  ninja-build
  ccache         # the wheel's build reuses the release build's objects (CMakeLists.txt)
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
case "${1:-}" in
  "" | --aarch64 | --pytorch) ;;
  *) echo "usage: $0 [--aarch64 | --pytorch]" >&2; exit 2 ;;
esac

# The newest torch wheel on PyPI, unpacked without its Python dependencies into
# build/deps/pytorch (1.3 GB; smax bench links its libtorch_cpu, which CMake
# looks for there), with the two CUDA runtime libraries libtorch_cpu loads at
# start (the wheel's pin, from pip's cuda-toolkit packages, put where its rpath
# looks: no GPU or CUDA install is needed). Skipped when it is already there.
if [[ "${1:-}" == --pytorch ]]; then
  target=build/deps/pytorch
  if [[ -f $target/torch/lib/libtorch_cpu.so ]]; then exit 0; fi
  echo "install-deps: installing torch from PyPI into $target"
  python3 -m venv build/deps/pip-venv  # a pip that runs on any Debian python3 (PEP 668)
  pip=(build/deps/pip-venv/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$target")
  "${pip[@]}" --no-deps torch
  cuda_pin=$(grep -o -m1 '^Requires-Dist: cuda-toolkit\[[^]]*\]==[0-9.]*' "$target"/torch-*.dist-info/METADATA |
             sed 's/.*==//' || true)
  "${pip[@]}" "cuda-toolkit[cudart,cupti]${cuda_pin:+==$cuda_pin}"
  exit 0
fi
if [[ "${1:-}" == --aarch64 ]]; then
  packages=(
    g++-aarch64-linux-gnu qemu-user
    libhwy-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
    libgomp1:arm64 libstdc++6:arm64  # the runtimes at their multiarch paths (cmake/aarch64-linux-gnu.cmake)
  )
fi

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
if [[ "${1:-}" == --aarch64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
