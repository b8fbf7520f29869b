// Vectorised training kernels along an axis that is not the contiguous one: the rows
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

// Cross-entropy over a strided class axis, the samples across the lanes: column j's
// logits of class c at x[c * stride + j]. The (max, sum) of each column: m[j] its max
// (NaN where any logit is NaN), and where m[j] is finite, d = at_max[j] + below[j]:
// how many logits equal the max, and the sum of exp(x - m) over the others, in double
// (compensated as the sums above), so that d - 1 stays exact for a dominant class.
// With `exps`, each exp(x - m) is also stored, at exps[c * exps_stride + j], for the
// write pass (ColumnTerms::exps), which then computes none.
struct ColumnStats {
  double* m;
  double* at_max;
  double* below;
  double* exps = nullptr;
  std::size_t exps_stride = 0;
};
void cross_entropy_column_stats(const float* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                ColumnStats out);
void cross_entropy_column_stats(const half* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                ColumnStats out);
void cross_entropy_column_stats(const bfloat16* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                ColumnStats out);

// What the write pass of cross-entropy columns needs per column j, as cross_entropy.cpp's scalar rows compute it: the gradient
// (S * p_c - a_c) * scale with p_c = exp(x_c - m) / d and a_c = spread * w_c +
// (c == target ? target_coefficient : 0), taken as S * (p - 1) + ((S_hi - a) + S_lo)
// at the max where d < 2 (p > 1/2); 0 where `ignored` is nonzero, NaN where m is not
// finite. The log-probabilities (x - m) - log_d, NaN where m is not finite.
// The per-column arrays here and in ColumnStats hold `columns` entries rounded up to
// kColumnArrayPadding: the kernels load and store them a whole vector at a time.
inline constexpr std::size_t kColumnArrayPadding = 32;
struct ColumnTerms {
  const double* m;
  const double* log_d;
  const double* d;
  const double* inv_d;
  const double* p_minus_one;         // -(d - 1) / d
  const double* sum_hi;              // S = sum_hi + sum_lo, S = sum_a rounded
  const double* sum_lo;
  const double* sum_a;
  const double* target;              // the target class, as a double
  const double* target_coefficient;  // (1 - smoothing) * the target's weight
  const double* ignored;             // nonzero: the gradient is 0
  const double* class_weight;        // w_c per class (n of them), where spread != 0; else null
  double spread = 0;                 // smoothing / classes
  double scale = 1;                  // the reduction's factor of the gradient
  double* spread_offsets;            // out, where spread != 0: sum_c w_c * (m - x_c) per column
  const double* exps = nullptr;      // ColumnStats::exps, or null: computed again
  std::size_t exps_stride = 0;
};

// Writes grad (null: none) and log_prob (null: none), each along the axis at its
// stride; either may be x itself (same data and stride).
void cross_entropy_columns(const float* x, std::ptrdiff_t x_stride, float* grad, std::ptrdiff_t grad_stride,
                           float* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const ColumnTerms& terms);
void cross_entropy_columns(const half* x, std::ptrdiff_t x_stride, half* grad, std::ptrdiff_t grad_stride,
                           half* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const ColumnTerms& terms);
void cross_entropy_columns(const bfloat16* x, std::ptrdiff_t x_stride, bfloat16* grad, std::ptrdiff_t grad_stride,
                           bfloat16* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const ColumnTerms& terms);

}  // namespace smax::training::simd
