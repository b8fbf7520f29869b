// A branch-free f64 exp for the softmax domain, written against Highway's portable
// ops and compiled once per target (the -inl.h convention: this header is included
// again for every target by foreach_target.h, so its guard toggles).
//
// exp(z + z_lo) for z <= 709, where z_lo is a small low-order part of the argument
// (the rounding error of computing z in double; 0 if there is none):
//   n = round(z * log2(e))                         (by adding 1.5 * 2^52: no Round
//                                                   or float-to-int conversion needed)
//   r = (z - n * ln2_hi) + (z_lo - n * ln2_lo)     (two-constant Cody-Waite)
//   exp(r) = 1 + r + r^2 * p(r), p of degree 9     (a degree-11 polynomial, summed
//                                                   as head + tail, rounded once)
//   exp(z) = 2^n * exp(r), 2^n built from the exponent bits of n + 1023.
// Results below the smallest normal double (z < kExpF64Cutoff, about -708.396) are 0
// on purpose: no subnormal results, and z = -inf (or any z_lo, even NaN, with such a
// z) gives exactly 0. tests/unit/simd_f64_test.cpp measures the error against long
// double expl on every target (under 1 ulp on [-745, 0]).
//
// ln2_hi has 38 significant bits, so n * ln2_hi is exact for |n| <= 1024 and
// z - n * ln2_hi is exact (Sterbenz) on targets without FMA too; ln2_hi + ln2_lo is
// ln 2 to 2e-31, far below what a double argument can resolve.
// The coefficients of p were fitted here (scripts/fit_exp_f64.py: iteratively
// reweighted least squares for the minimax relative error of 1 + r + r^2 p(r) on
// [-0.3466, 0.3466], i.e. ln2/2 with a margin for the rounding of n, in 60-digit
// arithmetic, then rounded to double): the approximation error is 1.1e-17 with the
// rounded coefficients, a tenth of a double ulp.

#if defined(SMAX_CPU_SIMD_EXP_F64_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_EXP_F64_INL_H_
#undef SMAX_CPU_SIMD_EXP_F64_INL_H_
#else
#define SMAX_CPU_SIMD_EXP_F64_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The smallest double z with exp(z) >= DBL_MIN (ln(2^-1022) rounded up); below it
// the result is flushed to 0.
inline constexpr double kExpF64Cutoff = -0x1.6232bdd7abcd2p+9;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpF64Flush(D d, V z, V z_lo) {
  const hn::RebindToUnsigned<D> du;
  // Clamping keeps n within [-1023, 1023], so n + 1023 fits the exponent field
  // (n = -1023 gives 2^n = 0); the lanes below the cutoff are zeroed at the end anyway.
  const V zc = hn::Min(hn::Max(z, hn::Set(d, -709.0)), hn::Set(d, 709.0));
  // Adding 1.5 * 2^52 rounds z * log2(e) to an integer (the spacing of doubles there
  // is 1) and leaves that integer in the low bits of the sum; the extra 1023 is the
  // exponent bias, so those bits are n + 1023 directly.
  const V shifter = hn::Set(d, 0x1.8p52 + 1023.0);
  const V k = hn::MulAdd(zc, hn::Set(d, 0x1.71547652b82fep+0), shifter);  // log2(e)
  const V n = hn::Sub(k, shifter);
  const V r_hi = hn::NegMulAdd(n, hn::Set(d, 0x1.62e42fefa3800p-1), zc);  // ln2_hi: exact
  const V t = hn::NegMulAdd(n, hn::Set(d, 0x1.ef35793c76730p-45), z_lo);   // ln2_lo
  const V r = hn::Add(r_hi, t);

  V p = hn::Set(d, 0x1.ad7f71389e84ep-26);
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.28ad732fc117ep-22));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.71df25516f2f0p-19));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.a0199a0bf0ec9p-16));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.a01a012a57af1p-13));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.6c16c1842a428p-10));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.1111111127be7p-7));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.555555555087bp-5));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.55555555554fap-3));
  p = hn::MulAdd(p, r, hn::Set(d, 0x1.000000000000ap-1));

  // exp(r) = 1 + r + r^2 p(r) as head + tail with one rounding at the end: rounding
  // r, 1 + r or exp(r) - 1 on the way would each cost up to a quarter ulp where
  // exp(r) < 1. head = 1 + r and the errors of both sums are exact (Fast2Sum: |1| > |r|,
  // and |r_hi| > |t| unless r is so small that its rounding does not matter).
  const V one = hn::Set(d, 1.0);
  const V head = hn::Add(one, r);
  const V r_err = hn::Sub(t, hn::Sub(r, r_hi));
  const V head_err = hn::Add(hn::Sub(one, head), r);
  const V tail = hn::MulAdd(p, hn::Mul(r, r), hn::Add(head_err, r_err));

  // The low 12 bits of k's representation are n + 1023 (the shifter's own low bits
  // there are 0); shifting them into the exponent field gives 2^n, and multiplying by
  // a power of 2 is exact.
  const V scale = hn::BitCast(d, hn::ShiftLeft<52>(hn::BitCast(du, k)));
  const V y = hn::Mul(hn::Add(head, tail), scale);
  return hn::IfThenZeroElse(hn::Lt(z, hn::Set(d, kExpF64Cutoff)), y);
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_EXP_F64_INL_H_
