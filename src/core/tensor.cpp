#include "smax/tensor.hpp"

#include <algorithm>

#include "core/shape.hpp"

namespace smax {

TensorView::TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape)
    : data_(data), dtype_(dtype), rank_(static_cast<int>(shape.size())),
      strides_(detail::row_major_strides(shape, "tensor view")) {
  std::copy(shape.begin(), shape.end(), shape_.begin());
}

TensorView::TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape,
                       std::span<const std::int64_t> strides)
    : data_(data), dtype_(dtype) {
  detail::check_shape(shape, strides, "tensor view");
  rank_ = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), shape_.begin());
  std::copy(strides.begin(), strides.end(), strides_.begin());
}

std::int64_t TensorView::numel() const { return detail::element_count(shape()); }

}  // namespace smax
