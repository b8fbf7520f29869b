#include "smax/tensor.hpp"

#include <string>

#include "core/format.hpp"
#include "smax/error.hpp"

namespace smax {
namespace {

int checked_rank(std::size_t rank) {
  if (rank > static_cast<std::size_t>(kMaxRank)) {
    throw Error(Errc::shape, "tensor view: rank " + std::to_string(rank) + " exceeds the maximum of " +
                                 std::to_string(kMaxRank));
  }
  return static_cast<int>(rank);
}

}  // namespace

TensorView::TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape)
    : data_(data), dtype_(dtype), rank_(checked_rank(shape.size())) {
  std::int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape[static_cast<std::size_t>(i)] < 0) {
      throw Error(Errc::shape, "tensor view: shape " + detail::format_list(shape) + " has a negative extent");
    }
    shape_[static_cast<std::size_t>(i)] = shape[static_cast<std::size_t>(i)];
    strides_[static_cast<std::size_t>(i)] = stride;
    if (shape[static_cast<std::size_t>(i)] > 1) stride *= shape[static_cast<std::size_t>(i)];
  }
  numel();  // rejects sizes that overflow
}

TensorView::TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides)
    : data_(data), dtype_(dtype), rank_(checked_rank(shape.size())) {
  if (strides.size() != shape.size()) {
    throw Error(Errc::shape, "tensor view: strides " + detail::format_list(strides) + " have " +
                                 std::to_string(strides.size()) + " entries but shape " +
                                 detail::format_list(shape) + " has " + std::to_string(shape.size()));
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(Errc::shape, "tensor view: shape " + detail::format_list(shape) + " has a negative extent");
    }
    shape_[i] = shape[i];
    strides_[i] = strides[i];
  }
  numel();
}

std::int64_t TensorView::numel() const {
  for (int i = 0; i < rank_; ++i) {
    if (shape_[static_cast<std::size_t>(i)] == 0) return 0;
  }
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, shape_[static_cast<std::size_t>(i)], &n)) {
      throw Error(Errc::shape, "tensor view: shape " + detail::format_list(shape()) +
                                   " has more elements than int64 can count");
    }
  }
  return n;
}

}  // namespace smax
