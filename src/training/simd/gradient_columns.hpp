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
// outside its range). The write passes run in float lanes as the rows' do, each
// element the double lanes cannot leave to them taking theirs. A row's bits never
// depend on where it lies among the columns.
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
// logits of class c at x[c * stride + j]. A piece of columns goes through four steps,
// each lane computing in double what cross_entropy.cpp's scalar rows compute for its
// sample (run(), GradientTerms, gradient(), finish_vectorised()):
//   cross_entropy_column_stats: m (the max; NaN where a logit is NaN), at_max (how
//     many logits equal it) and below (the sum of exp(x - m) over the others,
//     compensated as the sums above): d = at_max + below with d - 1 exact for a
//     dominant class; with `exps`, each exp(x - m) kept for the write pass;
//   the caller fills each column's target, target_weight, target_logit, ignored;
//   cross_entropy_column_terms: log_d = log1p(d - 1), d, 1 / d, p - 1 = -(d - 1) / d,
//     S = (1 - s) w_t + spread * (sum of the class weights) as sum_hi + sum_lo,
//     target_coefficient = (1 - s) w_t;
//   cross_entropy_columns (the write pass): the gradient (S p_c - a_c) * scale, p_c =
//     exp(x_c - m) / d, a_c = spread * w_c + (c == target ? target_coefficient : 0),
//     taken as S (p - 1) + ((S_hi - a) + S_lo) at the max where d < 2 (p > 1/2), 0
//     where ignored, NaN where m is not finite; the log-probabilities (x - m) - log_d
//     (NaN where m is not finite); where spread != 0, sum_c w_c (m - x_c);
//   cross_entropy_column_losses: S log_d + (1 - s) w_t (m - x_t) + spread * that sum,
//     0 where ignored, NaN where m is not finite.
// Every per-column array holds `columns` entries rounded up to kColumnArrayPadding:
// the kernels load and store them a whole vector at a time.
inline constexpr std::size_t kColumnArrayPadding = 32;
struct CrossEntropyColumns {
  double* m;
  double* at_max;
  double* below;
  double* exps = nullptr;     // exps[c * exps_stride + j], or null: the write pass computes them
  float* float_exps = nullptr;  // the same in float, for cross_entropy_column_stats_in_float
  std::size_t exps_stride = 0;
  double* target;             // the target class as a double (any value where ignored)
  double* target_weight;      // w_t (1 without weights)
  double* target_logit;       // x_t, read before a gradient in place overwrites it
  double* ignored;            // nonzero: the sample is ignored
  double* log_d;
  double* d;
  double* inv_d;
  double* p_minus_one;
  double* sum_hi;
  double* sum_lo;
  double* sum_a;
  double* target_coefficient;
  double* spread_offsets;
  double* loss;
  double* target_grad = nullptr;         // cross_entropy_column_target_gradients's output
  const double* class_weight = nullptr;  // w_c per class, where spread != 0
  double keep = 1;                       // 1 - smoothing
  double spread = 0;                     // smoothing / classes
  double spread_weight_sum = 0;          // spread * the sum of every class's weight
  double scale = 1;                      // the reduction's factor of the gradient
};

void cross_entropy_column_stats(const float* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                const CrossEntropyColumns& piece);
void cross_entropy_column_stats(const half* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                const CrossEntropyColumns& piece);
void cross_entropy_column_stats(const bfloat16* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                const CrossEntropyColumns& piece);

// The same with float exps (cpu/simd/exp_minus_max-inl.h, 1.25 ulp, 0 below FLT_MIN),
// added in float a few classes at a time, each such sum then in double (below: within
// a few float ulps, as the rows' sums), kept in float_exps where that is set (the
// write pass computes the exps of the flushed ones again in double), on targets with
// FMA: false (and nothing usable written) on others, or where a column's max is
// finite but beyond 16384 in magnitude. Their d - 1 misses the flushed terms, which
// matter where it is below about n * 2^-102 (cross_entropy.cpp's
// kFlushedTermsMatter): the double stats then.
bool cross_entropy_column_stats_in_float(const float* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                         const CrossEntropyColumns& piece);
bool cross_entropy_column_stats_in_float(const half* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                                         const CrossEntropyColumns& piece);
bool cross_entropy_column_stats_in_float(const bfloat16* x, std::ptrdiff_t stride, std::size_t n,
                                         std::size_t columns, const CrossEntropyColumns& piece);

void cross_entropy_column_terms(std::size_t columns, const CrossEntropyColumns& piece);

// grad (null: none) and log_prob (null: none) each along the axis at its stride;
// either may be x itself (same data and stride).
void cross_entropy_columns(const float* x, std::ptrdiff_t x_stride, float* grad, std::ptrdiff_t grad_stride,
                           float* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const CrossEntropyColumns& piece);
void cross_entropy_columns(const half* x, std::ptrdiff_t x_stride, half* grad, std::ptrdiff_t grad_stride,
                           half* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const CrossEntropyColumns& piece);
void cross_entropy_columns(const bfloat16* x, std::ptrdiff_t x_stride, bfloat16* grad, std::ptrdiff_t grad_stride,
                           bfloat16* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,
                           const CrossEntropyColumns& piece);

// The write pass in float lanes, the rows' form (gradient_rows.hpp's
// cross_entropy_rows_write), after cross_entropy_column_stats_in_float kept float_exps,
// without smoothing (spread 0): every class's gradient as if it were not the target,
// S p scale = e (P_hi + P_lo) with P = S / d * scale as two floats; 0 where ignored,
// NaN where m is not finite; the lanes whose P does not fit a normal float and the
// elements whose float exp was flushed (not -inf's) as cross_entropy_columns computes
// them. The caller stores each target's own gradient (target_grad). grad may be x.
void cross_entropy_columns_in_float(const float* x, std::ptrdiff_t x_stride, float* grad, std::ptrdiff_t grad_stride,
                                    std::size_t n, std::size_t columns, const CrossEntropyColumns& piece);
void cross_entropy_columns_in_float(const half* x, std::ptrdiff_t x_stride, half* grad, std::ptrdiff_t grad_stride,
                                    std::size_t n, std::size_t columns, const CrossEntropyColumns& piece);
void cross_entropy_columns_in_float(const bfloat16* x, std::ptrdiff_t x_stride, bfloat16* grad,
                                    std::ptrdiff_t grad_stride, std::size_t n, std::size_t columns,
                                    const CrossEntropyColumns& piece);

void cross_entropy_column_losses(std::size_t columns, const CrossEntropyColumns& piece);

// Each sample's gradient at its target class, as the write pass computes it, into
// target_grad (after cross_entropy_column_terms; any value where the sample is ignored
// or its max is not finite): for rows written in float lanes (gradient_rows.hpp's
// cross_entropy_rows_write), whose target the caller stores apart.
void cross_entropy_column_target_gradients(std::size_t columns, const CrossEntropyColumns& piece);

}  // namespace smax::training::simd
