#!/usr/bin/env bash
# PyTorch's training ops along axis 1 (bench/torch/training_columns.cpp), built against
# the libtorch of scripts/install-deps.sh --pytorch:
#   scripts/torch-training.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --pytorch
torch=build/deps/pytorch/torch
out=build/torch-training
if [[ ! -x $out || bench/torch/training_columns.cpp -nt $out ]]; then
  c++ -O2 -std=c++20 bench/torch/training_columns.cpp -o "$out" -I"$torch/include" \
    -I"$torch/include/torch/csrc/api/include" -L"$torch/lib" -ltorch_cpu -lc10 -Wl,-rpath,"$PWD/$torch/lib"
fi
"$out" "${1:-1}"
