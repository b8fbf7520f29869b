// 16-bit logsumexp results near zero, taken again in long double.
//
// m/T + log(d) cancels where the result is small against its terms. The kernels' float
// exps leave d within a few float units, so log(d) within about 2^-21: more than a
// 16-bit unit in the last place of a result below 2^-8 (bf16's unit is at least 2^-8
// of it, f16's 2^-11; f32 and f64 results have an absolute bar). Rows with such a
// result (rare: m/T within 2^-8 of -log(d)) are summed again from the row in long
// double, as the reference sums them. Found by a differential fuzz: bf16 [-0.6523,
// -0.7734, -4.031] gave -2.75e-9 for -1.605e-8, 114 units off.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/element.hpp"

namespace smax::cpu {

template <class T>
inline constexpr bool kSixteenBit = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Below this magnitude a 16-bit logsumexp result is taken again.
inline constexpr double kCancellingLogSumExp = 0x1p-8;

// logsumexp(x / T) of n elements stride apart, in long double: m/T + log1p(d - 1)
// with the terms at the max counted apart, so that d - 1 keeps every bit. Only for
// rows whose result was finite (no NaN, no +inf, not all -inf).
template <class T>
double logsumexp_in_long_double(const T* x, std::ptrdiff_t stride, std::int64_t n, double inv_t) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (std::int64_t i = 0; i < n; ++i) m = std::fmax(m, Element<T>::template load<float>(x[i * stride]));
  long double at_max = 0;
  long double others = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const long double v = Element<T>::template load<float>(x[i * stride]);
    if (v == m) {
      at_max += 1;
    } else {
      others += std::exp((v - m) * static_cast<long double>(inv_t));
    }
  }
  return static_cast<double>(m * static_cast<long double>(inv_t) + std::log1p(at_max - 1 + others));
}

// lse, a row's logsumexp as the kernels computed it, or the row's long double one
// where |lse| is below kCancellingLogSumExp (NaN and infinities pass as they are).
template <class T>
double without_cancellation(double lse, const T* x, std::ptrdiff_t stride, std::int64_t n, double inv_t) {
  return std::fabs(lse) < kCancellingLogSumExp ? logsumexp_in_long_double(x, stride, n, inv_t) : lse;
}

}  // namespace smax::cpu
