// The exp argument of the f32 kernels, z + z_lo = (x - m) * (1/T), computed in float
// lanes with its rounding error carried in z_lo, so that exp(z + z_lo) is as accurate
// as if the argument had been computed in double. Lane-wise in m, so a row kernel
// (one m for every lane) and a column kernel (one m per lane) share it.
//
// How: s = x - m with its exact error e (TwoSum); then s * hi with its exact error
// (FMA, or Dekker's split product on targets without FMA), plus s * lo + e * hi, where
// hi + lo is 1/T as a double-float. The result is within about 2^-45 of the exact
// product. z_lo is zeroed where it is not a small finite correction (x = -inf, or z
// far outside exp's domain), so it never turns a result into NaN.
//
// The first part (once per translation unit) holds the scalar double-float 1/T; the
// second is compiled once per Highway target (the -inl.h convention).
#ifndef SMAX_CPU_SIMD_ARGUMENT_ONCE
#define SMAX_CPU_SIMD_ARGUMENT_ONCE

#include <bit>
#include <cstdint>

namespace smax::cpu::simd {

// 1/T as the double-float hi + lo, and hi split into two halves of 12 significant
// bits each (hi_a + hi_b == hi) for the exact product on targets without FMA.
struct InverseTemperature {
  float hi = 1;
  float lo = 0;
  float hi_a = 1;
  float hi_b = 0;
  bool unit = true;  // T == 1: the argument is x - m alone

  static InverseTemperature of(double inv_t) {
    InverseTemperature r;
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

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// InverseTemperature broadcast to every lane of DF (float lanes).
template <class DF>
struct InverseTemperatureLanes {
  hn::Vec<DF> hi, lo, hi_a, hi_b;
  InverseTemperatureLanes(DF df, const InverseTemperature& t)
      : hi(hn::Set(df, t.hi)), lo(hn::Set(df, t.lo)), hi_a(hn::Set(df, t.hi_a)), hi_b(hn::Set(df, t.hi_b)) {}
};

// The exact error of the float product p = a * t.hi.
template <class DF, class V = hn::Vec<DF>>
HWY_INLINE V ErrorOfProductByHi(DF df, V a, const InverseTemperatureLanes<DF>& t, V p) {
#if HWY_NATIVE_FMA
  (void)df;
  return hn::MulSub(a, t.hi, p);
#else
  // Dekker: a and hi split into 12-bit halves, whose partial products are exact.
  const hn::RebindToUnsigned<DF> du;
  const V a_hi = hn::BitCast(df, hn::And(hn::BitCast(du, a), hn::Set(du, 0xFFFFF000u)));
  const V a_lo = hn::Sub(a, a_hi);
  V e = hn::Sub(hn::Mul(a_hi, t.hi_a), p);
  e = hn::Add(e, hn::Mul(a_hi, t.hi_b));
  e = hn::Add(e, hn::Mul(a_lo, t.hi_a));
  return hn::Add(e, hn::Mul(a_lo, t.hi_b));
#endif
}

// z + z_lo = (x + neg_m) * (1/T); kUnitT skips the product (T == 1). kForExp: z_lo
// only goes to ExpFlush or ExpGradual, which ignore it (even a NaN) where z is below
// their range, as it is wherever the correction would be unsafe (x = -inf), so the
// zeroing is skipped.
template <bool kUnitT, bool kForExp = false, class DF, class V = hn::Vec<DF>>
HWY_INLINE void ScaledDifference(DF df, const InverseTemperatureLanes<DF>& t, V x, V neg_m, V& z, V& z_lo) {
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
    lo = hn::MulAdd(e, t.hi, ErrorOfProductByHi(df, s, t, z));
    lo = hn::MulAdd(s, t.lo, lo);
  }
  if constexpr (kForExp) {
    z_lo = lo;
  } else {
    z_lo = hn::IfThenElseZero(hn::Lt(hn::Abs(lo), hn::Set(df, 1.0f)), lo);
  }
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_ARGUMENT_INL_H_
