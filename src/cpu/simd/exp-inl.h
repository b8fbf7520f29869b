// A branch-free f32 exp for the softmax domain, written against Highway's portable
// ops and compiled once per target (the -inl.h convention: this header is included
// again for every target by foreach_target.h, so its guard toggles).
//
// exp(z + z_lo) for z <= 0 (softmax's z = (x - max) / T), where z_lo is a small
// low-order part of the argument (the rounding error of computing z in float; 0 if
// there is none):
//   n = round(z * log2(e))
//   r = z - n * ln2_hi - n * ln2_lo + z_lo        (two-constant Cody-Waite)
//   exp(r) = 1 + r + r^2 * p(r), p of degree 4    (a degree-6 polynomial)
//   exp(z) = 2^n * exp(r), 2^n built from the exponent bits of n + 127.
// n is rounded by adding 1.5 * 2^23 (the sum's last bit is worth 1), which also
// leaves n in the low bits of the sum: no float-to-int conversion (whose overflow
// fix-up costs several instructions on x86) is needed.
// Results below the smallest normal float (z < kExpCutoff, about -87.3365) are 0 on
// purpose: no subnormal results, and z = -inf (or any z_lo, even NaN, with such a z)
// gives exactly 0. On AVX-512 one zero-masked vscalefps multiplies by 2^n and flushes
// (ScalefWhereNotBelow): no clamp, no exponent bits, 4 operations a vector fewer; and
// there the polynomial gives way to a table of 2^(j / 32) and a cubic (the table
// forms below: the same count of operations on a shorter chain).
// Error <= 1.01 ulp on [-87.3, 0], 1.008 in the table form on AVX-512
// (tests/unit/simd_exp_exhaustive_test.cpp checks every float there against double
// std::exp on every target).
//
// ln2_hi has 17 significant bits, so n * ln2_hi is exact for |n| <= 127 and
// z - n * ln2_hi is exact (Sterbenz) on targets without FMA too.
// The coefficients of p were fitted here (iteratively reweighted least squares for
// the minimax relative error on [-0.35, 0.35] with the first two terms fixed at 1,
// then rounded to float): the approximation error is 4.7e-9, far below float's 6e-8.

#ifndef SMAX_CPU_SIMD_EXP_ONCE
#define SMAX_CPU_SIMD_EXP_ONCE
// The first part, once per translation unit: constants of the table forms.
namespace smax::cpu::simd {

// ln2 = kRowLn2Hi + kRowLn2Lo + 1.6e-12; kRowLn2Hi has 9 significant bits, so that
// its products with the reductions' multiples of ln2 (or ln2 / 32) stay exact.
inline constexpr float kRowLn2Hi = 0x1.63p-1f;
inline constexpr float kRowLn2Lo = -0x1.bd0106p-13f;
// ln2 rounded to float (1.9e-9 above it), for the coarse forms (ExpFlushCoarse,
// exp_minus_max-inl.h's).
inline constexpr float kLn2Float = 0x1.62e430p-1f;

// 2^(i / 32) for i = -32 .. 31, each correctly rounded to float (computed with 60
// decimal digits): the table of the AVX-512 exps. ExpFlush looks up 2^(j / 32), the 32
// entries from index 32; a row of ExpMinusMaxTable with k = 32a + b (0 <= b < 32)
// 2^((j - b) / 32), those from index 32 - b.
alignas(64) inline constexpr float kPow2Over32[64] = {
    0x1p-1f,       0x1.059b0ep-1f, 0x1.0b5586p-1f, 0x1.11301ep-1f, 0x1.172b84p-1f, 0x1.1d4874p-1f, 0x1.2387a6p-1f,
    0x1.29e9ep-1f, 0x1.306fep-1f,  0x1.371a74p-1f, 0x1.3dea64p-1f, 0x1.44e086p-1f, 0x1.4bfdaep-1f, 0x1.5342b6p-1f,
    0x1.5ab07ep-1f, 0x1.6247ecp-1f, 0x1.6a09e6p-1f, 0x1.71f75ep-1f, 0x1.7a1148p-1f, 0x1.82589ap-1f, 0x1.8ace54p-1f,
    0x1.93737cp-1f, 0x1.9c4918p-1f, 0x1.a5503cp-1f, 0x1.ae89fap-1f, 0x1.b7f77p-1f,  0x1.c199bep-1f, 0x1.cb720ep-1f,
    0x1.d5818ep-1f, 0x1.dfc974p-1f, 0x1.ea4afap-1f, 0x1.f50766p-1f, 0x1p+0f,       0x1.059b0ep+0f, 0x1.0b5586p+0f,
    0x1.11301ep+0f, 0x1.172b84p+0f, 0x1.1d4874p+0f, 0x1.2387a6p+0f, 0x1.29e9ep+0f, 0x1.306fep+0f,  0x1.371a74p+0f,
    0x1.3dea64p+0f, 0x1.44e086p+0f, 0x1.4bfdaep+0f, 0x1.5342b6p+0f, 0x1.5ab07ep+0f, 0x1.6247ecp+0f, 0x1.6a09e6p+0f,
    0x1.71f75ep+0f, 0x1.7a1148p+0f, 0x1.82589ap+0f, 0x1.8ace54p+0f, 0x1.93737cp+0f, 0x1.9c4918p+0f, 0x1.a5503cp+0f,
    0x1.ae89fap+0f, 0x1.b7f77p+0f,  0x1.c199bep+0f, 0x1.cb720ep+0f, 0x1.d5818ep+0f, 0x1.dfc974p+0f, 0x1.ea4afap+0f,
    0x1.f50766p+0f};

// 1.5 * 2^18: adding it rounds a float of magnitude below 2^17 to a multiple of 1/32;
// the sum's low bits hold 32 times that multiple, whose last five bits index a table.
inline constexpr float kRoundingShift32 = 393216.0f;

}  // namespace smax::cpu::simd
#endif  // SMAX_CPU_SIMD_EXP_ONCE

#if defined(SMAX_CPU_SIMD_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_EXP_INL_H_
#undef SMAX_CPU_SIMD_EXP_INL_H_
#else
#define SMAX_CPU_SIMD_EXP_INL_H_
#endif

#include <type_traits>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below this, exp(z) < FLT_MIN: the result is flushed to 0.
inline constexpr float kExpCutoff = -87.33654f;

// 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer.
inline constexpr float kRoundingShift = 12582912.0f;

// n = round(z * log2(e)) as a float, and 2^(n + bias_adjust) built from the bits of
// the rounding sum: its low bits hold n in two's complement, so adding the exponent
// bias and shifting the sum left by 23 leaves exactly the exponent field.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void ScaleOf(D d, V zc, V& n, hn::Vec<hn::RebindToUnsigned<D>>& shifted) {
  const hn::RebindToUnsigned<D> du;
  const V t = hn::MulAdd(zc, hn::Set(d, 1.44269502162933349609375f), hn::Set(d, kRoundingShift));  // log2(e)
  n = hn::Sub(t, hn::Set(d, kRoundingShift));
  shifted = hn::BitCast(du, t);
}

// The coefficients of p (the fitted ones), the highest degree first.
inline constexpr float kExpPolyTail[5] = {0x1.6a1a72p-10f, 0x1.123fc6p-7f, 0x1.555916p-5f, 0x1.55548ap-3f,
                                          0x1.fffffcp-2f};

// p(r) with exp(r) = 1 + r + r^2 p(r) for |r| <= 0.35.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpPolyTail(D d, V r) {
  V p = hn::Set(d, kExpPolyTail[0]);
  for (int i = 1; i < 5; ++i) p = hn::MulAdd(p, r, hn::Set(d, kExpPolyTail[i]));
  return p;
}

// exp(r) - 1 for |r| <= 0.35.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpM1Poly(D d, V r) {
  return hn::MulAdd(ExpPolyTail(d, r), hn::Mul(r, r), r);
}

// exp(r) itself for |r| <= 0.35: the same polynomial by Horner's rule to the end, for
// ScalefWhereNotBelow, which scales it by 2^n.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpPoly(D d, V r) {
  const V one = hn::Set(d, 1.0f);
  return hn::MulAdd(hn::MulAdd(ExpPolyTail(d, r), r, one), r, one);
}

// An argument without a low-order part: ExpFlush(d, z, NoLowPart{}) skips its add.
struct NoLowPart {};

// r = z + z_lo - n * ln2.
template <class D, class V = hn::Vec<D>, class Lo>
HWY_INLINE V Reduced(D d, V zc, Lo z_lo, V n) {
  V r = hn::NegMulAdd(n, hn::Set(d, 0x1.62E4p-1f), zc);  // ln2_hi
  r = hn::NegMulAdd(n, hn::Set(d, 0x1.7F7D1Cp-20f), r);  // ln2_lo
  if constexpr (std::is_same_v<Lo, NoLowPart>) {
    return r;
  } else {
    return hn::Add(r, z_lo);
  }
}

// exp(r) - 1 after the reduction of z + z_lo by n * ln2.
template <class D, class V = hn::Vec<D>, class Lo>
HWY_INLINE V ExpM1Reduced(D d, V zc, Lo z_lo, V n) {
  return ExpM1Poly(d, Reduced(d, zc, z_lo, n));
}

// AVX-512's vscalefps computes p * 2^n for any float n in one instruction, and with a
// zero-masking also the flush: it replaces the exponent-bit steps below (the clamp,
// the bias, the shift, the product, the blend). 512-bit float vectors on AVX-512
// targets only.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
template <class V>
inline constexpr bool kHasScalef = std::is_same_v<V, hn::Vec512<float>>;

// p * 2^n where z >= cutoff or z is NaN, 0 where z < cutoff (-inf included).
template <class V>
HWY_INLINE V ScalefWhereNotBelow(V p, V n, V z, V cutoff) {
  return V{_mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(z.raw, cutoff.raw, _CMP_NLT_UQ), p.raw, n.raw)};
}

// The table forms (AVX-512: one vpermt2ps looks up 32 entries, and vscalefps floors
// its power itself): exp(z) = 2^floor(n / 32) * 2^((n mod 32) / 32) * exp(r) with n =
// round(32 z log2(e)), |r| <= ln2 / 64, so exp(r) = 1 + r + r^2 / 2 + r^3 / 6 (its error
// r^4 / 24 < 6e-10). Against the degree-6 polynomial: as many operations, but four
// multiply-adds fewer on the chain from z to the result, which is what bounds an exp
// pass on AMD Zen 5 (one multiply-add fewer there saved 0.85 of 7.6 cycles a vector).
// The error is the entry's rounding (half an ulp) and the final one, the result lying
// in its entry's binade: 1.05 ulp by this count, the reduction's roundings scaling
// with |r| <= 0.011.

// table[t's low five bits], of the 32 in table_lo, table_hi.
template <class V>
HWY_INLINE V TableEntry(V table_lo, V table_hi, V t) {
  return V{_mm512_permutex2var_ps(table_lo.raw, _mm512_castps_si512(t.raw), table_hi.raw)};
}

// entry * exp(r), entry = TableEntry(table_lo, table_hi, t).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TableEntryTimesExp(D d, V table_lo, V table_hi, V t, V r) {
  const V entry = TableEntry(table_lo, table_hi, t);
  const V q = hn::MulAdd(hn::MulAdd(r, hn::Set(d, 1.0f / 6), hn::Set(d, 0.5f)), r, hn::Set(d, 1.0f));
  return hn::MulAdd(hn::Mul(entry, r), q, entry);
}

// entry * (1 + r + r^2 / 2): the coarse forms' (ExpFlushCoarse, DirectTableExp's
// kCoarse), one multiply-add fewer.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TableEntryTimesExpQuadratic(D d, V table_lo, V table_hi, V t, V r) {
  const V entry = TableEntry(table_lo, table_hi, t);
  const V half_r_plus_one = hn::MulAdd(r, hn::Set(d, 0.5f), hn::Set(d, 1.0f));
  return hn::MulAdd(hn::Mul(entry, r), half_r_plus_one, entry);
}
#else
template <class V>
inline constexpr bool kHasScalef = false;

template <class V>
HWY_INLINE V ScalefWhereNotBelow(V p, V, V, V) {
  return p;  // never called: kHasScalef is false
}
#endif

template <class D, class V = hn::Vec<D>, class Lo = V>
HWY_INLINE V ExpFlush(D d, V z, Lo z_lo) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kHasScalef<V>) {
    // The table form: u = n / 32 (|n| <= 4032 on the domain), u * kRowLn2Hi exact. No
    // clamp: lanes far below the cutoff (or -inf) give anything, and are zeroed.
    const V t = hn::MulAdd(z, hn::Set(d, 1.44269502162933349609375f), hn::Set(d, kRoundingShift32));  // log2(e)
    const V u = hn::Sub(t, hn::Set(d, kRoundingShift32));
    V r = hn::NegMulAdd(u, hn::Set(d, kRowLn2Lo), hn::NegMulAdd(u, hn::Set(d, kRowLn2Hi), z));
    if constexpr (!std::is_same_v<Lo, NoLowPart>) r = hn::Add(r, z_lo);
    const V e = TableEntryTimesExp(d, hn::LoadU(d, kPow2Over32 + 32), hn::LoadU(d, kPow2Over32 + 48), t, r);
    return ScalefWhereNotBelow(e, u, z, hn::Set(d, kExpCutoff));
  }
#endif
  const hn::RebindToUnsigned<D> du;
  // Clamping keeps n >= -127, so n + 127 fits the exponent field; the lanes below
  // the cutoff are zeroed at the end anyway.
  const V zc = hn::Max(z, hn::Set(d, -88.0f));
  V n;
  hn::Vec<decltype(du)> t_bits;
  ScaleOf(d, zc, n, t_bits);
  const V q = ExpM1Reduced(d, zc, z_lo, n);
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(t_bits, hn::Set(du, 127u))));  // 2^n
  const V y = hn::MulAdd(q, scale, scale);
  return hn::IfThenZeroElse(hn::Lt(z, hn::Set(d, kExpCutoff)), y);
}

// exp(z) as ExpFlush(d, z, NoLowPart{}), coarser where that saves operations: on
// AVX-512 the table form with ln2 as one float (one multiply-add instead of two) and
// exp(r) = 1 + r + r^2 / 2 (one multiply-add fewer), for results that only need about
// 2^-20 of themselves (log_softmax_backward's exps for 16-bit outputs). Its error:
// ln2's float, 1.9e-9 above ln2, times |n / 32| <= 126 makes r up to 2.4e-7 too
// large; r^3 / 6 <= 2.1e-7 (|r| <= ln2 / 64); the entry's and the result's roundings
// half an ulp each, at most 6e-8: within 5.7e-7 of exp(z), relative (every float of
// [-87.3, 0]: at most 5.58e-7 on AMD Zen 4; tests/unit/simd_exp_exhaustive_test.cpp
// checks 6e-7). Elsewhere ExpFlush itself.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpFlushCoarse(D d, V z) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kHasScalef<V>) {
    const V t = hn::MulAdd(z, hn::Set(d, 1.44269502162933349609375f), hn::Set(d, kRoundingShift32));  // log2(e)
    const V u = hn::Sub(t, hn::Set(d, kRoundingShift32));
    const V r = hn::NegMulAdd(u, hn::Set(d, kLn2Float), z);
    const V e = TableEntryTimesExpQuadratic(d, hn::LoadU(d, kPow2Over32 + 32), hn::LoadU(d, kPow2Over32 + 48), t, r);
    return ScalefWhereNotBelow(e, u, z, hn::Set(d, kExpCutoff));
  }
#endif
  return ExpFlush(d, z, NoLowPart{});
}

// (1 + q) * 2^n (t_bits from ScaleOf), keeping float's subnormals: where
// `below_normal`, built 2^64 times too large and scaled down by one final multiply, the
// only operation that sees a subnormal; 0 where `zeroed`.
template <class D, class V = hn::Vec<D>, class M = hn::Mask<D>>
HWY_INLINE V ScaleGradual(D d, V q, hn::Vec<hn::RebindToUnsigned<D>> t_bits, M below_normal, M zeroed) {
  const hn::RebindToUnsigned<D> du;
  const auto bias = hn::IfThenElse(hn::RebindMask(du, below_normal), hn::Set(du, 127u + 64u), hn::Set(du, 127u));
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(t_bits, bias)));  // 2^n, or 2^(n + 64)
  const V y = hn::IfThenZeroElse(zeroed, hn::MulAdd(q, scale, scale));
  return hn::IfThenElse(below_normal, hn::Mul(y, hn::Set(d, 0x1p-64f)), y);
}

// The steps ExpGradual and ExpTimes2Pow64 share: z clamped at -104 (below it both give
// 0), n with the bits of its rounding sum (ScaleOf), and exp(r) - 1.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpM1DownTo104(D d, V z, V z_lo, V& n, hn::Vec<hn::RebindToUnsigned<D>>& t_bits) {
  const V zc = hn::Max(z, hn::Set(d, -104.0f));
  ScaleOf(d, zc, n, t_bits);
  return ExpM1Reduced(d, zc, z_lo, n);
}

// exp(z + z_lo) like ExpFlush, but results down to the smallest subnormal float are
// kept (for bf16 outputs, whose subnormals are float's): below the normal range the
// result is built 2^64 times too large and scaled down by one final multiply, the
// only operation that sees a subnormal. Zero below exp(-104).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpGradual(D d, V z, V z_lo) {
  V n;
  hn::Vec<hn::RebindToUnsigned<D>> t_bits;
  const V q = ExpM1DownTo104(d, z, z_lo, n, t_bits);
  // (1 + q) * 2^n may be subnormal below n = -125.
  return ScaleGradual(d, q, t_bits, hn::Lt(n, hn::Set(d, -125.0f)), hn::Lt(z, hn::Set(d, -104.0f)));
}

// exp(z + z_lo) * 2^64, never subnormal: 0 below exp(-104) (where ExpGradual's
// results end too). For sums of terms that may all lie below float's normal range
// (scaled back in double, exactly).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpTimes2Pow64(D d, V z, V z_lo) {
  const hn::RebindToUnsigned<D> du;
  V n;
  hn::Vec<decltype(du)> t_bits;
  const V q = ExpM1DownTo104(d, z, z_lo, n, t_bits);
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(t_bits, hn::Set(du, 127u + 64u))));  // 2^(n + 64)
  return hn::IfThenZeroElse(hn::Lt(z, hn::Set(d, -104.0f)), hn::MulAdd(q, scale, scale));
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_EXP_INL_H_
