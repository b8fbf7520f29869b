// The f32 row kernels of f32_rows.hpp, compiled for every target Highway offers
// (foreach_target.h re-includes this file once per target) and dispatched at run
// time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd/f32_rows.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#ifndef SMAX_CPU_SIMD_F32_ROWS_ONCE
#define SMAX_CPU_SIMD_F32_ROWS_ONCE
namespace smax::cpu::simd::detail {

// 1/T as a double-float, and the high part split into two 12-bit halves for the
// exact product on targets without FMA (Dekker).
struct InvT {
  float hi = 1;
  float lo = 0;
  float hi_a = 1;  // hi with its low 12 significand bits cleared
  float hi_b = 0;  // hi - hi_a
};

inline float clear_low_12_bits(float v) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xFFFFF000u);
}

inline InvT make_inv_t(double inv_t) {
  InvT r;
  r.hi = static_cast<float>(inv_t);
  r.lo = static_cast<float>(inv_t - static_cast<double>(r.hi));
  r.hi_a = clear_low_12_bits(r.hi);
  r.hi_b = r.hi - r.hi_a;
  return r;
}

}  // namespace smax::cpu::simd::detail
#endif  // SMAX_CPU_SIMD_F32_ROWS_ONCE

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd/f32_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "cpu/simd/exp-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The exact error of the float product p = a * b.
HWY_INLINE VF ProductError(DF d, VF a, VF b, VF b_hi, VF b_lo, VF p) {
#if HWY_NATIVE_FMA
  (void)d;
  (void)b_hi;
  (void)b_lo;
  return hn::MulSub(a, b, p);
#else
  (void)b;
  const hn::RebindToUnsigned<DF> du;
  const VF a_hi = hn::BitCast(d, hn::And(hn::BitCast(du, a), hn::Set(du, 0xFFFFF000u)));
  const VF a_lo = hn::Sub(a, a_hi);
  VF e = hn::Sub(hn::Mul(a_hi, b_hi), p);
  e = hn::Add(e, hn::Mul(a_hi, b_lo));
  e = hn::Add(e, hn::Mul(a_lo, b_hi));
  return hn::Add(e, hn::Mul(a_lo, b_lo));
#endif
}

// The constants of one pass: -m and 1/T as a double-float.
struct ArgConsts {
  VF neg_m, inv_hi, inv_lo, inv_hi_a, inv_hi_b;
  ArgConsts(DF d, float m, const detail::InvT& inv)
      : neg_m(hn::Set(d, -m)),
        inv_hi(hn::Set(d, inv.hi)),
        inv_lo(hn::Set(d, inv.lo)),
        inv_hi_a(hn::Set(d, inv.hi_a)),
        inv_hi_b(hn::Set(d, inv.hi_b)) {}
};

// z + z_lo = (x - m) * (1/T) to about 2^-45 relative: s = x - m with its exact
// error e (TwoSum), then s * inv_hi with its exact error, plus s * inv_lo + e * inv_hi.
// z_lo is zeroed where it is not a small finite correction (x = -inf, or z far
// outside the exp domain), so it never turns a result into NaN.
template <bool kUnitT>
HWY_INLINE void Argument(DF d, const ArgConsts& c, VF x, VF& z, VF& z_lo) {
  const VF s = hn::Add(x, c.neg_m);
  const VF bb = hn::Sub(s, x);
  const VF e = hn::Add(hn::Sub(x, hn::Sub(s, bb)), hn::Sub(c.neg_m, bb));
  VF lo;
  if constexpr (kUnitT) {
    z = s;
    lo = e;
  } else {
    z = hn::Mul(s, c.inv_hi);
    lo = hn::Add(ProductError(d, s, c.inv_hi, c.inv_hi_a, c.inv_hi_b, z), hn::Mul(e, c.inv_hi));
    lo = hn::MulAdd(s, c.inv_lo, lo);
  }
  z_lo = hn::IfThenElseZero(hn::Lt(hn::Abs(lo), hn::Set(d, 1.0f)), lo);
}

template <bool kUnitT>
HWY_INLINE VF ExpOf(DF d, const ArgConsts& c, VF x) {
  VF z, z_lo;
  Argument<kUnitT>(d, c, x, z, z_lo);
  return ExpFlush(d, z, z_lo);
}

float RMax(const float* x, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF m0 = neg_inf, m1 = neg_inf, m2 = neg_inf, m3 = neg_inf;
  auto nan = hn::IsNaN(neg_inf);  // all false
  auto take = [&](VF& m, VF v) {
    nan = hn::Or(nan, hn::IsNaN(v));
    m = hn::Max(m, v);
  };
  Walk<4>(
      d, n, false,
      [&](std::size_t i) {
        take(m0, hn::LoadU(d, x + i));
        take(m1, hn::LoadU(d, x + i + N));
        take(m2, hn::LoadU(d, x + i + 2 * N));
        take(m3, hn::LoadU(d, x + i + 3 * N));
      },
      [&](std::size_t i) { take(m0, hn::LoadU(d, x + i)); },
      [&](std::size_t i, std::size_t count) {
        take(m1, LoadTail(d, x + i, count, hn::Set(d, -std::numeric_limits<float>::infinity())));
      });
  if (!hn::AllFalse(d, nan)) return std::numeric_limits<float>::quiet_NaN();
  const VF m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// Accumulates the float lanes of v into double lanes.
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
HWY_INLINE void AddWide(DD dd, hn::Vec<DD>& lo, hn::Vec<DD>& /*hi*/, VF v) {
  lo = hn::Add(lo, hn::PromoteTo(dd, v));
}
#else
using DD = hn::Rebind<double, hn::Half<DF>>;
HWY_INLINE void AddWide(DD dd, hn::Vec<DD>& lo, hn::Vec<DD>& hi, VF v) {
  const hn::Half<DF> dh;
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
}
#endif

template <bool kUnitT>
double RSumExpT(const float* x, std::size_t n, float m, const detail::InvT& inv, bool backward) {
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ArgConsts c(d, m, inv);
  hn::Vec<DD> a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  Walk<2>(
      d, n, backward,
      [&](std::size_t i) {
        const VF e0 = ExpOf<kUnitT>(d, c, hn::LoadU(d, x + i));
        const VF e1 = ExpOf<kUnitT>(d, c, hn::LoadU(d, x + i + N));
        AddWide(dd, a0, a1, e0);
        AddWide(dd, a2, a3, e1);
      },
      [&](std::size_t i) { AddWide(dd, a0, a1, ExpOf<kUnitT>(d, c, hn::LoadU(d, x + i))); },
      [&](std::size_t i, std::size_t count) {
        // -inf lanes give exp = 0 exactly.
        AddWide(dd, a2, a3, ExpOf<kUnitT>(d, c, LoadTail(d, x + i, count, hn::Set(d, -std::numeric_limits<float>::infinity()))));
      });
  const hn::Vec<DD> sum = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
  return hn::GetLane(hn::SumOfLanes(dd, sum));
}

double RSumExp(const float* x, std::size_t n, float m, const detail::InvT& inv, bool unit_t, bool backward) {
  return unit_t ? RSumExpT<true>(x, n, m, inv, backward) : RSumExpT<false>(x, n, m, inv, backward);
}

// y = f(x) over [0, n), one vector at a time, forward or backward.
template <class F>
HWY_INLINE void Map(DF d, const float* x, float* y, std::size_t n, bool backward, F&& f) {
  Walk<1>(
      d, n, backward, [&](std::size_t i) { hn::StoreU(f(hn::LoadU(d, x + i)), d, y + i); },
      [&](std::size_t i) { hn::StoreU(f(hn::LoadU(d, x + i)), d, y + i); },
      [&](std::size_t i, std::size_t count) { StoreTail(d, f(LoadTail(d, x + i, count, hn::Zero(d))), y + i, count); });
}

template <bool kUnitT>
void SoftmaxNormalizeT(const float* x, float* y, std::size_t n, float m, const detail::InvT& inv, float scale,
                       bool backward) {
  const DF d;
  const ArgConsts c(d, m, inv);
  const VF vscale = hn::Set(d, scale);
  Map(d, x, y, n, backward, [&](VF v) { return hn::Mul(ExpOf<kUnitT>(d, c, v), vscale); });
}

void SoftmaxNormalize(const float* x, float* y, std::size_t n, float m, const detail::InvT& inv, bool unit_t,
                      float scale, bool backward) {
  if (unit_t) {
    SoftmaxNormalizeT<true>(x, y, n, m, inv, scale, backward);
  } else {
    SoftmaxNormalizeT<false>(x, y, n, m, inv, scale, backward);
  }
}

template <bool kUnitT>
void LogSoftmaxNormalizeT(const float* x, float* y, std::size_t n, float m, const detail::InvT& inv, float log_d,
                          bool backward) {
  const DF d;
  const ArgConsts c(d, m, inv);
  const VF vlog_d = hn::Set(d, log_d);
  Map(d, x, y, n, backward, [&](VF v) {
    VF z, z_lo;
    Argument<kUnitT>(d, c, v, z, z_lo);
    return hn::Sub(hn::Add(z, z_lo), vlog_d);
  });
}

void LogSoftmaxNormalize(const float* x, float* y, std::size_t n, float m, const detail::InvT& inv, bool unit_t,
                         float log_d, bool backward) {
  if (unit_t) {
    LogSoftmaxNormalizeT<true>(x, y, n, m, inv, log_d, backward);
  } else {
    LogSoftmaxNormalizeT<false>(x, y, n, m, inv, log_d, backward);
  }
}

void ExpArray(const float* z, const float* z_lo, float* y, std::size_t n) {
  const DF d;
  Walk<1>(
      d, n, false,
      [&](std::size_t i) { hn::StoreU(ExpFlush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i) { hn::StoreU(ExpFlush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i, std::size_t count) {
        StoreTail(d, ExpFlush(d, LoadTail(d, z + i, count, hn::Zero(d)), LoadTail(d, z_lo + i, count, hn::Zero(d))), y + i,
                  count);
      });
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::cpu::simd {

HWY_EXPORT(RMax);
HWY_EXPORT(RSumExp);
HWY_EXPORT(SoftmaxNormalize);
HWY_EXPORT(LogSoftmaxNormalize);
HWY_EXPORT(ExpArray);

float f32_rmax(const float* x, std::size_t n) { return HWY_DYNAMIC_DISPATCH(RMax)(x, n); }

double f32_rsum_exp_minus_max(const float* x, std::size_t n, float m, double inv_t, bool backward) {
  return HWY_DYNAMIC_DISPATCH(RSumExp)(x, n, m, detail::make_inv_t(inv_t), inv_t == 1.0, backward);
}

void f32_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float scale,
                           bool backward) {
  HWY_DYNAMIC_DISPATCH(SoftmaxNormalize)(x, y, n, m, detail::make_inv_t(inv_t), inv_t == 1.0, scale, backward);
}

void f32_log_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float log_d,
                               bool backward) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxNormalize)(x, y, n, m, detail::make_inv_t(inv_t), inv_t == 1.0, log_d, backward);
}

void f32_exp_flush(const float* z, const float* z_lo, float* y, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ExpArray)(z, z_lo, y, n);
}

}  // namespace smax::cpu::simd
#endif  // HWY_ONCE
