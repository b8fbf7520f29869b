// Vectorised backward passes along an axis that is not the contiguous one: the rows
// lie across the vector lanes, one row per lane, side by side in the contiguous
// dimension next to the axis (the layout of softmax over the channels of [N, C, H, W]
// along axis 1). Dispatched at run time to the best Highway target the CPU supports
// (gradient_columns.cpp). T is float, half or bfloat16.
//
// Row j (0 <= j < columns) has n elements: element c of it at p[c * stride + j], for
// each of y (or log_y), dy and dx with their own strides (in elements, any sign). dx
// may be y or dy itself (the same data and strides). Each lane computes in double what
// backward.cpp's scalar rows compute, its sum as the vectorised rows' sums
// (gradient_rows.hpp: plain for a few terms, then compensated); log-softmax's exps
// come from cpu/simd/exp_f64-inl.h (under a double ulp; std::exp serves the lanes
// outside its range). A row's bits never depend on where it lies among the columns.
#pragma once

#include <cstddef>

#include "smax/dtype.hpp"

namespace smax::training::simd {

// The strides of a panel of columns along the axis, in elements.
struct ColumnStrides {
  std::ptrdiff_t y = 0, dy = 0, dx = 0;
};

// dx = y * (dy - s) * inv_t per row, s = sum(y * dy) compensated in double.
void softmax_backward_columns(const float* y, const float* dy, float* dx, ColumnStrides strides, std::size_t n,
                              std::size_t columns, double inv_t);
void softmax_backward_columns(const half* y, const half* dy, half* dx, ColumnStrides strides, std::size_t n,
                              std::size_t columns, double inv_t);
void softmax_backward_columns(const bfloat16* y, const bfloat16* dy, bfloat16* dx, ColumnStrides strides,
                              std::size_t n, std::size_t columns, double inv_t);

// dx = (dy - exp(log_y) * S) * inv_t per row, S = sum(dy) compensated in double.
void log_softmax_backward_columns(const float* log_y, const float* dy, float* dx, ColumnStrides strides,
                                  std::size_t n, std::size_t columns, double inv_t);
void log_softmax_backward_columns(const half* log_y, const half* dy, half* dx, ColumnStrides strides, std::size_t n,
                                  std::size_t columns, double inv_t);
void log_softmax_backward_columns(const bfloat16* log_y, const bfloat16* dy, bfloat16* dx, ColumnStrides strides,
                                  std::size_t n, std::size_t columns, double inv_t);

}  // namespace smax::training::simd
