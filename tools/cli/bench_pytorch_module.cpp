// PyTorch's CPU softmax and log_softmax, as a PyTorch user calls them on tensors
// they already hold: at::_softmax_out (at::_log_softmax_out) over tensors that wrap the bench's buffers (no copy), on
// at::set_num_threads(threads) intra-op threads. Built only where CMake found
// libtorch; opened by bench_pytorch.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_pytorch_module.hpp"

namespace smax::cli::bench {
namespace {

at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
  }
  throw std::runtime_error("unknown dtype");
}

std::string version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

Kernel prepare(std::span<const std::int64_t> shape, int axis, DType dtype, bool log, int threads) {
  const std::vector<std::int64_t> sizes(shape.begin(), shape.end());
  const auto options = at::TensorOptions().dtype(scalar_type(dtype)).device(at::kCPU);
  // The tensors wrapping each input the bench rotates through (and its output),
  // made at the first call on it: from_blob's cost is not the softmax's.
  struct Wrapped {
    void* y;
    at::Tensor x_tensor, y_tensor;
  };
  auto wrapped = std::make_shared<std::unordered_map<const void*, Wrapped>>();
  at::set_num_threads(threads);
  return [sizes, options, axis, log, threads, wrapped](const void* x, void* y) {
    // The bench's other OpenMP users set the same runtime's thread count.
    if (at::get_num_threads() != threads) at::set_num_threads(threads);
    auto it = wrapped->find(x);
    if (it == wrapped->end() || it->second.y != y) {
      Wrapped w{y, at::from_blob(const_cast<void*>(x), sizes, options), at::from_blob(y, sizes, options)};
      it = wrapped->insert_or_assign(x, std::move(w)).first;
    }
    if (log) {
      at::_log_softmax_out(it->second.y_tensor, it->second.x_tensor, axis, /*half_to_float=*/false);
    } else {
      at::_softmax_out(it->second.y_tensor, it->second.x_tensor, axis, /*half_to_float=*/false);
    }
  };
}

constexpr PytorchModule kModule{version, prepare};

}  // namespace
}  // namespace smax::cli::bench

extern "C" __attribute__((visibility("default"))) const smax::cli::bench::PytorchModule* smax_bench_pytorch_module() {
  return &smax::cli::bench::kModule;
}
