// Vectorised passes over contiguous f32 rows (unit stride), dispatched at run time
// to the best Highway target the CPU supports (f32_rows.cpp). Plain functions over
// a pointer and a length; each handles any n >= 0, any alignment, and its tail with
// masked or buffered loads and stores (no scalar remainder loop).
//
// Accuracy: the exp argument z = (x - m) / T is computed in float together with its
// rounding error z_lo (the exact error of x - m, the exact error of the product by
// 1/T, and 1/T carried as a double-float), and exp(z + z_lo) is evaluated to within
// 1.01 ulp; sums accumulate in double lanes. See docs/ARCHITECTURE.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace smax::cpu::simd {

// max(x[0..n)), NaN if any element is NaN; -inf for n == 0.
float f32_rmax(const float* x, std::size_t n);

// sum(exp((x[i] - m) * inv_t)) over [0, n), in double. m must be finite and >= every
// x[i]; elements equal to -inf add 0. `backward` walks from the end to the start.
double f32_rsum_exp_minus_max(const float* x, std::size_t n, float m, double inv_t, bool backward);

// y[i] = exp((x[i] - m) * inv_t) * scale. y may be x itself.
void f32_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float scale,
                           bool backward);

// y[i] = (x[i] - m) * inv_t - log_d. y may be x itself.
void f32_log_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float log_d,
                               bool backward);

// y[i] = exp(z[i] + z_lo[i]) with the kernels' exp (0 below the normal range); for tests.
void f32_exp_flush(const float* z, const float* z_lo, float* y, std::size_t n);

}  // namespace smax::cpu::simd
