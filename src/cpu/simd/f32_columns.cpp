// The column-panel kernels of f32_columns.hpp, compiled for every target Highway
// offers (foreach_target.h re-includes this file once per target) and dispatched at
// run time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd/f32_columns.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <hwy/aligned_allocator.h>

#ifndef SMAX_CPU_SIMD_F32_COLUMNS_ONCE
#define SMAX_CPU_SIMD_F32_COLUMNS_ONCE
namespace smax::cpu::simd::columns_detail {

// The per-column state of one panel, one entry per column (padded to whole vectors).
struct ColumnState {
  float* m;        // the max; after Finish, -m (0 for a non-finite column)
  float* nan;      // all bits set where the column holds a NaN
  float* factor;   // after Finish: 1/d (softmax) or log(d) (log_softmax)
  double* at_max;  // how many elements equal the max (each adds exactly 1 to d)
  double* others;  // sum of exp((x - m) / T) over the other elements
};

}  // namespace smax::cpu::simd::columns_detail
#endif  // SMAX_CPU_SIMD_F32_COLUMNS_ONCE

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd/f32_columns.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {

namespace columns {

using columns_detail::ColumnState;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
// The double lanes of one float vector: its lower and upper halves (one vector of
// one lane on the scalar target, where the upper half is unused).
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
inline constexpr bool kTwoHalves = false;
#else
using DD = hn::Rebind<double, hn::Half<DF>>;
inline constexpr bool kTwoHalves = true;
#endif
using VD = hn::Vec<DD>;

// The double lanes of one float vector.
struct Wide {
  VD lo, hi;
};

HWY_INLINE Wide Promote(VF v) {
  const DD dd;
#if HWY_TARGET == HWY_SCALAR
  return {hn::PromoteTo(dd, v), hn::Zero(dd)};
#else
  const hn::Half<DF> dh;
  return {hn::PromoteTo(dd, hn::LowerHalf(dh, v)), hn::PromoteTo(dd, hn::UpperHalf(dh, v))};
#endif
}

HWY_INLINE VF Demote(const Wide& w) {
  const DF df;
#if HWY_TARGET == HWY_SCALAR
  return hn::DemoteTo(df, w.lo);
#else
  const hn::Half<DF> dh;
  return hn::Combine(df, hn::DemoteTo(dh, w.hi), hn::DemoteTo(dh, w.lo));
#endif
}

HWY_INLINE Wide LoadWide(const double* p) {
  const DD dd;
  if constexpr (kTwoHalves) return {hn::LoadU(dd, p), hn::LoadU(dd, p + hn::Lanes(dd))};
  return {hn::LoadU(dd, p), hn::Zero(dd)};
}

HWY_INLINE void StoreWide(const Wide& w, double* p) {
  const DD dd;
  hn::StoreU(w.lo, dd, p);
  if constexpr (kTwoHalves) hn::StoreU(w.hi, dd, p + hn::Lanes(dd));
}

HWY_INLINE Wide Add(const Wide& a, const Wide& b) {
  if constexpr (kTwoHalves) return {hn::Add(a.lo, b.lo), hn::Add(a.hi, b.hi)};
  return {hn::Add(a.lo, b.lo), a.hi};
}

// bf16 outputs reach float's subnormals, which ExpFlush would drop (and so would the
// sum terms behind log_softmax's -log(1 + tiny) at a column's max); the others flush.
template <class T>
HWY_INLINE VF Exp(DF df, VF z, VF z_lo) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return ExpGradual(df, z, z_lo);
  } else {
    return ExpFlush(df, z, z_lo);
  }
}

template <class T, bool kTail>
HWY_INLINE VF Load(DF df, const T* p, std::size_t count, VF fill) {
  if constexpr (kTail) {
    return LoadTailF32(df, p, count, fill);
  } else {
    (void)count;
    (void)fill;
    return LoadF32(df, p);
  }
}

template <class T, bool kTail>
HWY_INLINE void Store(DF df, VF v, T* p, std::size_t count) {
  if constexpr (kTail) {
    StoreTailF32(df, v, p, count);
  } else {
    (void)count;
    StoreF32(df, v, p);
  }
}

// Applies `block(i, kRows_tag)` to rows [0, length) in blocks of kColumnBlockRows rows,
// then the last length % kColumnBlockRows rows one at a time: a fixed schedule.
template <class Block>
HWY_INLINE void ForRowBlocks(std::size_t length, Block&& block) {
  std::size_t i = 0;
  for (; i + kColumnBlockRows <= length; i += kColumnBlockRows) {
    block(i, std::integral_constant<std::size_t, kColumnBlockRows>());
  }
  for (; i < length; ++i) block(i, std::integral_constant<std::size_t, 1>());
}

// Applies `vector(j, count)` to the columns [0, width) a vector at a time; count is
// Lanes() but for a last partial vector (kTail).
template <class Vector>
HWY_INLINE void ForColumnVectors(DF df, std::size_t width, Vector&& vector) {
  const std::size_t N = hn::Lanes(df);
  Walk<1>(
      df, width, false, [&](std::size_t j) { vector(j, N, std::false_type()); },
      [&](std::size_t j) { vector(j, N, std::false_type()); },
      [&](std::size_t j, std::size_t count) { vector(j, count, std::true_type()); });
}

// A strided 2-d view of a panel's values: element (i, j) at p[i * stride + j].
template <class S>
struct Strided {
  S* p;
  std::ptrdiff_t stride;
  S* row(std::size_t i) const { return p + static_cast<std::ptrdiff_t>(i) * stride; }
};

// Pass 1: the max of every column, NaNs noted apart (x86's max drops a NaN depending
// on the operand order).
template <class T>
void MaxPass(Strided<const T> x, std::size_t width, std::size_t length, const ColumnState& s) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (std::size_t j = 0; j < width; j += N) {
    hn::StoreU(neg_inf, df, s.m + j);
    hn::StoreU(hn::Zero(df), df, s.nan + j);
  }
  ForRowBlocks(length, [&](std::size_t i, auto rows_tag) {
    constexpr std::size_t kRows = decltype(rows_tag)::value;
    ForColumnVectors(df, width, [&](std::size_t j, std::size_t count, auto tail_tag) {
      constexpr bool kTail = decltype(tail_tag)::value;
      VF m = hn::LoadU(df, s.m + j);
      auto nan = hn::IsNaN(neg_inf);  // all false
      for (std::size_t k = 0; k < kRows; ++k) {
        const VF v = Load<T, kTail>(df, x.row(i + k) + j, count, neg_inf);
        m = hn::Max(m, v);
        nan = hn::Or(nan, hn::IsNaN(v));
      }
      hn::StoreU(m, df, s.m + j);
      if (HWY_UNLIKELY(!hn::AllFalse(df, nan))) {
        hn::StoreU(hn::Or(hn::LoadU(df, s.nan + j), hn::VecFromMask(df, nan)), df, s.nan + j);
      }
    });
  });
}

// -m where m is finite, else 0: then x - m is never inf - inf, and a column whose
// max is -inf maps its -inf elements to exp(-inf) = 0 and -inf.
HWY_INLINE VF NegFiniteMax(VF m) { return hn::IfThenElseZero(hn::IsFinite(m), hn::Neg(m)); }

// Pass 2: at_max and others of every column; with kStore (f32 softmax) each term also
// goes to `terms` (y), so that the output pass only scales it: one exp per element.
template <bool kUnitT, bool kStore, class T>
void SumPass(Strided<const T> x, Strided<float> terms, std::size_t width, std::size_t length,
             const InverseTemperatureLanes<DF>& t, const ColumnState& s) {
  const DF df;
  const DD dd;
  const std::size_t N = hn::Lanes(df);
  const VF one = hn::Set(df, 1.0f);
  for (std::size_t j = 0; j < width; j += N) {
    StoreWide({hn::Zero(dd), hn::Zero(dd)}, s.at_max + j);
    StoreWide({hn::Zero(dd), hn::Zero(dd)}, s.others + j);
  }
  ForRowBlocks(length, [&](std::size_t i, auto rows_tag) {
    constexpr std::size_t kRows = decltype(rows_tag)::value;
    ForColumnVectors(df, width, [&](std::size_t j, std::size_t count, auto tail_tag) {
      constexpr bool kTail = decltype(tail_tag)::value;
      const VF m = hn::LoadU(df, s.m + j);
      const VF neg_m = NegFiniteMax(m);
      VF at_max = hn::Zero(df);
      Wide others = LoadWide(s.others + j);
      for (std::size_t k = 0; k < kRows; ++k) {
        const VF v = Load<T, kTail>(df, x.row(i + k) + j, count, hn::Zero(df));
        VF z, z_lo;
        ScaledDifference<kUnitT, true>(df, t, v, neg_m, z, z_lo);
        const VF e = Exp<T>(df, z, z_lo);
        if constexpr (kStore) Store<float, kTail>(df, e, terms.row(i + k) + j, count);
        const auto is_max = hn::Eq(v, m);
        at_max = hn::Add(at_max, hn::IfThenElseZero(is_max, one));
        others = Add(others, Promote(hn::IfThenZeroElse(is_max, e)));
      }
      StoreWide(Add(LoadWide(s.at_max + j), Promote(at_max)), s.at_max + j);
      StoreWide(others, s.others + j);
    });
  });
}

// log(d) = log1p(d - 1) in double lanes, where the elements equal to the max add
// exactly 1 each: d - 1 = (at_max - 1) + others keeps a dominant max's tiny rest.
HWY_INLINE VD LogSum(VD at_max, VD others) {
  const DD dd;
  const VD d_minus_one = hn::Add(hn::Sub(at_max, hn::Set(dd, 1.0)), others);
  return hn::Log1p(dd, hn::Max(d_minus_one, hn::Zero(dd)));  // >= 0 but for a non-finite column
}

// finish_row's decisions, vectorised over the columns. Softmax and log-softmax leave
// the output pass -m in s.m and 1/d or log(d) in s.factor; a column holding a NaN or
// +inf gets NaN, an all -inf column the AllMasked policy (with -m = 0 its elements
// give exp(-inf) * factor and -inf - factor). Logsumexp stores m/T + log(d) at y + j:
// NaN for a NaN, +inf for +inf, -inf for all -inf.
template <class T>
void Finish(T* y, std::size_t width, const ColumnParams& params, const ColumnState& s) {
  const DF df;
  const DD dd;
  const std::size_t N = hn::Lanes(df);
  const VF nan = hn::Set(df, std::numeric_limits<float>::quiet_NaN());
  const VF inf = hn::Set(df, std::numeric_limits<float>::infinity());
  const VD one = hn::Set(dd, 1.0);
  const VD inv_t = hn::Set(dd, params.inv_t);
  for (std::size_t j = 0; j < width; j += N) {
    const VF m = hn::LoadU(df, s.m + j);
    const Wide at_max = LoadWide(s.at_max + j);
    const Wide others = LoadWide(s.others + j);
    const auto has_nan = hn::Or(hn::MaskFromVec(hn::LoadU(df, s.nan + j)), hn::IsNaN(m));
    if (params.op == Op::logsumexp) {
      const Wide m_wide = Promote(m);
      const VF lse = Demote({hn::MulAdd(m_wide.lo, inv_t, LogSum(at_max.lo, others.lo)),
                             hn::MulAdd(m_wide.hi, inv_t, LogSum(at_max.hi, others.hi))});
      const VF value = hn::IfThenElse(has_nan, nan, hn::IfThenElse(hn::IsFinite(m), lse, m));
      if (j + N <= width) {
        StoreF32(df, value, y + j);
      } else {
        StoreTailF32(df, value, y + j, width - j);
      }
      continue;
    }
    VF factor;
    if (params.op == Op::softmax) {
      factor = Demote({hn::Div(one, hn::Add(at_max.lo, others.lo)), hn::Div(one, hn::Add(at_max.hi, others.hi))});
    } else {
      factor = Demote({LogSum(at_max.lo, others.lo), LogSum(at_max.hi, others.hi)});
    }
    const auto poisoned = hn::Or(has_nan, hn::Eq(m, inf));
    const auto all_masked = hn::AndNot(poisoned, hn::Eq(m, hn::Neg(inf)));
    const VF masked_factor = params.all_masked == AllMasked::zero ? hn::Zero(df) : nan;
    factor = hn::IfThenElse(poisoned, nan, hn::IfThenElse(all_masked, masked_factor, factor));
    hn::StoreU(NegFiniteMax(m), df, s.m + j);
    hn::StoreU(factor, df, s.factor + j);
  }
}

// Pass 3, last row first (the rows read last are the likeliest still in cache), from
// `src` (S) to y (T): kScaleOnly: src holds the exp terms, y = src * (1/d); else
// exp((x - m) / T) * (1/d) or (x - m) / T - log(d).
template <bool kUnitT, bool kLog, bool kScaleOnly, class T, class S>
void OutputPass(Strided<const S> src, Strided<T> y, std::size_t width, std::size_t length,
                const InverseTemperatureLanes<DF>& t, const ColumnState& s) {
  const DF df;
  for (std::size_t i = length; i-- > 0;) {
    const S* from = src.row(i);
    T* to = y.row(i);
    ForColumnVectors(df, width, [&](std::size_t j, std::size_t count, auto tail_tag) {
      constexpr bool kTail = decltype(tail_tag)::value;
      const VF factor = hn::LoadU(df, s.factor + j);
      const VF v = Load<S, kTail>(df, from + j, count, hn::Zero(df));
      VF out;
      if constexpr (kScaleOnly) {
        out = hn::Mul(v, factor);
      } else {
        VF z, z_lo;
        if constexpr (kLog) {
          ScaledDifference<kUnitT>(df, t, v, hn::LoadU(df, s.m + j), z, z_lo);
          out = hn::Sub(hn::Add(z, z_lo), factor);
        } else {
          ScaledDifference<kUnitT, true>(df, t, v, hn::LoadU(df, s.m + j), z, z_lo);
          out = hn::Mul(Exp<T>(df, z, z_lo), factor);
        }
      }
      Store<T, kTail>(df, out, to + j, count);
    });
  }
}

// The three passes over the panel (see f32_columns.hpp). f32 softmax keeps its exp
// terms in y between passes 2 and 3; 16-bit outputs cannot hold them exactly, so
// their output pass computes exp again.
template <bool kUnitT, class T>
void PanelT(const ColumnPanel<T>& p, const ColumnParams& params, const InverseTemperature& it,
            const ColumnState& s) {
  const DF df;
  const InverseTemperatureLanes<DF> t(df, it);
  const Strided<const T> x{p.x, p.x_stride};
  const Strided<T> y{p.y, p.y_stride};
  MaxPass(x, p.width, p.length, s);
  const bool softmax = params.op == Op::softmax;
  constexpr bool kTermsInY = std::is_same_v<T, float>;
  // Only dereferenced where T is float.
  const Strided<float> terms{reinterpret_cast<float*>(p.y), p.y_stride};
  if (softmax && kTermsInY) {
    SumPass<kUnitT, true, T>(x, terms, p.width, p.length, t, s);
  } else {
    SumPass<kUnitT, false, T>(x, terms, p.width, p.length, t, s);
  }
  Finish(p.y, p.width, params, s);
  if (softmax && kTermsInY) {
    OutputPass<kUnitT, false, true>(Strided<const float>{terms.p, terms.stride}, y, p.width, p.length, t, s);
  } else if (softmax) {
    OutputPass<kUnitT, false, false>(x, y, p.width, p.length, t, s);
  } else if (params.op == Op::log_softmax) {
    OutputPass<kUnitT, true, false>(x, y, p.width, p.length, t, s);
  }
}

template <class T>
void AnyPanel(const ColumnPanel<T>& p, const ColumnParams& params, const ColumnState& s) {
  const InverseTemperature it = InverseTemperature::of(params.inv_t);
  if (it.unit) {
    PanelT<true>(p, params, it, s);
  } else {
    PanelT<false>(p, params, it, s);
  }
}

}  // namespace columns

void ColumnsF32(const ColumnPanel<float>& p, const ColumnParams& params, const columns_detail::ColumnState& s) {
  columns::AnyPanel(p, params, s);
}
void ColumnsF16(const ColumnPanel<half>& p, const ColumnParams& params, const columns_detail::ColumnState& s) {
  columns::AnyPanel(p, params, s);
}
void ColumnsBF16(const ColumnPanel<bfloat16>& p, const ColumnParams& params,
                 const columns_detail::ColumnState& s) {
  columns::AnyPanel(p, params, s);
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::cpu::simd {
namespace {

// This thread's column state, grown to hold `width` columns padded to whole vectors
// of any target (at most 64 float lanes).
columns_detail::ColumnState state_for(std::size_t width) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> floats;
  thread_local hwy::AlignedFreeUniquePtr<double[]> doubles;
  thread_local std::size_t capacity = 0;
  const std::size_t padded = (width + 63) / 64 * 64;
  if (padded > capacity) {
    floats = hwy::AllocateAligned<float>(3 * padded);
    doubles = hwy::AllocateAligned<double>(2 * padded);
    capacity = padded;
  }
  return {floats.get(), floats.get() + capacity, floats.get() + 2 * capacity, doubles.get(),
          doubles.get() + capacity};
}

}  // namespace

HWY_EXPORT(ColumnsF32);
HWY_EXPORT(ColumnsF16);
HWY_EXPORT(ColumnsBF16);

void columns(const ColumnPanel<float>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsF32)(panel, params, state_for(panel.width));
}
void columns(const ColumnPanel<half>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsF16)(panel, params, state_for(panel.width));
}
void columns(const ColumnPanel<bfloat16>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsBF16)(panel, params, state_for(panel.width));
}

}  // namespace smax::cpu::simd
#endif  // HWY_ONCE
