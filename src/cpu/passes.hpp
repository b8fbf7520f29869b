// The passes the variants are made of. Each runs over elements [begin, end) of a
// strided row, forward or backward, and computes in the type C.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/stats.hpp"
#include "cpu/cancelling_logsumexp.hpp"
#include "cpu/element.hpp"
#include "cpu/row.hpp"
#include "cpu/simd/f32_rows.hpp"
#include "cpu/simd/f64_rows.hpp"

namespace smax::cpu {

using detail::ExactSum;
using detail::nan_max;
using detail::Stats;

// Contiguous rows (unit strides) of f32, f16 and bf16 go to the vectorised kernels of
// cpu/simd/f32_rows.hpp, which compute in float lanes (with the argument's rounding
// error carried, and sums in double) and meet every dtype's bar. execute.cpp gathers
// strided rows first, so the scalar loops below only serve a caller that passes
// another stride; they are each pass in its plainest form.
template <class T>
inline constexpr bool kSimdRows =
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Contiguous f64 rows go to the vectorised kernels of cpu/simd/f64_rows.hpp, which
// compute in double lanes with the argument's rounding error carried and add a
// compensated sum into d.
template <class T>
inline constexpr bool kSimdF64 = std::is_same_v<T, double>;

// Adds a vectorised pass's sum to d: the count of terms at the max first, so that
// ExactSum::minus_one keeps the rest exactly.
inline void add_exp_sum(ExactSum& d, const simd::ExpSum& s) {
  d.add(static_cast<double>(s.at_max));
  d.add(s.below_max);
}

// m = max(m, x[begin..end)), NaN-propagating.
template <class C, class T>
C max_pass(const T* x, std::ptrdiff_t stride, std::int64_t begin, std::int64_t end, C m) {
  if constexpr (kSimdRows<T>) {
    if (stride == 1 && end > begin) {
      return nan_max(m, static_cast<C>(simd::f32_rmax(x + begin, static_cast<std::size_t>(end - begin))));
    }
  }
  if constexpr (kSimdF64<T>) {
    if (stride == 1 && end > begin) return nan_max(m, simd::f64_rmax(x + begin, static_cast<std::size_t>(end - begin)));
  }
  for (std::int64_t i = begin; i < end; ++i) m = nan_max(m, Element<T>::template load<C>(x[i * stride]));
  return m;
}

// Which sum a pass computes: softmax's plain d, or the log ops' d that keeps d - 1
// exact (ExactSum::minus_one) by adding the terms at the max apart.
enum class SumFor { softmax, log };

inline SumFor sum_for(Op op) { return op == Op::softmax ? SumFor::softmax : SumFor::log; }

// d += sum(exp((x - m) * inv_t)) over [begin, end), walking backward if asked.
// Needs a finite m.
// `ahead` (contiguous f32, f16, bf16 rows): the span the caller passes over next, to
// fetch into cache meanwhile (simd::Ahead).
template <class C, class T>
void sum_exp_pass(const T* x, std::ptrdiff_t stride, std::int64_t begin, std::int64_t end, C m,
                  C inv_t, PassOrder order, ExactSum& d, SumFor use = SumFor::log,
                  const simd::Ahead<T>& ahead = {}) {
  if constexpr (kSimdRows<T>) {
    // m is the max of the row's elements, so exact in float.
    if (stride == 1 && end > begin) {
      add_exp_sum(d, simd::f32_rsum_exp_minus_max(x + begin, static_cast<std::size_t>(end - begin),
                                                  static_cast<float>(m), static_cast<double>(inv_t),
                                                  use == SumFor::log, order == PassOrder::reverse, ahead));
      return;
    }
  }
  if constexpr (kSimdF64<T>) {
    if (stride == 1 && end > begin) {
      simd::f64_add_sum_exp_minus_max(x + begin, static_cast<std::size_t>(end - begin), m, inv_t,
                                      order == PassOrder::reverse, d);
      return;
    }
  }
  auto term = [&](std::int64_t i) {
    return static_cast<double>(std::exp((Element<T>::template load<C>(x[i * stride]) - m) * inv_t));
  };
  if (order == PassOrder::forward) {
    for (std::int64_t i = begin; i < end; ++i) d.add(term(i));
  } else {
    for (std::int64_t i = end; i-- > begin;) d.add(term(i));
  }
}

// Turns an element into its output once the row's statistics are known.
template <class C>
struct Normalizer {
  Op op;
  C m;
  C inv_t;
  C scale;  // 1 / d
  C log_d;  // log(d)

  C operator()(C x) const {
    const C z = (x - m) * inv_t;
    return op == Op::log_softmax ? z - log_d : std::exp(z) * scale;
  }
};

// y = normalize(x) over [begin, end), forward or backward.
template <class C, class T>
void write_pass(const Row<T>& row, std::int64_t begin, std::int64_t end, const Normalizer<C>& f,
                PassOrder order, Stores stores, const simd::Ahead<T>& ahead = {}) {
  if constexpr (kSimdRows<T>) {
    if (row.x_stride == 1 && row.y_stride == 1 && end > begin) {
      const auto n = static_cast<std::size_t>(end - begin);
      const bool backward = order == PassOrder::reverse;
      if (f.op == Op::log_softmax) {
        simd::f32_log_softmax_normalize(row.x + begin, row.y + begin, n, static_cast<float>(f.m),
                                        static_cast<double>(f.inv_t), static_cast<float>(f.log_d), backward, stores);
      } else {
        simd::f32_softmax_normalize(row.x + begin, row.y + begin, n, static_cast<float>(f.m),
                                    static_cast<double>(f.inv_t), static_cast<float>(f.scale), backward, ahead, stores);
      }
      return;
    }
  }
  if constexpr (kSimdF64<T>) {
    if (row.x_stride == 1 && row.y_stride == 1 && end > begin) {
      const auto n = static_cast<std::size_t>(end - begin);
      const bool backward = order == PassOrder::reverse;
      if (f.op == Op::log_softmax) {
        simd::f64_log_softmax_normalize(row.x + begin, row.y + begin, n, f.m, f.inv_t, f.log_d, backward);
      } else {
        simd::f64_softmax_normalize(row.x + begin, row.y + begin, n, f.m, f.inv_t, f.scale, backward);
      }
      return;
    }
  }
  auto write = [&](std::int64_t i) {
    row.y[i * row.y_stride] = Element<T>::template store<C>(f(Element<T>::template load<C>(row.x[i * row.x_stride])));
  };
  if (order == PassOrder::forward) {
    for (std::int64_t i = begin; i < end; ++i) write(i);
  } else {
    for (std::int64_t i = end; i-- > begin;) write(i);
  }
}

template <class T>
void fill_row(const Row<T>& row, T value) {
  for (std::int64_t i = 0; i < row.n; ++i) row.y[i * row.y_stride] = value;
}

// Everything after the statistics, in one place for every variant but naive:
// logsumexp writes m/T + log(d); a non-finite max decides the whole row (NaN for a
// NaN or +inf in the row; the all-masked policy for an all -inf row); otherwise
// `write(normalizer)` runs the variant's own output pass.
template <class C, class T, class WritePass>
void finish_row(const Row<T>& row, const RowParams& p, const Stats<C>& s, WritePass&& write) {
  constexpr C kInf = std::numeric_limits<C>::infinity();
  constexpr C kNaN = std::numeric_limits<C>::quiet_NaN();
  // log(d) = log1p(d - 1): for a row whose other elements are all far below the max,
  // d - 1 is tiny and log(d) would lose it to rounding. In double for every dtype, so
  // that m/T + log(d) does not cancel in float when the two nearly cancel.
  const double log_d = std::log1p(s.d.minus_one());
  if (p.op == Op::logsumexp) {
    // NaN stays NaN, +inf gives +inf, all -inf (or an empty row) gives -inf.
    double lse = std::isfinite(s.m) ? static_cast<double>(s.m) * p.inv_t + log_d : static_cast<double>(s.m);
    if constexpr (kSixteenBit<T>) {
      lse = without_cancellation(lse, row.x, row.x_stride, row.n, p.inv_t);
    }
    row.y[0] = Element<T>::template store<double>(lse);
    return;
  }
  if (!std::isfinite(s.m)) {
    C value = kNaN;
    if (s.m == -kInf && p.all_masked == AllMasked::zero) value = p.op == Op::softmax ? C(0) : -kInf;
    fill_row(row, Element<T>::template store<C>(value));
    return;
  }
  write(Normalizer<C>{p.op, s.m, static_cast<C>(p.inv_t), static_cast<C>(1.0 / s.d.value()), static_cast<C>(log_d)});
}

}  // namespace smax::cpu
