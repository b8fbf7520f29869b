// The f64 row kernels of f64_rows.hpp, compiled for every target Highway offers
// (foreach_target.h re-includes this file once per target) and dispatched at run
// time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd/f64_rows.hpp"

#include <cstdint>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd/f64_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "cpu/simd/argument-inl.h"
#include "cpu/simd/exp_f64-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;

// -m and 1/T in every lane.
struct ArgConsts {
  VD neg_m;
  InverseTemperatureLanes<DD> t;
  ArgConsts(DD d, double m, const InverseTemperature& inv) : neg_m(hn::Set(d, -m)), t(d, inv) {}
};

// z + z_lo = (x - m) * inv_t to about 2^-100 relative (argument-inl.h). Without z_lo,
// the roundings of x - m and of the product would put up to 2 * 2^-53 * |z| of
// relative error into exp(z): 1.6e-13 at z = -700. z_lo is NaN or huge only where z
// is -inf or below -2^52 (x = -inf, or x - m overflowing): the exp flushes those
// lanes to 0 whatever z_lo holds.
template <bool kUnitT>
HWY_INLINE void Argument(DD d, const ArgConsts& c, VD x, VD& z, VD& z_lo) {
  ScaledDifference<kUnitT, /*kForExp=*/true>(d, c.t, x, c.neg_m, z, z_lo);
}

// z + z_lo for log_softmax, with z_lo zeroed where it is no small correction (so that
// -inf does not become NaN).
template <bool kUnitT>
HWY_INLINE VD LogArgument(DD d, const ArgConsts& c, VD x) {
  VD z, z_lo;
  ScaledDifference<kUnitT>(d, c.t, x, c.neg_m, z, z_lo);
  return hn::Add(z, z_lo);
}

template <bool kUnitT>
HWY_INLINE VD ExpOf(DD d, const ArgConsts& c, VD x) {
  VD z, z_lo;
  Argument<kUnitT>(d, c, x, z, z_lo);
  return ExpF64Flush(d, z, z_lo);
}

double RMax(const double* x, std::size_t n) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  const VD neg_inf = hn::Set(d, -std::numeric_limits<double>::infinity());
  VD m0 = neg_inf, m1 = neg_inf, m2 = neg_inf, m3 = neg_inf;
  auto nan = hn::IsNaN(neg_inf);  // all false
  // x86's max drops a NaN depending on the operand order, so NaN is tracked apart.
  auto take = [&](VD& m, VD v) {
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
      [&](std::size_t i, std::size_t count) { take(m1, LoadTail(d, x + i, count, neg_inf)); });
  if (!hn::AllFalse(d, nan)) return std::numeric_limits<double>::quiet_NaN();
  const VD m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// A per-lane compensated sum of terms >= 0 (Neumaier): `sum` plus the exact rounding
// errors of its additions in `correction`. With both operands >= 0, the larger minus
// the rounded sum, plus the smaller, is that error exactly (Fast2Sum after ordering
// the two by Max and Min), with no branch.
struct LaneSum {
  VD sum, correction;
  explicit LaneSum(DD d) : sum(hn::Zero(d)), correction(hn::Zero(d)) {}
  HWY_INLINE void Add(VD v) {
    const VD t = hn::Add(sum, v);
    correction = hn::Add(correction, hn::Add(hn::Sub(hn::Max(sum, v), t), hn::Min(sum, v)));
    sum = t;
  }
};

// Adds the lanes of `lanes` (one per-lane compensated sum) into `total`: each lane's
// sum, then the corrections (tiny against the sums, so a plain sum of them is exact
// enough).
HWY_INLINE void AddLanes(DD d, const LaneSum& lanes, ::smax::detail::ExactSum& total) {
  HWY_ALIGN double sums[kMaxVectorBytes / sizeof(double)];
  hn::Store(lanes.sum, d, sums);
  for (std::size_t i = 0; i < hn::Lanes(d); ++i) total.add(sums[i]);
  total.add(hn::GetLane(hn::SumOfLanes(d, lanes.correction)));
}

// The sum of exp((x[i] - m) * inv_t) into `total`; with kStore, each term also goes
// to e[i].
template <bool kUnitT, bool kStore>
void AddSumExpT(const double* x, double* e, std::size_t n, double m, const InverseTemperature& inv, bool backward,
                ::smax::detail::ExactSum& total) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  const ArgConsts c(d, m, inv);
  LaneSum a0(d), a1(d);
  auto term = [&](std::size_t i) {
    const VD v = ExpOf<kUnitT>(d, c, hn::LoadU(d, x + i));
    if constexpr (kStore) hn::StoreU(v, d, e + i);
    return v;
  };
  Walk<2>(
      d, n, backward,
      [&](std::size_t i) {
        a0.Add(term(i));
        a1.Add(term(i + N));
      },
      [&](std::size_t i) { a0.Add(term(i)); },
      [&](std::size_t i, std::size_t count) {
        // -inf lanes give exp = 0 exactly.
        const VD v = ExpOf<kUnitT>(d, c, LoadTail(d, x + i, count, hn::Set(d, -std::numeric_limits<double>::infinity())));
        if constexpr (kStore) StoreTail(d, v, e + i, count);
        a1.Add(v);
      });
  a0.Add(a1.sum);
  a0.correction = hn::Add(a0.correction, a1.correction);
  AddLanes(d, a0, total);
}

void AddSumExp(const double* x, std::size_t n, double m, const InverseTemperature& inv, bool backward,
               ::smax::detail::ExactSum* total) {
  if (inv.value == 1.0) {
    AddSumExpT<true, false>(x, nullptr, n, m, inv, backward, *total);
  } else {
    AddSumExpT<false, false>(x, nullptr, n, m, inv, backward, *total);
  }
}

void AddStoreExp(const double* x, double* e, std::size_t n, double m, const InverseTemperature& inv,
                 ::smax::detail::ExactSum* total) {
  if (inv.value == 1.0) {
    AddSumExpT<true, true>(x, e, n, m, inv, false, *total);
  } else {
    AddSumExpT<false, true>(x, e, n, m, inv, false, *total);
  }
}

// y = f(x) over [0, n), one vector at a time, forward or backward.
template <class F>
HWY_INLINE void Map(DD d, const double* x, double* y, std::size_t n, bool backward, F&& f) {
  Walk<1>(
      d, n, backward, [&](std::size_t i) { hn::StoreU(f(hn::LoadU(d, x + i)), d, y + i); },
      [&](std::size_t i) { hn::StoreU(f(hn::LoadU(d, x + i)), d, y + i); },
      [&](std::size_t i, std::size_t count) { StoreTail(d, f(LoadTail(d, x + i, count, hn::Zero(d))), y + i, count); });
}

void VScale(const double* e, double* y, std::size_t n, double scale) {
  const DD d;
  const VD vscale = hn::Set(d, scale);
  Map(d, e, y, n, false, [&](VD v) { return hn::Mul(v, vscale); });
}

template <bool kUnitT>
void SoftmaxNormalizeT(const double* x, double* y, std::size_t n, double m, const InverseTemperature& inv, double scale,
                       bool backward) {
  const DD d;
  const ArgConsts c(d, m, inv);
  const VD vscale = hn::Set(d, scale);
  Map(d, x, y, n, backward, [&](VD v) { return hn::Mul(ExpOf<kUnitT>(d, c, v), vscale); });
}

void SoftmaxNormalize(const double* x, double* y, std::size_t n, double m, const InverseTemperature& inv, double scale,
                      bool backward) {
  if (inv.value == 1.0) {
    SoftmaxNormalizeT<true>(x, y, n, m, inv, scale, backward);
  } else {
    SoftmaxNormalizeT<false>(x, y, n, m, inv, scale, backward);
  }
}

template <bool kUnitT>
void LogSoftmaxNormalizeT(const double* x, double* y, std::size_t n, double m, const InverseTemperature& inv,
                          double log_d, bool backward) {
  const DD d;
  const ArgConsts c(d, m, inv);
  const VD vlog_d = hn::Set(d, log_d);
  Map(d, x, y, n, backward, [&](VD v) { return hn::Sub(LogArgument<kUnitT>(d, c, v), vlog_d); });
}

void LogSoftmaxNormalize(const double* x, double* y, std::size_t n, double m, const InverseTemperature& inv,
                         double log_d, bool backward) {
  if (inv.value == 1.0) {
    LogSoftmaxNormalizeT<true>(x, y, n, m, inv, log_d, backward);
  } else {
    LogSoftmaxNormalizeT<false>(x, y, n, m, inv, log_d, backward);
  }
}

void ExpArray(const double* z, const double* z_lo, double* y, std::size_t n) {
  const DD d;
  Walk<1>(
      d, n, false,
      [&](std::size_t i) { hn::StoreU(ExpF64Flush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i) { hn::StoreU(ExpF64Flush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i, std::size_t count) {
        StoreTail(d, ExpF64Flush(d, LoadTail(d, z + i, count, hn::Zero(d)), LoadTail(d, z_lo + i, count, hn::Zero(d))),
                  y + i, count);
      });
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::cpu::simd {

HWY_EXPORT(RMax);
HWY_EXPORT(AddSumExp);
HWY_EXPORT(AddStoreExp);
HWY_EXPORT(VScale);
HWY_EXPORT(SoftmaxNormalize);
HWY_EXPORT(LogSoftmaxNormalize);
HWY_EXPORT(ExpArray);

double f64_rmax(const double* x, std::size_t n) { return HWY_DYNAMIC_DISPATCH(RMax)(x, n); }

void f64_add_sum_exp_minus_max(const double* x, std::size_t n, double m, double inv_t, bool backward,
                               ::smax::detail::ExactSum& d) {
  HWY_DYNAMIC_DISPATCH(AddSumExp)(x, n, m, InverseTemperature::of(inv_t), backward, &d);
}

void f64_add_store_exp_minus_max(const double* x, double* e, std::size_t n, double m, double inv_t,
                                 ::smax::detail::ExactSum& d) {
  HWY_DYNAMIC_DISPATCH(AddStoreExp)(x, e, n, m, InverseTemperature::of(inv_t), &d);
}

void f64_vscale(const double* e, double* y, std::size_t n, double scale) {
  HWY_DYNAMIC_DISPATCH(VScale)(e, y, n, scale);
}

void f64_softmax_normalize(const double* x, double* y, std::size_t n, double m, double inv_t, double scale,
                           bool backward) {
  HWY_DYNAMIC_DISPATCH(SoftmaxNormalize)(x, y, n, m, InverseTemperature::of(inv_t), scale, backward);
}

void f64_log_softmax_normalize(const double* x, double* y, std::size_t n, double m, double inv_t, double log_d,
                               bool backward) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxNormalize)(x, y, n, m, InverseTemperature::of(inv_t), log_d, backward);
}

void f64_exp_flush(const double* z, const double* z_lo, double* y, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ExpArray)(z, z_lo, y, n);
}

}  // namespace smax::cpu::simd
#endif  // HWY_ONCE
