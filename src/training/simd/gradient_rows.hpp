// Vectorised row kernels of the training ops, over contiguous (unit stride) rows of
// f32, f16 or bf16, dispatched at run time to the best Highway target the CPU
// supports (gradient_rows.cpp). Each handles any n >= 0, any alignment and its tail
// without touching memory past the row. T is float, half or bfloat16.
//
// Accuracy: the sums are compensated in double lanes (products of two floats are
// exact there); softmax's write pass for f32 does the scalar code's double
// arithmetic in double lanes, for f16 and bf16 (one-ulp bar) in float lanes with s as
// a double-float; log-softmax's write pass runs in float lanes and redoes in double
// every vector where dy and exp(log_y) * S cancel too much for 1e-6; the
// cross-entropy gradient computes in float lanes with the kernels' exp (1.01 ulp),
// and in double where exps leave float's normal range. See docs/ARCHITECTURE.md.
#pragma once

#include <cstddef>

#include "smax/dtype.hpp"

namespace smax::training::simd {

// A sum as hi + lo, lo the rounding error of hi (to about twice double's
// precision). A non-finite sum is the plain IEEE sum in hi, with lo = 0.
struct SplitSum {
  double hi = 0;
  double lo = 0;
};

// sum(y[i] * dy[i]), the products exact in double lanes, the sum compensated.
SplitSum sum_of_products(const float* y, const float* dy, std::size_t n);
SplitSum sum_of_products(const half* y, const half* dy, std::size_t n);
SplitSum sum_of_products(const bfloat16* y, const bfloat16* dy, std::size_t n);

// sum(v[i]), compensated, in double lanes.
SplitSum sum_of(const float* v, std::size_t n);
SplitSum sum_of(const half* v, std::size_t n);
SplitSum sum_of(const bfloat16* v, std::size_t n);

// dx[i] = y[i] * ((dy[i] - s.hi) - s.lo) * inv_t in double, rounded to T. dx may be
// y or dy itself.
void softmax_backward_write(const float* y, const float* dy, float* dx, std::size_t n, SplitSum s, double inv_t);
void softmax_backward_write(const half* y, const half* dy, half* dx, std::size_t n, SplitSum s, double inv_t);
void softmax_backward_write(const bfloat16* y, const bfloat16* dy, bfloat16* dx, std::size_t n, SplitSum s,
                            double inv_t);

// dx[i] = (dy[i] - exp(log_y[i]) * sum) * inv_t in double, with a double exp (0
// below DBL_MIN); an element whose log_y is not <= 0 (not a log-probability: NaN,
// positive) takes std::exp. dx may be log_y or dy itself.
void log_softmax_backward_write(const float* log_y, const float* dy, float* dx, std::size_t n, double sum,
                                double inv_t);
void log_softmax_backward_write(const half* log_y, const half* dy, half* dx, std::size_t n, double sum,
                                double inv_t);
void log_softmax_backward_write(const bfloat16* log_y, const bfloat16* dy, bfloat16* dx, std::size_t n, double sum,
                                double inv_t);

// One cross-entropy row with a finite max m, and its coefficients a_c = spread * w_c
// (the target's own share is the caller's): grad[c] = (S * exp(x[c] - m) / d - a_c) *
// scale, where inv_d = 1 / d, S = coefficient_sum.
struct CrossEntropyRow {
  float m = 0;
  double coefficient_sum = 0;
  double inv_d = 0;
  double spread = 0;
  double scale = 1;
};

// Writes grad (unless null; it may be x itself) and returns sum_c w_c * (m - x[c])
// when `want_offsets` (0 otherwise). weight: the class weights (contiguous), or null
// for all ones. Elements with x[c] - m < -87 (whose exp is below float's normal
// range) are computed in double, as the scalar code does.
double cross_entropy_row(const float* x, float* grad, const float* weight, std::size_t n,
                         const CrossEntropyRow& row, bool want_offsets);
double cross_entropy_row(const half* x, half* grad, const half* weight, std::size_t n, const CrossEntropyRow& row,
                         bool want_offsets);
double cross_entropy_row(const bfloat16* x, bfloat16* grad, const bfloat16* weight, std::size_t n,
                         const CrossEntropyRow& row, bool want_offsets);

}  // namespace smax::training::simd
