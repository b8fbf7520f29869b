// The kernels of gradient_rows.hpp, written once over the storage type (float, half,
// bfloat16; see cpu/simd/convert-inl.h), compiled for every target Highway offers
// (foreach_target.h re-includes this file once per target) and dispatched at run
// time with HWY_DYNAMIC_DISPATCH.
#include "training/simd/gradient_rows.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "training/rows.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "training/simd/gradient_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/exp_f64-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::training::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace cs = smax::cpu::simd::HWY_NAMESPACE;

// The backward passes run in double lanes; each double lane takes one element, loaded
// through float lanes of the same count.
using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;
using DFD = hn::Rebind<float, DD>;

template <class T>
HWY_INLINE VD LoadWide(DD dd, const T* p) {
  return hn::PromoteTo(dd, cs::LoadF32(DFD(), p));
}

// The tail's other lanes are 0.
template <class T>
HWY_INLINE VD LoadTailWide(DD dd, const T* p, std::size_t count) {
  const DFD df;
  return hn::PromoteTo(dd, cs::LoadTailF32(df, p, count, hn::Zero(df)));
}

// Whole float vectors, for the kernels that run in float lanes.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <class T>
HWY_INLINE VF LoadFloats(DF df, const T* p, std::size_t count, VF fill) {
  return count == hn::Lanes(df) ? cs::LoadF32(df, p) : cs::LoadTailF32(df, p, count, fill);
}

// double to float with IEEE rounding, as static_cast: Highway's emulated targets
// saturate infinities and overflowing values to the largest float instead.
HWY_INLINE hn::Vec<DFD> ToFloat(VD v) {
  const DFD df;
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  HWY_ALIGN double wide[kMaxLanes];
  HWY_ALIGN float narrow[kMaxLanes];
  hn::Store(v, DD(), wide);
  for (std::size_t j = 0; j < hn::Lanes(df); ++j) narrow[j] = static_cast<float>(wide[j]);
  return hn::Load(df, narrow);
#else
  return hn::DemoteTo(df, v);
#endif
}

// Rounded to float, then to T: the scalar code's Element<T>::store of a double.
template <class T>
HWY_INLINE void StoreWide(VD v, T* p) {
  cs::StoreF32(DFD(), ToFloat(v), p);
}

template <class T>
HWY_INLINE void StoreTailWide(VD v, T* p, std::size_t count) {
  cs::StoreTailF32(DFD(), ToFloat(v), p, count);
}

// Per-lane compensated sums: each addition's rounding error is exact (Knuth's
// TwoSum, branch-free) and collected in `error`.
template <class D>
struct CompensatedLanes {
  hn::Vec<D> sum;
  hn::Vec<D> error;
  explicit CompensatedLanes(D d) : sum(hn::Zero(d)), error(hn::Zero(d)) {}
  HWY_INLINE void Add(hn::Vec<D> v) {
    const hn::Vec<D> t = hn::Add(sum, v);
    const hn::Vec<D> v_part = hn::Sub(t, sum);
    const hn::Vec<D> sum_part = hn::Sub(t, v_part);
    error = hn::Add(error, hn::Add(hn::Sub(sum, sum_part), hn::Sub(v, v_part)));
    sum = t;
  }
};

// The lanes of several accumulators as one SplitSum. A non-finite plain sum is
// returned as is: the error lanes of a lane that met an infinity hold NaN.
template <class D, std::size_t kCount>
SplitSum Combine(D dd, const CompensatedLanes<D> (&lanes)[kCount]) {
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  HWY_ALIGN double sums[kCount][kMaxLanes];
  HWY_ALIGN double errors[kCount][kMaxLanes];
  const std::size_t N = hn::Lanes(dd);
  double plain = 0;
  for (std::size_t k = 0; k < kCount; ++k) {
    hn::Store(lanes[k].sum, dd, sums[k]);
    hn::Store(lanes[k].error, dd, errors[k]);
    for (std::size_t j = 0; j < N; ++j) plain += sums[k][j];
  }
  if (!std::isfinite(plain)) return SplitSum{plain, 0};
  CompensatedSum<double> total;
  for (std::size_t k = 0; k < kCount; ++k) {
    for (std::size_t j = 0; j < N; ++j) total.add(sums[k][j]);
  }
  for (std::size_t k = 0; k < kCount; ++k) {
    for (std::size_t j = 0; j < N; ++j) total.add(errors[k][j]);
  }
  return SplitSum{total.hi(), total.lo()};
}

// Four independent accumulators hide the latency of the TwoSum chain.
template <class T, class Term>
HWY_INLINE SplitSum CompensatedSumOf(std::size_t n, Term&& term) {
  const DD dd;
  const std::size_t N = hn::Lanes(dd);
  CompensatedLanes<DD> acc[4] = {CompensatedLanes<DD>(dd), CompensatedLanes<DD>(dd), CompensatedLanes<DD>(dd),
                                 CompensatedLanes<DD>(dd)};
  cs::Walk<4>(
      dd, n, false,
      [&](std::size_t i) {
        acc[0].Add(term(i, N));
        acc[1].Add(term(i + N, N));
        acc[2].Add(term(i + 2 * N, N));
        acc[3].Add(term(i + 3 * N, N));
      },
      [&](std::size_t i) { acc[0].Add(term(i, N)); },
      [&](std::size_t i, std::size_t count) { acc[1].Add(term(i, count)); });
  return Combine(dd, acc);
}

template <class T>
HWY_INLINE VD LoadAny(DD dd, const T* p, std::size_t count) {
  return count == hn::Lanes(dd) ? LoadWide(dd, p) : LoadTailWide(dd, p, count);
}

template <class T>
HWY_INLINE void StoreAny(DD dd, VD v, T* p, std::size_t count) {
  if (count == hn::Lanes(dd)) StoreWide(v, p);
  else StoreTailWide(v, p, count);
}

#if HWY_TARGET != HWY_SCALAR
// Two 16-bit values have at most 11 significant bits each, so their product is exact
// in float: the products are formed a whole float vector at a time (the 16-bit
// conversions cost more than the arithmetic), then widened, half by half, into the
// double accumulators.
template <class T>
SplitSum SumOfProducts16(const T* y, const T* dy, std::size_t n) {
  const DF df;
  const hn::Half<DF> dh;
  const DD dd;
  static_assert(sizeof(hn::Vec<hn::Rebind<double, hn::Half<DF>>>) == sizeof(VD), "one half widens to a VD");
  const std::size_t N = hn::Lanes(df);
  CompensatedLanes<DD> acc[4] = {CompensatedLanes<DD>(dd), CompensatedLanes<DD>(dd), CompensatedLanes<DD>(dd),
                                 CompensatedLanes<DD>(dd)};
  auto add = [&](std::size_t i, std::size_t count, CompensatedLanes<DD>& low, CompensatedLanes<DD>& high) {
    const VF product = hn::Mul(LoadFloats(df, y + i, count, hn::Zero(df)), LoadFloats(df, dy + i, count, hn::Zero(df)));
    low.Add(hn::PromoteTo(dd, hn::LowerHalf(dh, product)));
    high.Add(hn::PromoteTo(dd, hn::UpperHalf(dh, product)));
  };
  cs::Walk<2>(
      df, n, false,
      [&](std::size_t i) {
        add(i, N, acc[0], acc[1]);
        add(i + N, N, acc[2], acc[3]);
      },
      [&](std::size_t i) { add(i, N, acc[0], acc[1]); },
      [&](std::size_t i, std::size_t count) { add(i, count, acc[2], acc[3]); });
  return Combine(dd, acc);
}
#endif

template <class T>
SplitSum SumOfProducts(const T* y, const T* dy, std::size_t n) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (!std::is_same_v<T, float>) return SumOfProducts16(y, dy, n);
#endif
  const DD dd;
  // Products of two floats are exact in double.
  return CompensatedSumOf<T>(n, [&](std::size_t i, std::size_t count) {
    return hn::Mul(LoadAny(dd, y + i, count), LoadAny(dd, dy + i, count));
  });
}

template <class T>
SplitSum SumOf(const T* v, std::size_t n) {
  const DD dd;
  return CompensatedSumOf<T>(n, [&](std::size_t i, std::size_t count) { return LoadAny(dd, v + i, count); });
}

// y = f(a, b) elementwise over [0, n) in double lanes; a vector's loads come before
// its store, so y may be a or b.
template <class T, class F>
HWY_INLINE void MapWide(const T* a, const T* b, T* y, std::size_t n, F&& f) {
  const DD dd;
  const std::size_t N = hn::Lanes(dd);
  auto step = [&](std::size_t i, std::size_t count) {
    StoreAny(dd, f(LoadAny(dd, a + i, count), LoadAny(dd, b + i, count)), y + i, count);
  };
  cs::Walk<2>(
      dd, n, false,
      [&](std::size_t i) {
        step(i, N);
        step(i + N, N);
      },
      [&](std::size_t i) { step(i, N); }, step);
}

// 16-bit outputs, whose bar is one unit in their last place, in float lanes: s as
// the double-float hi + lo (dy - hi is exact where dy is close to s, Sterbenz), three
// float roundings before the 16-bit one. False, writing nothing, where s or 1/T do not
// fit that form (beyond float's range, or 1/T below its normal range).
template <class T>
bool SoftmaxBackwardWrite16(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t) {
  const float hi_f = static_cast<float>(s.hi);
  const float lo_f = static_cast<float>((s.hi - static_cast<double>(hi_f)) + s.lo);
  const float inv_t_f = static_cast<float>(inv_t);
  if (!std::isfinite(hi_f) || !std::isfinite(lo_f) ||
      !(inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f))) {
    return false;
  }
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF hi = hn::Set(df, hi_f);
  const VF lo = hn::Set(df, lo_f);
  const VF scale = hn::Set(df, inv_t_f);
  auto step = [&](std::size_t i, std::size_t count) {
    const VF vy = LoadFloats(df, y + i, count, hn::Zero(df));
    const VF vdy = LoadFloats(df, dy + i, count, hn::Zero(df));
    const VF v = hn::Mul(hn::Mul(vy, hn::Sub(hn::Sub(vdy, hi), lo)), scale);
    if (count == N) cs::StoreF32(df, v, dx + i);
    else cs::StoreTailF32(df, v, dx + i, count);
  };
  cs::Walk<2>(
      df, n, false,
      [&](std::size_t i) {
        step(i, N);
        step(i + N, N);
      },
      [&](std::size_t i) { step(i, N); }, step);
  return true;
}

template <class T>
void SoftmaxBackwardWrite(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t) {
  if constexpr (!std::is_same_v<T, float>) {
    if (SoftmaxBackwardWrite16(y, dy, dx, n, s, inv_t)) return;
  }
  const DD dd;
  const VD hi = hn::Set(dd, s.hi);
  const VD lo = hn::Set(dd, s.lo);
  const VD scale = hn::Set(dd, inv_t);
  // dy - hi is exact where dy is close to s (Sterbenz); lo then corrects it.
  MapWide(y, dy, dx, n, [&](VD vy, VD vdy) { return hn::Mul(hn::Mul(vy, hn::Sub(hn::Sub(vdy, hi), lo)), scale); });
}

// exp(log_y) per lane: the double exp for log-probabilities (<= 0, or -inf), std::exp
// for anything else, so that NaN and positive inputs give what the scalar code gives.
HWY_INLINE VD ExpOfLogProbability(DD dd, VD log_y) {
  const VD e = cs::ExpF64Flush(dd, log_y, hn::Zero(dd));
  if (HWY_LIKELY(hn::AllTrue(dd, hn::Le(log_y, hn::Zero(dd))))) return e;
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  HWY_ALIGN double lanes[kMaxLanes];
  hn::Store(log_y, dd, lanes);
  for (std::size_t j = 0; j < hn::Lanes(dd); ++j) lanes[j] = std::exp(lanes[j]);
  return hn::Load(dd, lanes);
}

// The scalar code's arithmetic in double lanes, for the vectors the float lanes of
// LogSoftmaxBackwardWrite cannot do exactly enough.
template <class T>
void LogSoftmaxBackwardWide(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, double inv_t) {
  const DD dd;
  const VD vsum = hn::Set(dd, sum);
  const VD scale = hn::Set(dd, inv_t);
  MapWide(log_y, dy, dx, n, [&](VD ly, VD vdy) {
    return hn::Mul(hn::NegMulAdd(ExpOfLogProbability(dd, ly), vsum, vdy), scale);
  });
}

// A double exp per element costs more than the memory it reads, so most vectors are
// done in float lanes: dx = (dy - p * S) / T with p from the float exp (1.01 ulp).
// That is within 1e-6 of dx wherever |p S| <= 2 |dx| (the exp's error, relative to
// p S, cannot then grow by more than 2 relative to dx) and p is a normal float;
// every other vector (dy and p S cancelling, log_y below -87 or not a log-probability,
// S beyond float's range) goes through the double lanes again, from memory.
template <class T>
void LogSoftmaxBackwardWrite(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, double inv_t) {
  const float sum_f = static_cast<float>(sum);
  const float inv_t_f = static_cast<float>(inv_t);
  if (!std::isfinite(sum_f) || !(inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f))) {
    LogSoftmaxBackwardWide(log_y, dy, dx, n, sum, inv_t);
    return;
  }
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF vsum = hn::Set(df, sum_f);
  const VF scale = hn::Set(df, inv_t_f);
  const VF zero = hn::Zero(df);
  const VF normal_floor = hn::Set(df, -87.0f);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const VF two = hn::Set(df, 2.0f);
  auto step = [&](std::size_t i, std::size_t count) {
    const VF ly = LoadFloats(df, log_y + i, count, zero);
    const VF vdy = LoadFloats(df, dy + i, count, zero);
    const VF ps = hn::Mul(cs::ExpFlush(df, ly, zero), vsum);
    const VF v = hn::Sub(vdy, ps);
    // NaN anywhere fails the comparisons and takes the double lanes as well.
    const auto in_domain = hn::Or(hn::And(hn::Ge(ly, normal_floor), hn::Le(ly, zero)), hn::Eq(ly, neg_inf));
    const auto exact_enough = hn::And(in_domain, hn::Le(hn::Abs(ps), hn::Mul(two, hn::Abs(v))));
    if (HWY_UNLIKELY(!hn::AllTrue(df, exact_enough))) {
      LogSoftmaxBackwardWide(log_y + i, dy + i, dx + i, count, sum, inv_t);
      return;
    }
    if (count == N) cs::StoreF32(df, hn::Mul(v, scale), dx + i);
    else cs::StoreTailF32(df, hn::Mul(v, scale), dx + i, count);
  };
  cs::Walk<2>(
      df, n, false,
      [&](std::size_t i) {
        step(i, N);
        step(i + N, N);
      },
      [&](std::size_t i) { step(i, N); }, step);
}

// Cross-entropy runs in float lanes; the loss's offsets widen into double lanes.
#if HWY_TARGET == HWY_SCALAR
using DW = hn::Rebind<double, DF>;
#else
using DW = hn::Rebind<double, hn::Half<DF>>;
#endif
using VW = hn::Vec<DW>;

// acc += w * (m - x) for every lane, in double.
HWY_INLINE void AddOffsets(VW m, VF x, VF w, VW& acc0, VW& acc1) {
  const DW dw;
#if HWY_TARGET == HWY_SCALAR
  (void)acc1;
  acc0 = hn::MulAdd(hn::PromoteTo(dw, w), hn::Sub(m, hn::PromoteTo(dw, x)), acc0);
#else
  const hn::Half<DF> dh;
  acc0 = hn::MulAdd(hn::PromoteTo(dw, hn::LowerHalf(dh, w)), hn::Sub(m, hn::PromoteTo(dw, hn::LowerHalf(dh, x))), acc0);
  acc1 = hn::MulAdd(hn::PromoteTo(dw, hn::UpperHalf(dh, w)), hn::Sub(m, hn::PromoteTo(dw, hn::UpperHalf(dh, x))), acc1);
#endif
}

template <class T>
double CrossEntropyRowT(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row,
                        bool want_offsets) {
  const DF df;
  const DW dw;
  const std::size_t N = hn::Lanes(df);
  // grad = (S * p - a) * scale = e * P - w * A, P = S / d * scale as a double-float
  // (so that its rounding does not add to the exp's), A = spread * scale.
  const double p_scale = row.coefficient_sum * row.inv_d * row.scale;
  const float p_hi_f = static_cast<float>(p_scale);
  const VF p_hi = hn::Set(df, p_hi_f);
  const VF p_lo = hn::Set(df, static_cast<float>(p_scale - static_cast<double>(p_hi_f)));
  const float a_scale_f = static_cast<float>(row.spread * row.scale);
  const VF a_scale = hn::Set(df, a_scale_f);
  // P or A beyond float's range, or P below its normal range (where its rounding is
  // no longer relative): every vector in double.
  const bool all_in_double = !std::isfinite(p_hi_f) || !std::isfinite(a_scale_f) ||
                             (p_scale != 0 && !(p_hi_f >= std::numeric_limits<float>::min()));
  const VF neg_m = hn::Set(df, -row.m);
  const VF vm = hn::Set(df, row.m);
  const VF one = hn::Set(df, 1.0f);
  const VF normal_floor = hn::Set(df, -87.0f);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const cs::InverseTemperatureLanes<DF> unit_t(df, cpu::simd::InverseTemperature::of(1.0));
  const VW m_wide = hn::Set(dw, static_cast<double>(row.m));
  VW acc0 = hn::Zero(dw), acc1 = hn::Zero(dw);

  // Exps below float's normal range would be flushed (or lose bits) while S / d *
  // scale may lift the product back into range: such a vector is done in double
  // with the scalar code's formula.
  auto in_double = [&](VF vx, VF vw) {
    constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(float);
    HWY_ALIGN float xs[kMaxLanes];
    HWY_ALIGN float ws[kMaxLanes];
    hn::Store(vx, df, xs);
    hn::Store(vw, df, ws);
    for (std::size_t j = 0; j < N; ++j) {
      const double a = row.spread * static_cast<double>(ws[j]);
      const double p = std::exp(static_cast<double>(xs[j]) - static_cast<double>(row.m)) * row.inv_d;
      xs[j] = static_cast<float>((row.coefficient_sum * p - a) * row.scale);
    }
    return hn::Load(df, xs);
  };

  auto step = [&](std::size_t i, std::size_t count) {
    // Tail lanes: x = m adds nothing to the offsets.
    const VF vx = LoadFloats(df, x + i, count, vm);
    const VF vw = weight != nullptr ? LoadFloats(df, weight + i, count, hn::Zero(df)) : one;
    if (want_offsets) AddOffsets(m_wide, vx, vw, acc0, acc1);
    if (grad == nullptr) return;
    VF z, z_lo;
    cs::ScaledDifference<true, true>(df, unit_t, vx, neg_m, z, z_lo);
    VF g;
    if (HWY_UNLIKELY(all_in_double || !hn::AllFalse(df, hn::And(hn::Lt(z, normal_floor), hn::Gt(z, neg_inf))))) {
      g = in_double(vx, vw);
    } else {
      const VF e = cs::ExpFlush(df, z, z_lo);
      g = hn::MulAdd(e, p_hi, hn::MulSub(e, p_lo, hn::Mul(vw, a_scale)));
    }
    if (count == N) cs::StoreF32(df, g, grad + i);
    else cs::StoreTailF32(df, g, grad + i, count);
  };
  cs::Walk<2>(
      df, n, false,
      [&](std::size_t i) {
        step(i, N);
        step(i + N, N);
      },
      [&](std::size_t i) { step(i, N); }, step);
  if (!want_offsets) return 0.0;
  return hn::GetLane(hn::SumOfLanes(dw, hn::Add(acc0, acc1)));
}

// Plain names per storage type, for HWY_EXPORT.
#define SMAX_GRADIENT_KERNELS(Suffix, T)                                                                          \
  SplitSum SumOfProducts##Suffix(const T* y, const T* dy, std::size_t n) { return SumOfProducts(y, dy, n); }      \
  SplitSum SumOf##Suffix(const T* v, std::size_t n) { return SumOf(v, n); }                                      \
  void SoftmaxBackwardWrite##Suffix(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t) {    \
    SoftmaxBackwardWrite(y, dy, dx, n, s, inv_t);                                                                 \
  }                                                                                                               \
  void LogSoftmaxBackwardWrite##Suffix(const T* ly, const T* dy, T* dx, std::size_t n, double sum, double inv_t) { \
    LogSoftmaxBackwardWrite(ly, dy, dx, n, sum, inv_t);                                                           \
  }                                                                                                               \
  double CrossEntropyRow##Suffix(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row, \
                                 bool want_offsets) {                                                             \
    return CrossEntropyRowT(x, grad, weight, n, row, want_offsets);                                               \
  }

SMAX_GRADIENT_KERNELS(F32, float)
SMAX_GRADIENT_KERNELS(F16, half)
SMAX_GRADIENT_KERNELS(BF16, bfloat16)
#undef SMAX_GRADIENT_KERNELS

}  // namespace smax::training::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::training::simd {

#define SMAX_EXPORT_GRADIENT_KERNELS(Suffix, T)                                                                \
  HWY_EXPORT(SumOfProducts##Suffix);                                                                           \
  HWY_EXPORT(SumOf##Suffix);                                                                                   \
  HWY_EXPORT(SoftmaxBackwardWrite##Suffix);                                                                    \
  HWY_EXPORT(LogSoftmaxBackwardWrite##Suffix);                                                                 \
  HWY_EXPORT(CrossEntropyRow##Suffix);                                                                         \
  SplitSum sum_of_products(const T* y, const T* dy, std::size_t n) {                                           \
    return HWY_DYNAMIC_DISPATCH(SumOfProducts##Suffix)(y, dy, n);                                              \
  }                                                                                                            \
  SplitSum sum_of(const T* v, std::size_t n) { return HWY_DYNAMIC_DISPATCH(SumOf##Suffix)(v, n); }             \
  void softmax_backward_write(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t) {       \
    HWY_DYNAMIC_DISPATCH(SoftmaxBackwardWrite##Suffix)(y, dy, dx, n, s, inv_t);                                \
  }                                                                                                            \
  void log_softmax_backward_write(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, double inv_t) { \
    HWY_DYNAMIC_DISPATCH(LogSoftmaxBackwardWrite##Suffix)(log_y, dy, dx, n, sum, inv_t);                       \
  }                                                                                                            \
  double cross_entropy_row(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row,    \
                           bool want_offsets) {                                                                \
    return HWY_DYNAMIC_DISPATCH(CrossEntropyRow##Suffix)(x, grad, weight, n, row, want_offsets);               \
  }

SMAX_EXPORT_GRADIENT_KERNELS(F32, float)
SMAX_EXPORT_GRADIENT_KERNELS(F16, half)
SMAX_EXPORT_GRADIENT_KERNELS(BF16, bfloat16)
#undef SMAX_EXPORT_GRADIENT_KERNELS

}  // namespace smax::training::simd
#endif  // HWY_ONCE
