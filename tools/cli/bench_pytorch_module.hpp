// The bridge between `smax bench` and PyTorch's softmax. libtorch (the PyPI wheel's,
// which `scripts/install-deps.sh --pytorch` unpacks into build/deps/pytorch) is
// linked into a module of its own, bench_pytorch_module.cpp, that the tool opens at
// run time (bench_pytorch.cpp): the tool then starts and runs everything else
// wherever libtorch, or a library it needs at load time, cannot be loaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "bench_impls.hpp"
#include "smax/dtype.hpp"

namespace smax::cli::bench {

struct PytorchModule {
  std::string (*version)();  // "2.15.0"
  // Softmax (or log_softmax, `log`) along `axis` of a C-order tensor of `shape`, on
  // `threads` intra-op threads. Throws std::runtime_error where PyTorch cannot run it.
  Kernel (*prepare)(std::span<const std::int64_t> shape, int axis, DType dtype, bool log, int threads);
};

// The module's one exported symbol: extern "C" const PytorchModule* NAME().
inline constexpr const char* kPytorchModuleSymbol = "smax_bench_pytorch_module";

}  // namespace smax::cli::bench
