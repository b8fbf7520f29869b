#!/usr/bin/env bash
# The Python package's tests: a venv at build/python-venv (kept between runs), the
# package built and installed into it with `pip install .`, then pytest.
# torch, scipy and onnxruntime are not installed here: their tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=build/python-venv
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# The test dependencies, and the build backend so that pip need not download it into
# an isolated build environment on every run.
"${pip[@]}" install numpy pytest ml_dtypes "scikit-build-core>=0.10" "nanobind>=2.0"
# The release preset's compiler (by the name it used: ccache hashes the name) and
# SMAX_WERROR: the same compile commands as that build's, whose objects ccache then
# hands to this one (CMakeLists.txt). CXX, not CMAKE_CXX_COMPILER: CMake reads it only
# on a first configure, where a changed CMAKE_CXX_COMPILER would make it drop an
# existing build folder's cache, with the wheel's other settings in it.
release_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' build/release/CMakeCache.txt 2>/dev/null || true)
compiler=()
if [[ -n $release_cxx ]]; then compiler=(env "CXX=$release_cxx"); fi
"${compiler[@]}" "${pip[@]}" install --no-build-isolation --config-settings=cmake.define.SMAX_WERROR=ON .
"$venv/bin/python" -m pytest python/tests -q "$@"
