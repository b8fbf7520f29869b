// The checks both view types (TensorView, IndexView) make of a shape, written once.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "smax/tensor.hpp"

namespace smax::detail {

// Throws an Errc::shape error, its message starting with `view` ("tensor view"), for a
// rank above kMaxRank, a negative extent, or extents whose product does not fit
// int64. A zero extent empties a view, but its other extents still multiply into row
// counts and strides, so their product is checked as well.
void check_shape(std::span<const std::int64_t> shape, std::string_view view);
// check_shape, after checking that there is one stride per extent.
void check_shape(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::string_view view);

// The number of elements of a shape that passed check_shape (0 if an extent is 0).
std::int64_t element_count(std::span<const std::int64_t> shape) noexcept;

// Row-major (C-contiguous) strides of `shape`, checked first.
std::array<std::int64_t, kMaxRank> row_major_strides(std::span<const std::int64_t> shape, std::string_view view);

}  // namespace smax::detail
