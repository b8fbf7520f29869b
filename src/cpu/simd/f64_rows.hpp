// Vectorised passes over contiguous f64 rows (unit stride), dispatched at run time
// to the best Highway target the CPU supports (f64_rows.cpp). The f64 twins of
// f32_rows.hpp: plain functions over a pointer and a length; each handles any n >= 0,
// any alignment, and its tail with masked or buffered loads and stores (no scalar
// remainder loop).
//
// Accuracy: the exp argument z = (x - m) * inv_t is computed in double together with
// its rounding error z_lo (the exact error of x - m and of the product by inv_t), and
// exp(z + z_lo) is evaluated to within 1 ulp (exp_f64-inl.h), so a softmax output at
// z = -700 is not off by the 700 * 2^-52 relative that rounding z would cost. The exp
// terms are summed per lane with a compensated (Neumaier) sum and added into the
// caller's ExactSum, so d - 1 stays exact when one element dominates the row.
#pragma once

#include <cstddef>

#include "core/stats.hpp"

namespace smax::cpu::simd {

// max(x[0..n)), NaN if any element is NaN; -inf for n == 0.
double f64_rmax(const double* x, std::size_t n);

// d += sum(exp((x[i] - m) * inv_t)) over [0, n). m must be finite and >= every x[i];
// elements equal to -inf add 0. `backward` walks from the end to the start.
void f64_add_sum_exp_minus_max(const double* x, std::size_t n, double m, double inv_t, bool backward,
                               ::smax::detail::ExactSum& d);

// The fused variant's middle pass: e[i] = exp((x[i] - m) * inv_t), added to d as
// f64_add_sum_exp_minus_max does. e may be x itself.
void f64_add_store_exp_minus_max(const double* x, double* e, std::size_t n, double m, double inv_t,
                                 ::smax::detail::ExactSum& d);

// y[i] = e[i] * scale. y may be e itself.
void f64_vscale(const double* e, double* y, std::size_t n, double scale);

// y[i] = exp((x[i] - m) * inv_t) * scale. y may be x itself.
void f64_softmax_normalize(const double* x, double* y, std::size_t n, double m, double inv_t, double scale,
                           bool backward);

// y[i] = (x[i] - m) * inv_t - log_d. y may be x itself.
void f64_log_softmax_normalize(const double* x, double* y, std::size_t n, double m, double inv_t, double log_d,
                               bool backward);

// y[i] = exp(z[i] + z_lo[i]) with the kernels' exp (0 below the normal range); for tests.
void f64_exp_flush(const double* z, const double* z_lo, double* y, std::size_t n);

}  // namespace smax::cpu::simd
