// The exp argument of the kernels, z + z_lo = (x - m) * (1/T), computed in float (or
// double) lanes with its rounding error carried in z_lo, so that exp(z + z_lo) is as
// accurate as if the argument had been computed exactly. Lane-wise in m, so a row
// kernel (one m for every lane) and a column kernel (one m per lane) can share it.
//
// How: s = x - m with its exact error e (TwoSum); then s * hi with its exact error
// (FMA, or Dekker's split product on targets without FMA), plus e * hi, and for float
// lanes s * lo, where hi + lo is 1/T as a double-float (for double lanes 1/T is the
// double itself). Float lanes get the product to about 2^-45, double lanes to about
// 2^-100. z_lo is zeroed where it is not a small finite correction (x = -inf, or z far
// outside exp's domain), so it never turns a result into NaN.
//
// The first part (once per translation unit) holds 1/T and its splits; the second is
// compiled once per Highway target (the -inl.h convention).
#ifndef SMAX_CPU_SIMD_ARGUMENT_ONCE
#define SMAX_CPU_SIMD_ARGUMENT_ONCE

#include <bit>
#include <cstdint>

namespace smax::cpu::simd {

// 1/T for the argument: as the double-float hi + lo for float lanes, with hi split
// into two halves of 12 significant bits (hi_a + hi_b == hi); as the double `value`
// split into 26 and 27 bits (value_a + value_b == value) for double lanes. The splits
// make the product exact on targets without FMA.
struct InverseTemperature {
  double value = 1;
  double value_a = 1;
  double value_b = 0;
  float hi = 1;
  float lo = 0;
  float hi_a = 1;
  float hi_b = 0;
  bool unit = true;  // T == 1: the argument is x - m alone

  static InverseTemperature of(double inv_t) {
    InverseTemperature r;
    r.value = inv_t;
    r.value_a = std::bit_cast<double>(std::bit_cast<std::uint64_t>(inv_t) & ~((std::uint64_t{1} << 27) - 1));
    r.value_b = inv_t - r.value_a;
    r.hi = static_cast<float>(inv_t);
    r.lo = static_cast<float>(inv_t - static_cast<double>(r.hi));
    r.hi_a = std::bit_cast<float>(std::bit_cast<std::uint32_t>(r.hi) & 0xFFFFF000u);
    r.hi_b = r.hi - r.hi_a;
    r.unit = inv_t == 1.0;
    return r;
  }
};

}  // namespace smax::cpu::simd
#endif  // SMAX_CPU_SIMD_ARGUMENT_ONCE

#if defined(SMAX_CPU_SIMD_ARGUMENT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_ARGUMENT_INL_H_
#undef SMAX_CPU_SIMD_ARGUMENT_INL_H_
#else
#define SMAX_CPU_SIMD_ARGUMENT_INL_H_
#endif

#include <type_traits>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// InverseTemperature broadcast to every lane of D (float or double lanes).
template <class D>
struct InverseTemperatureLanes {
  static constexpr bool kFloat = std::is_same_v<hn::TFromD<D>, float>;
  hn::Vec<D> hi, lo, hi_a, hi_b;
  InverseTemperatureLanes(D d, const InverseTemperature& t)
      : hi(kFloat ? hn::Set(d, t.hi) : hn::Set(d, t.value)),
        lo(kFloat ? hn::Set(d, t.lo) : hn::Zero(d)),
        hi_a(kFloat ? hn::Set(d, t.hi_a) : hn::Set(d, t.value_a)),
        hi_b(kFloat ? hn::Set(d, t.hi_b) : hn::Set(d, t.value_b)) {}
};

// The exact error of the product p = a * t.hi (to 2^-106 of p for double lanes
// without FMA, where a_lo * hi_b rounds).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ErrorOfProductByHi(D d, V a, const InverseTemperatureLanes<D>& t, V p) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulSub(a, t.hi, p);
#else
  // Dekker: a and hi split into halves whose partial products are exact.
  const hn::RebindToUnsigned<D> du;
  using U = hn::TFromD<decltype(du)>;
  constexpr U kHighHalf = InverseTemperatureLanes<D>::kFloat ? U{0xFFFFF000u} : ~((U{1} << 27) - 1);
  const V a_hi = hn::BitCast(d, hn::And(hn::BitCast(du, a), hn::Set(du, kHighHalf)));
  const V a_lo = hn::Sub(a, a_hi);
  V e = hn::Sub(hn::Mul(a_hi, t.hi_a), p);
  e = hn::Add(e, hn::Mul(a_hi, t.hi_b));
  e = hn::Add(e, hn::Mul(a_lo, t.hi_a));
  return hn::Add(e, hn::Mul(a_lo, t.hi_b));
#endif
}

// z + z_lo = (x + neg_m) * (1/T); kUnitT skips the product (T == 1). kForExp: z_lo
// only goes to an exp of exp-inl.h or exp_f64-inl.h, which ignore it (even a NaN)
// where z is below their range, as it is wherever the correction would be unsafe
// (x = -inf), so the zeroing is skipped.
template <bool kUnitT, bool kForExp = false, class D, class V = hn::Vec<D>>
HWY_INLINE void ScaledDifference(D d, const InverseTemperatureLanes<D>& t, V x, V neg_m, V& z, V& z_lo) {
  using L = hn::TFromD<D>;
  const V s = hn::Add(x, neg_m);
  const V shift = hn::Sub(s, x);
  const V e = hn::Add(hn::Sub(x, hn::Sub(s, shift)), hn::Sub(neg_m, shift));  // s + e == x - m exactly
  V lo;
  if constexpr (kUnitT) {
    (void)t;
    z = s;
    lo = e;
  } else {
    z = hn::Mul(s, t.hi);
    lo = hn::MulAdd(e, t.hi, ErrorOfProductByHi(d, s, t, z));
    if constexpr (InverseTemperatureLanes<D>::kFloat) lo = hn::MulAdd(s, t.lo, lo);
  }
  if constexpr (kForExp) {
    z_lo = lo;
  } else {
    z_lo = hn::IfThenElseZero(hn::Lt(hn::Abs(lo), hn::Set(d, L{1})), lo);
  }
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_ARGUMENT_INL_H_
