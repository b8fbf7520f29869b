// A branch-free f32 exp for the softmax domain, written against Highway's portable
// ops and compiled once per target (the -inl.h convention: this header is included
// again for every target by foreach_target.h, so its guard toggles).
//
// exp(z + z_lo) for z <= 88, where z_lo is a small low-order part of the argument
// (the rounding error of computing z in float; 0 if there is none):
//   n = round(z * log2(e))
//   r = z - n * ln2_hi - n * ln2_lo + z_lo        (two-constant Cody-Waite)
//   exp(r) = 1 + r + r^2 * p(r), p of degree 4    (a degree-6 polynomial)
//   exp(z) = 2^n * exp(r), 2^n built from the exponent bits of n + 127.
// Results below the smallest normal float (z < kExpCutoff, about -87.3365) are 0 on
// purpose: no subnormal results, and z = -inf (or any z_lo, even NaN, with such a z)
// gives exactly 0. Error <= 1.01 ulp on [-87.3, 0] (tests/unit/simd_exp_exhaustive_test.cpp
// checks every float there against double std::exp on every target).
//
// ln2_hi has 17 significant bits, so n * ln2_hi is exact for |n| <= 127 and
// z - n * ln2_hi is exact (Sterbenz) on targets without FMA too.
// The coefficients of p were fitted here (iteratively reweighted least squares for
// the minimax relative error on [-0.35, 0.35] with the first two terms fixed at 1,
// then rounded to float): the approximation error is 4.7e-9, far below float's 6e-8.

#if defined(SMAX_CPU_SIMD_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_EXP_INL_H_
#undef SMAX_CPU_SIMD_EXP_INL_H_
#else
#define SMAX_CPU_SIMD_EXP_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below this, exp(z) < FLT_MIN: the result is flushed to 0.
inline constexpr float kExpCutoff = -87.33654f;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpFlush(D d, V z, V z_lo) {
  const hn::RebindToSigned<D> di;
  // Clamping keeps n within [-127, 128], so n + 127 fits the exponent field; the
  // lanes below the cutoff are zeroed at the end anyway.
  const V zc = hn::Min(hn::Max(z, hn::Set(d, -88.0f)), hn::Set(d, 88.0f));
  const V n = hn::Round(hn::Mul(zc, hn::Set(d, 1.44269502162933349609375f)));  // log2(e)
  V r = hn::NegMulAdd(n, hn::Set(d, 0x1.62E4p-1f), zc);                      // ln2_hi
  r = hn::NegMulAdd(n, hn::Set(d, 0x1.7F7D1Cp-20f), r);                      // ln2_lo
  r = hn::Add(r, z_lo);

  V p = hn::Set(d, 0x1.6a1a72p-10f);
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.123fc6p-7f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.555916p-5f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.55548ap-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.fffffcp-2f));
  const V q = hn::MulAdd(p, hn::Mul(r, r), r);  // exp(r) - 1

  const auto biased = hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127));
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(biased));  // 2^n
  const V y = hn::MulAdd(q, scale, scale);
  return hn::IfThenZeroElse(hn::Lt(z, hn::Set(d, kExpCutoff)), y);
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_EXP_INL_H_
