// Names of the enums, shared by messages, the CLI and the Python package.
#include "smax/dtype.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax {

std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    if (name == to_string(d)) return d;
  }
  return std::nullopt;
}

std::size_t size_of(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16:
    case DType::bf16: return 2;
  }
  return 0;
}

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::shape: return "shape";
    case Errc::axis: return "axis";
    case Errc::dtype: return "dtype";
    case Errc::strides: return "strides";
    case Errc::overlap: return "overlap";
    case Errc::null_data: return "null_data";
    case Errc::option: return "option";
    case Errc::io: return "io";
  }
  return "invalid";
}

std::string_view to_string(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::automatic: return "auto";
    case Algorithm::naive: return "naive";
    case Algorithm::safe: return "safe";
    case Algorithm::fused: return "fused";
    case Algorithm::tiled: return "tiled";
    case Algorithm::online: return "online";
  }
  return "invalid";
}

std::string_view to_string(PassOrder order) noexcept {
  switch (order) {
    case PassOrder::reverse: return "reverse";
    case PassOrder::forward: return "forward";
  }
  return "invalid";
}

std::string_view to_string(AllMasked policy) noexcept {
  switch (policy) {
    case AllMasked::nan: return "nan";
    case AllMasked::zero: return "zero";
  }
  return "invalid";
}

std::string_view to_string(Stores stores) noexcept {
  switch (stores) {
    case Stores::automatic: return "auto";
    case Stores::cached: return "cached";
    case Stores::streaming: return "streaming";
  }
  return "invalid";
}

std::string_view to_string(Op op) noexcept {
  switch (op) {
    case Op::softmax: return "softmax";
    case Op::log_softmax: return "log_softmax";
    case Op::logsumexp: return "logsumexp";
  }
  return "invalid";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) noexcept {
  for (Algorithm a : {Algorithm::automatic, Algorithm::naive, Algorithm::safe, Algorithm::fused,
                      Algorithm::tiled, Algorithm::online}) {
    if (name == to_string(a)) return a;
  }
  return std::nullopt;
}

std::optional<PassOrder> parse_pass_order(std::string_view name) noexcept {
  for (PassOrder o : {PassOrder::reverse, PassOrder::forward}) {
    if (name == to_string(o)) return o;
  }
  return std::nullopt;
}

std::optional<AllMasked> parse_all_masked(std::string_view name) noexcept {
  for (AllMasked m : {AllMasked::nan, AllMasked::zero}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<Stores> parse_stores(std::string_view name) noexcept {
  for (Stores s : {Stores::automatic, Stores::cached, Stores::streaming}) {
    if (name == to_string(s)) return s;
  }
  return std::nullopt;
}

}  // namespace smax
