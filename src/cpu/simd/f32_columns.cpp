// The column-panel kernels of f32_columns.hpp, compiled for every target Highway
// offers (foreach_target.h re-includes this file once per target) and dispatched at
// run time with HWY_DYNAMIC_DISPATCH. One set of passes, generic over the lane type
// L: float lanes for f32, f16 and bf16 panels, double lanes for f64 panels.
#include "cpu/simd/f32_columns.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <hwy/aligned_allocator.h>

#ifndef SMAX_CPU_SIMD_F32_COLUMNS_ONCE
#define SMAX_CPU_SIMD_F32_COLUMNS_ONCE
namespace smax::cpu::simd::columns_detail {

// The per-column state of one panel, one entry per column (padded to whole vectors);
// L is the lane type.
template <class L>
struct ColumnState {
  L* m;                  // the max; after Finish, -m (0 for a non-finite column)
  L* nan;                // all bits set where the column holds a NaN
  L* factor;             // after Finish: 1/d (softmax; times 2^-64 after OutputExp for bf16)
                         //   or log(d) (log_softmax)
  double* at_max;        // how many elements equal the max (each adds exactly 1 to d)
  double* others;        // sum of exp((x - m) / T) over the other elements
  double* others_error;  // double lanes: the exact rounding errors of that sum
  L* split_shift;        // float lanes, after OutputExp: the folded exp's split of each
  L* split_delta;        //   column's max (its m is -s.m): MaxSplitLanes's shift_minus_k
                         //   or TableLanes::PerLane's shift_a, and delta
  // Where a three-pass softmax panel keeps its exp terms apart from y (16-bit outputs,
  // which cannot hold them; f32 outputs that stream, since a streaming store to a line
  // in the cache would first write that line back; f32 and f64 outputs whose rows
  // crowd L1 sets with x's): a panel of `length` rows of terms_stride L; null elsewhere.
  L* terms = nullptr;
  std::ptrdiff_t terms_stride = 0;
};

}  // namespace smax::cpu::simd::columns_detail
#endif  // SMAX_CPU_SIMD_F32_COLUMNS_ONCE

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd/f32_columns.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include "core/cache_line.hpp"
#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/exp_f64-inl.h"
#include "cpu/simd/exp_minus_max-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {

namespace columns {

using columns_detail::ColumnState;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using D64 = hn::ScalableTag<double>;  // the lanes of f64 panels
using V64 = hn::Vec<D64>;

// The double lanes of one float vector: its lower and upper halves (one vector of one
// lane on the scalar target, where the upper half is unused).
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;
inline constexpr bool kTwoHalves = false;
#else
using DD = hn::Rebind<double, hn::Half<DF>>;
inline constexpr bool kTwoHalves = true;
#endif
using VD = hn::Vec<DD>;

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

HWY_INLINE Wide AddWide(const Wide& a, const Wide& b) {
  if constexpr (kTwoHalves) return {hn::Add(a.lo, b.lo), hn::Add(a.hi, b.hi)};
  return {hn::Add(a.lo, b.lo), a.hi};
}

// exp(z + z_lo) for an output of type T: double for f64; bf16 outputs reach float's
// subnormals, which ExpFlush would drop (and so would the sum terms behind
// log_softmax's -log(1 + tiny) at a column's max); f32 and f16 flush.
template <class T, class D, class V = hn::Vec<D>>
HWY_INLINE V Exp(D d, V z, V z_lo) {
  if constexpr (std::is_same_v<T, double>) {
    return ExpF64Flush(d, z, z_lo);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return ExpGradual(d, z, z_lo);
  } else {
    return ExpFlush(d, z, z_lo);
  }
}

// Lanes(d) elements of type T at p as lanes of D (the `count` first of them, the
// others `fill`, with kTail), and back (rounded to nearest even for 16-bit types).
template <class T, bool kTail, class D, class V = hn::Vec<D>>
HWY_INLINE V Load(D d, const T* p, std::size_t count, V fill) {
  if constexpr (std::is_same_v<T, double>) {
    if constexpr (kTail) return LoadTail(d, p, count, fill);
    return hn::LoadU(d, p);
  } else if constexpr (kTail) {
    return LoadTailF32(d, p, count, fill);
  } else {
    return LoadF32(d, p);
  }
}

// (kNotNaN: v is never NaN, StoreF32NotNaN.)
template <class T, bool kTail, bool kNotNaN = false, class D, class V = hn::Vec<D>>
HWY_INLINE void Store(D d, V v, T* p, std::size_t count) {
  if constexpr (std::is_same_v<T, double>) {
    if constexpr (kTail) {
      StoreTail(d, v, p, count);
    } else {
      hn::StoreU(v, d, p);
    }
  } else if constexpr (kTail) {
    StoreTailF32(d, v, p, count);
  } else if constexpr (kNotNaN) {
    StoreF32NotNaN(d, v, p);
  } else {
    StoreF32(d, v, p);
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

// Applies `vector(j, count, kTail_tag)` to the columns [0, width) a vector at a time;
// count is Lanes() but for a last partial vector (kTail).
template <class D, class Vector>
HWY_INLINE void ForColumnVectors(D d, std::size_t width, Vector&& vector) {
  const std::size_t N = hn::Lanes(d);
  Walk<1>(
      d, width, false, [&](std::size_t j) SMAX_INLINE_LAMBDA { vector(j, N, std::false_type()); },
      [&](std::size_t j) SMAX_INLINE_LAMBDA { vector(j, N, std::false_type()); },
      [&](std::size_t j, std::size_t count) SMAX_INLINE_LAMBDA { vector(j, count, std::true_type()); });
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
template <class D, class T, class L = hn::TFromD<D>>
void MaxPass(D d, Strided<const T> x, std::size_t width, std::size_t length, const ColumnState<L>& s) {
  const std::size_t N = hn::Lanes(d);
  const auto neg_inf = hn::Set(d, -std::numeric_limits<L>::infinity());
  for (std::size_t j = 0; j < width; j += N) {
    hn::StoreU(neg_inf, d, s.m + j);
    hn::StoreU(hn::Zero(d), d, s.nan + j);
  }
  ForRowBlocks(length, [&](std::size_t i, auto rows_tag) SMAX_INLINE_LAMBDA {
    constexpr std::size_t kRows = decltype(rows_tag)::value;
    ForColumnVectors(d, width, [&](std::size_t j, std::size_t count, auto tail_tag) SMAX_INLINE_LAMBDA {
      constexpr bool kTail = decltype(tail_tag)::value;
      auto m = hn::LoadU(d, s.m + j);
      auto nan = hn::IsNaN(neg_inf);  // all false
      for (std::size_t k = 0; k < kRows; ++k) {
        const auto v = Load<T, kTail>(d, x.row(i + k) + j, count, neg_inf);
        m = hn::Max(m, v);
        nan = hn::Or(nan, hn::IsNaN(v));
      }
      hn::StoreU(m, d, s.m + j);
      if (HWY_UNLIKELY(!hn::AllFalse(d, nan))) {
        hn::StoreU(hn::Or(hn::LoadU(d, s.nan + j), hn::VecFromMask(d, nan)), d, s.nan + j);
      }
    });
  });
}

// -m where m is finite, else 0: then x - m is never inf - inf, and a column whose
// max is -inf maps its -inf elements to exp(-inf) = 0 and -inf.
template <class V>
HWY_INLINE V NegFiniteMax(V m) {
  return hn::IfThenElseZero(hn::IsFinite(m), hn::Neg(m));
}

// The sum of term(k) for k in [kBegin, kEnd) by the balanced tree ((t0 + t1) + (t2 +
// t3)) + ..., the terms made in order, with no array: GCC kept an array of a block's
// terms in memory, stored and loaded back once a block (column panels 1.02-1.11x in
// cache without it; docs/PERFORMANCE.md, thirty-eighth session).
template <std::size_t kBegin, std::size_t kEnd, class Term>
HWY_INLINE VF TreeOfTerms(Term&& term) {
  static_assert(((kEnd - kBegin) & (kEnd - kBegin - 1)) == 0, "blocks of a power of two rows");
  if constexpr (kEnd - kBegin == 1) {
    return term(kBegin);
  } else {
    constexpr std::size_t kMid = kBegin + (kEnd - kBegin) / 2;
    const VF low = TreeOfTerms<kBegin, kMid>(term);
    return hn::Add(low, TreeOfTerms<kMid, kEnd>(term));
  }
}

// The sums of one column vector in pass 2: with kCountAtMax (the log ops) the
// elements equal to the max counted, the others' exp terms summed; else (softmax) all
// terms summed in `others`. Float lanes: a block's terms are added in float by a tree
// (of depth three for a whole block) before they widen into double lanes once: a term
// meets at most three float roundings, so d stays within 1.5 float ulps (the row
// kernels' SumLanes allow three), and the widening, whose conversions and lane moves
// cost more than the adds, comes once per block instead of once per pair.
template <bool kCountAtMax>
struct FloatSums {
  VF at_max_in_block = hn::Zero(DF());
  Wide others;
  FloatSums(const ColumnState<float>& s, std::size_t j) : others(LoadWide(s.others + j)) {}

  // The term that the exp e of the element v adds to `others` (0 where v is the max m,
  // which it counts instead): taken as each exp comes, so that v need not live until
  // the block's Add (at T != 1 log_softmax panels of 256 rows spilled registers so).
  HWY_INLINE VF Term(VF e, VF v, VF m) {
    if constexpr (kCountAtMax) {
      const auto is_max = hn::Eq(v, m);
      at_max_in_block = hn::Add(at_max_in_block, hn::IfThenElseZero(is_max, hn::Set(DF(), 1.0f)));
      return hn::IfThenZeroElse(is_max, e);
    } else {
      (void)v;
      (void)m;
      return e;
    }
  }

  // Adds term(k), a block's terms (Term) for k in [0, kRows), by TreeOfTerms.
  template <std::size_t kRows, class TermOf>
  HWY_INLINE void AddBlock(TermOf&& term) {
    others = AddWide(others, Promote(TreeOfTerms<0, kRows>(term)));
  }
  HWY_INLINE void Store(const ColumnState<float>& s, std::size_t j) const {
    if constexpr (kCountAtMax) {
      StoreWide(AddWide(LoadWide(s.at_max + j), Promote(at_max_in_block)), s.at_max + j);
    }
    StoreWide(others, s.others + j);
  }
};

// Double lanes: a compensated sum (the f64 bar leaves no room for n roundings of a
// long column); with both operands >= 0, max - sum + min is the sum's exact error.
struct DoubleSums {
  V64 at_max, others, error;
  DoubleSums(const ColumnState<double>& s, std::size_t j)
      : at_max(hn::LoadU(D64(), s.at_max + j)),
        others(hn::LoadU(D64(), s.others + j)),
        error(hn::LoadU(D64(), s.others_error + j)) {}
  // As FloatSums's.
  HWY_INLINE V64 Term(V64 e, V64 v, V64 m) {
    const auto is_max = hn::Eq(v, m);
    at_max = hn::Add(at_max, hn::IfThenElseZero(is_max, hn::Set(D64(), 1.0)));
    return hn::IfThenZeroElse(is_max, e);
  }
  // As FloatSums's, one term at a time.
  template <std::size_t kRows, class TermOf>
  HWY_INLINE void AddBlock(TermOf&& term) {
    for (std::size_t k = 0; k < kRows; ++k) Add(term(k));
  }
  HWY_INLINE void Add(V64 term) {
    const V64 sum = hn::Add(others, term);
    error = hn::Add(error, hn::Add(hn::Sub(hn::Max(others, term), sum), hn::Min(others, term)));
    others = sum;
  }
  HWY_INLINE void Store(const ColumnState<double>& s, std::size_t j) const {
    hn::StoreU(at_max, D64(), s.at_max + j);
    hn::StoreU(others, D64(), s.others + j);
    hn::StoreU(error, D64(), s.others_error + j);
  }
};

template <class L, bool kCountAtMax>
using Sums = std::conditional_t<std::is_same_v<L, double>, DoubleSums, FloatSums<kCountAtMax>>;

// A value of the folded exps' argument, v / T, as the rows' ScaledFoldedExp and
// FoldedMax take it in f32_rows.cpp: hi v rounded, and the rest, (hi v - that) + lo
// v, rounded by 2^-48 of it (FMA); v itself, and no rest, at unit temperature. The
// exps take x's against their column's max's, so that their argument is 0 exactly at
// the max.
template <class D>
struct FoldedLanes {
  hn::Vec<D> hi, lo;
};

template <bool kUnitT, class D, class V = hn::Vec<D>>
HWY_INLINE FoldedLanes<D> Folded(D d, const InverseTemperatureLanes<D>& t, V v) {
  if constexpr (kUnitT) {
    (void)t;
    return {v, hn::Zero(d)};
  } else {
    const V p = hn::Mul(v, t.hi);
    return {p, hn::MulAdd(v, t.lo, hn::MulSub(v, t.hi, p))};
  }
}

// Whether a column vector whose maxima (finite, or 0 for a non-finite column) fold to
// `max` (Folded) can take exp_minus_max-inl.h's exp: float lanes with FMA (which the
// rest of a product needs), |max.hi| <= 16384.
template <class D>
HWY_INLINE bool FoldsMax(D d, const FoldedLanes<D>& max) {
  if constexpr (HWY_NATIVE_FMA && std::is_same_v<hn::TFromD<D>, float>) {
    return hn::AllTrue(d, hn::Le(hn::Abs(max.hi), hn::Set(d, 16384.0f)));
  } else {
    (void)d;
    (void)max;
    return false;
  }
}

// The folded max's split in lanes (MaxSplitLanes or TableLanes), its rest added to
// delta at T != 1 (one more rounding of |delta| <= 0.35: 2e-8, common to the column).
template <class Split, bool kUnitT, class D>
HWY_INLINE Split SplitOf(D d, const FoldedLanes<D>& max) {
  Split split = Split::PerLane(d, max.hi);
  if constexpr (!kUnitT) split.delta = hn::Add(split.delta, max.lo);
  return split;
}

// exp(x / T - max / T) by the split of the max's folded value (SplitOf).
template <ExpRange kRange, class D, class V = hn::Vec<D>>
HWY_INLINE V FoldedExp(D d, const MaxSplitLanes<D>& split, const FoldedLanes<D>& x) {
  V unused;
  return ExpMinusMax<kRange>(d, split, x.hi, x.lo, unused);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
template <ExpRange kRange, class D, class V = hn::Vec<D>>
HWY_INLINE V FoldedExp(D d, const TableLanes<D>& split, const FoldedLanes<D>& x) {
  V unused;
  return ExpMinusMaxTable<kRange>(d, split, x.hi, x.lo, unused);
}
#endif

// The folded exp's range below float's normal numbers for an output of type T (as Exp).
template <class T>
inline constexpr ExpRange kFoldedRange = std::is_same_v<T, bfloat16> ? ExpRange::gradual : ExpRange::flush;

// The folded exp's range in a sum pass: softmax's sums (no kCountAtMax) flush for
// every type, since they hold the max's term, 1, beside which terms below FLT_MIN
// (2^-126) stay below a double's rounding in any column shorter than 2^70; the log
// ops' terms build d - 1, whose -log(1 + tiny) at the max bf16 keeps in float's
// subnormals.
template <class T, bool kCountAtMax>
inline constexpr ExpRange kSumRange = kCountAtMax ? kFoldedRange<T> : ExpRange::flush;

// The folded exp's range in softmax's output pass: bf16 takes exp(x - m) * 2^64
// (never subnormal) times 2^-64 / d, so that the one product rounds its subnormal
// results, as the gradual steps would, and the table form stays open to it.
template <class T>
inline constexpr ExpRange kOutputRange = std::is_same_v<T, bfloat16> ? ExpRange::times_2_64 : ExpRange::flush;

// The range of the terms a softmax sum pass stores for its output pass to scale: the
// output pass's. Scaled by 2^64 (bf16), they sum to 2^64 d, whose reciprocal is the
// 2^-64 / d that OutputExp would make of 1/d: the outputs keep their bits. (The sum
// then takes the terms between exp(-104) and FLT_MIN that kSumRange flushes: below
// 2^-100 of the max's term, 1, so d's bits barely ever change.)
template <class T>
inline constexpr ExpRange kStoredRange = kOutputRange<T>;

// Whether a column vector whose maxima m fold (FoldsMax) can take the table of 2^(j /
// 32) (TableLanes::PerLane) in range kRange: AVX-512, a range that is not gradual,
// |m| <= 600.
template <ExpRange kRange, class D, class V = hn::Vec<D>>
HWY_INLINE bool TakesTable(D d, V m) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kRange != ExpRange::gradual && kHasScalef<V>) {
    return hn::AllTrue(d, hn::Le(hn::Abs(m), hn::Set(d, 600.0f)));
  }
#endif
  (void)d;
  (void)m;
  return false;
}

// Calls f(exp_of), exp_of(v) = exp((v - m) / T) for a column vector whose max (finite,
// or 0 for a non-finite column) is -neg_m: exp_minus_max-inl.h's folded exp in range
// kRange where FoldsMax allows it (its table form where TakesTable does), else the exp
// of the argument with its rounding error (Exp<T>), times 2^64 where kRange is
// times_2_64.
template <bool kUnitT, ExpRange kRange, class T, class D, class F, class V = hn::Vec<D>>
HWY_INLINE void WithColumnExp(D d, const InverseTemperatureLanes<D>& t, V neg_m, F&& f) {
  if constexpr (std::is_same_v<hn::TFromD<D>, float>) {
    const FoldedLanes<D> max = Folded<kUnitT>(d, t, hn::Neg(neg_m));
    if (FoldsMax(d, max)) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      if constexpr (kRange != ExpRange::gradual && kHasScalef<V>) {
        if (TakesTable<kRange>(d, max.hi)) {
          const TableLanes<D> split = SplitOf<TableLanes<D>, kUnitT>(d, max);
          f([=](V v) SMAX_INLINE_LAMBDA { return FoldedExp<kRange>(d, split, Folded<kUnitT>(d, t, v)); });
          return;
        }
      }
#endif
      const MaxSplitLanes<D> split = SplitOf<MaxSplitLanes<D>, kUnitT>(d, max);
      // By value: by reference, its lanes would be reloaded after every store.
      f([=](V v) SMAX_INLINE_LAMBDA { return FoldedExp<kRange>(d, split, Folded<kUnitT>(d, t, v)); });
      return;
    }
  }
  f([=](V v) SMAX_INLINE_LAMBDA {
    V z, z_lo;
    ScaledDifference<kUnitT, true>(d, t, v, neg_m, z, z_lo);
    if constexpr (kRange == ExpRange::times_2_64) {
      // Exact: Exp<T>'s subnormal results become normal, with the bits they had.
      return hn::Mul(Exp<T>(d, z, z_lo), hn::Set(d, static_cast<hn::TFromD<D>>(0x1p64)));
    } else {
      return Exp<T>(d, z, z_lo);
    }
  });
}

// Pass 2: at_max and others of every column (kCountAtMax), or their sum d in others;
// with kStore each term also goes to `terms` (y: f32 softmax on float lanes, f64
// softmax on double lanes; a scratch panel for 16-bit softmax and streamed f32), so
// that the output pass only scales it: one exp per element. bf16's stored terms (and
// so d) are exp((x - m) / T) * 2^64 (kStoredRange), as its output pass needs them.
template <bool kUnitT, bool kStore, bool kCountAtMax, class D, class T, class L = hn::TFromD<D>>
void SumPass(D d, Strided<const T> x, Strided<L> terms, std::size_t width, std::size_t length,
             const InverseTemperatureLanes<D>& t, const ColumnState<L>& s, Strided<const T> next = {nullptr, 0},
             std::size_t next_width = 0) {
  const std::size_t padded = (width + hn::Lanes(d) - 1) / hn::Lanes(d) * hn::Lanes(d);
  std::fill_n(s.at_max, padded, 0.0);
  std::fill_n(s.others, padded, 0.0);
  std::fill_n(s.others_error, padded, 0.0);
  if (next.p == nullptr) next_width = 0;
  ForRowBlocks(length, [&](std::size_t i, auto rows_tag) SMAX_INLINE_LAMBDA {
    constexpr std::size_t kRows = decltype(rows_tag)::value;
    ForColumnVectors(d, width, [&](std::size_t j, std::size_t count, auto tail_tag) SMAX_INLINE_LAMBDA {
      constexpr bool kTail = decltype(tail_tag)::value;
      const auto m = hn::LoadU(d, s.m + j);
      const auto neg_m = NegFiniteMax(m);
      Sums<L, kCountAtMax> sums(s, j);
      // The next panel's element beside each one loaded: its lines go into L2 at the
      // pace of this pass's arithmetic.
      const bool fetch = j < next_width;
      auto rows = [&](auto&& exp_of) SMAX_INLINE_LAMBDA {
        const auto term = [&](std::size_t k) SMAX_INLINE_LAMBDA {
          if (fetch) __builtin_prefetch(next.row(i + k) + j, 0, 2);
          const auto v = Load<T, kTail>(d, x.row(i + k) + j, count, hn::Zero(d));
          const auto e = exp_of(v);
          if constexpr (kStore) Store<L, kTail>(d, e, terms.row(i + k) + j, count);
          return sums.Term(e, v, m);
        };
        sums.template AddBlock<kRows>(term);
      };
      WithColumnExp<kUnitT, kStore ? kStoredRange<T> : kSumRange<T, kCountAtMax>, T>(d, t, neg_m, rows);
      sums.Store(s, j);
    });
  });
}

// Where a column vector's running max rose from m_old to m_new, its sums so far are
// scaled by exp((m_old - m_new) / T), computed in double lanes; with kCountAtMax the
// elements counted at the old max join `others` (each is now that factor). Lanes
// whose max did not rise keep their sums bit for bit.
template <bool kCountAtMax>
HWY_INLINE void RescaleSums(VF m_old, VF m_new, double inv_t, const ColumnState<float>& s, std::size_t j) {
  const DD dd;
  const Wide from = Promote(m_old);
  const Wide to = Promote(m_new);
  Wide at_max = LoadWide(s.at_max + j);
  Wide others = LoadWide(s.others + j);
  auto rescale = [&](VD m0, VD m1, VD& at, VD& sum) {
    const auto rose = hn::Ne(m0, m1);
    // -inf where the old max was -inf: the factor is 0, as exp(-inf - m) is.
    const VD factor = ExpF64Flush(dd, hn::Mul(hn::Sub(m0, m1), hn::Set(dd, inv_t)), hn::Zero(dd));
    const VD old_terms = kCountAtMax ? hn::Add(sum, at) : sum;
    sum = hn::IfThenElse(rose, hn::Mul(old_terms, factor), sum);
    if constexpr (kCountAtMax) at = hn::IfThenZeroElse(rose, at);
  };
  rescale(from.lo, to.lo, at_max.lo, others.lo);
  if constexpr (kTwoHalves) rescale(from.hi, to.hi, at_max.hi, others.hi);
  StoreWide(at_max, s.at_max + j);
  StoreWide(others, s.others + j);
}

// The online statistics pass of a tall float-lane panel (f32_columns.hpp): the max,
// NaNs and sums of every column in one read of x. Per block of kColumnBlockRows rows
// and column vector: the block's max raises the running max (rescaling the sums where
// it rose), then the block's terms exp((x - m) / T), against the running max, are
// added as SumPass adds them. Blocks of 8 rows ran faster from DRAM than blocks of 2,
// 4, 16, 32 or 64 (4096 x 4096 along axis 0, one thread: 0.49 ns an element against
// 0.52 to 0.71): more rows mean more pages read a line at a time side by side, fewer
// mean more rescales. Each block fetches its column vectors of the rows about
// kStatsFetchBytes ahead: rows narrower than a page leave the hardware prefetcher
// little to follow (Intel Xeon VM, 4096 x 4096 along axis 0 in 384-column panels, two threads:
// 9.1 to 11.5-12.3 GB/s; no change with 1024 columns).
inline constexpr std::size_t kStatsFetchBytes = 32 * 1024;

template <bool kUnitT, bool kCountAtMax, class T>
void OnlineStatsPass(Strided<const T> x, std::size_t width, std::size_t length, const InverseTemperatureLanes<DF>& t,
                     double inv_t, const ColumnState<float>& s) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const std::size_t padded = (width + N - 1) / N * N;
  for (std::size_t j = 0; j < padded; j += N) {
    hn::StoreU(neg_inf, d, s.m + j);
    hn::StoreU(hn::Zero(d), d, s.nan + j);
  }
  std::fill_n(s.at_max, padded, 0.0);
  std::fill_n(s.others, padded, 0.0);
  const std::size_t ahead =
      (kStatsFetchBytes / (width * sizeof(T)) + kColumnBlockRows) / kColumnBlockRows * kColumnBlockRows;
  auto block = [&](std::size_t i, auto rows_tag) SMAX_INLINE_LAMBDA {
    constexpr std::size_t kRows = decltype(rows_tag)::value;
    const bool fetch = i + ahead + kRows <= length;
    ForColumnVectors(d, width, [&](std::size_t j, std::size_t count, auto tail_tag) SMAX_INLINE_LAMBDA {
      constexpr bool kTail = decltype(tail_tag)::value;
      auto load = [&](std::size_t k) SMAX_INLINE_LAMBDA { return Load<T, kTail>(d, x.row(i + k) + j, count, neg_inf); };
      if (fetch) {
        for (std::size_t k = 0; k < kRows; ++k) __builtin_prefetch(x.row(i + ahead + k) + j, 0, 2);
      }
      VF block_max = neg_inf;
      VF total = hn::Zero(d);  // NaN where the block holds a NaN (or both infinities)
      for (std::size_t k = 0; k < kRows; ++k) {
        const VF v = load(k);
        block_max = hn::Max(block_max, v);
        total = hn::Add(total, v);
      }
      if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(total)))) {
        auto nan = hn::IsNaN(neg_inf);  // all false
        for (std::size_t k = 0; k < kRows; ++k) nan = hn::Or(nan, hn::IsNaN(load(k)));
        hn::StoreU(hn::Or(hn::LoadU(d, s.nan + j), hn::VecFromMask(d, nan)), d, s.nan + j);
      }
      // The block's terms against the running max m, once it holds the block's.
      auto add_terms = [&](VF m) SMAX_INLINE_LAMBDA {
        FloatSums<kCountAtMax> sums(s, j);
        WithColumnExp<kUnitT, kSumRange<T, kCountAtMax>, T>(d, t, NegFiniteMax(m), [&](auto&& exp_of) SMAX_INLINE_LAMBDA {
          sums.template AddBlock<kRows>([&](std::size_t k) SMAX_INLINE_LAMBDA {
            const VF v = load(k);
            return sums.Term(exp_of(v), v, m);
          });
        });
        sums.Store(s, j);
      };
      const VF m_old = hn::LoadU(d, s.m + j);
      const VF m = hn::Max(m_old, block_max);
      if (HWY_UNLIKELY(!hn::AllTrue(d, hn::Eq(m, m_old)))) {
        RescaleSums<kCountAtMax>(m_old, m, inv_t, s, j);
        hn::StoreU(m, d, s.m + j);
        add_terms(m);
      } else {
        // Against m_old, which is m here: the exps need not wait for the block's max,
        // only the branch does.
        add_terms(m_old);
      }
    });
  };
  ForRowBlocks(length, block);
}

// log(d) = log1p(d - 1) in double lanes, where the elements equal to the max add
// exactly 1 each: d - 1 = (at_max - 1) + others keeps a dominant max's tiny rest.
template <class DDouble, class V>
HWY_INLINE V LogSum(DDouble dd, V at_max, V others) {
  const V d_minus_one = hn::Add(hn::Sub(at_max, hn::Set(dd, 1.0)), others);
  return hn::Log1p(dd, hn::Max(d_minus_one, hn::Zero(dd)));  // >= 0 but for a non-finite column
}

// f(dd, m, at_max, others) over the double lanes of column vector j, as lanes of L.
template <class F>
HWY_INLINE VF InDouble(VF m, const ColumnState<float>& s, std::size_t j, F&& f) {
  const DD dd;
  const Wide m_wide = Promote(m);
  const Wide at_max = LoadWide(s.at_max + j);
  const Wide others = LoadWide(s.others + j);
  const VD lo = f(dd, m_wide.lo, at_max.lo, others.lo);
  if constexpr (kTwoHalves) return Demote({lo, f(dd, m_wide.hi, at_max.hi, others.hi)});
  return Demote({lo, lo});
}

template <class F>
HWY_INLINE V64 InDouble(V64 m, const ColumnState<double>& s, std::size_t j, F&& f) {
  const D64 d;
  const V64 others = hn::Add(hn::LoadU(d, s.others + j), hn::LoadU(d, s.others_error + j));
  return f(d, m, hn::LoadU(d, s.at_max + j), others);
}

// finish_row's decisions, vectorised over the columns. Softmax and log-softmax leave
// the output pass -m in s.m and 1/d or log(d) in s.factor; a column holding a NaN or
// +inf gets NaN, an all -inf column the AllMasked policy (with -m = 0 its elements
// give exp(-inf) * factor and -inf - factor). Logsumexp stores m/T + log(d) at y + j:
// NaN for a NaN, +inf for +inf, -inf for all -inf.
template <class D, class T, class L = hn::TFromD<D>>
void Finish(D d, T* y, std::size_t width, const ColumnParams& params, const ColumnState<L>& s) {
  const std::size_t N = hn::Lanes(d);
  const auto nan = hn::Set(d, std::numeric_limits<L>::quiet_NaN());
  const auto inf = hn::Set(d, std::numeric_limits<L>::infinity());
  const double inv_t = params.inv_t;
  for (std::size_t j = 0; j < width; j += N) {
    const auto m = hn::LoadU(d, s.m + j);
    const auto has_nan = hn::Or(hn::MaskFromVec(hn::LoadU(d, s.nan + j)), hn::IsNaN(m));
    if (params.op == Op::logsumexp) {
      const auto lse = InDouble(m, s, j, [&](auto dd, auto md, auto at_max, auto others) {
        return hn::MulAdd(md, hn::Set(dd, inv_t), LogSum(dd, at_max, others));
      });
      const auto value = hn::IfThenElse(has_nan, nan, hn::IfThenElse(hn::IsFinite(m), lse, m));
      if (j + N <= width) {
        Store<T, false>(d, value, y + j, N);
      } else {
        Store<T, true>(d, value, y + j, width - j);
      }
      continue;
    }
    const bool softmax = params.op == Op::softmax;
    auto factor = InDouble(m, s, j, [&](auto dd, auto /*md*/, auto at_max, auto others) {
      return softmax ? hn::Div(hn::Set(dd, 1.0), hn::Add(at_max, others)) : LogSum(dd, at_max, others);
    });
    const auto poisoned = hn::Or(has_nan, hn::Eq(m, inf));
    const auto all_masked = hn::AndNot(poisoned, hn::Eq(m, hn::Neg(inf)));
    const auto masked_factor = params.all_masked == AllMasked::zero ? hn::Zero(d) : nan;
    factor = hn::IfThenElse(poisoned, nan, hn::IfThenElse(all_masked, masked_factor, factor));
    hn::StoreU(NegFiniteMax(m), d, s.m + j);
    hn::StoreU(factor, d, s.factor + j);
  }
}

// What the output pass writes: y = src * (1/d) where src holds the exp terms; exp((x -
// m) / T) * (1/d), with exp_minus_max-inl.h's folded exp (or its table form) where
// OutputExp allows it; or (x - m) / T - log(d).
enum class OutputOf { terms, exp, folded_exp, table_exp, log };

// The exp the output pass can take for the whole panel (exp, folded_exp or
// table_exp); for the folded ones, stores every column's max split (s.m holds -m
// after Finish, 0 for a non-finite column) and scales the factors 1/d by 2^-64 where
// kOutputRange is times_2_64. Where every column vector of the panel takes the same
// form, the three-pass sum took the same split, so its rounding (delta, at most 2e-8
// relative) cancels in the quotient; a panel that mixes forms, and the online sum
// (against each block's running max), leave it, 2e-8 at most.
template <bool kUnitT, class T, class D, class L = hn::TFromD<D>>
OutputOf OutputExp(D d, std::size_t width, const InverseTemperatureLanes<D>& t, const ColumnState<L>& s) {
  const std::size_t N = hn::Lanes(d);
  bool table = true;
  for (std::size_t j = 0; j < width; j += N) {
    const FoldedLanes<D> max = Folded<kUnitT>(d, t, hn::Neg(hn::LoadU(d, s.m + j)));
    if (!FoldsMax(d, max)) return OutputOf::exp;
    table = table && TakesTable<kOutputRange<T>>(d, max.hi);
  }
  if constexpr (std::is_same_v<L, float>) {
    for (std::size_t j = 0; j < width; j += N) {
      const FoldedLanes<D> max = Folded<kUnitT>(d, t, hn::Neg(hn::LoadU(d, s.m + j)));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      if constexpr (kHasScalef<hn::Vec<D>>) {
        if (table) {
          const TableLanes<D> split = SplitOf<TableLanes<D>, kUnitT>(d, max);
          hn::StoreU(split.shift_a, d, s.split_shift + j);
          hn::StoreU(split.delta, d, s.split_delta + j);
          continue;
        }
      }
#endif
      const MaxSplitLanes<D> split = SplitOf<MaxSplitLanes<D>, kUnitT>(d, max);
      hn::StoreU(split.shift_minus_k, d, s.split_shift + j);
      hn::StoreU(split.delta, d, s.split_delta + j);
    }
  }
  if constexpr (kOutputRange<T> == ExpRange::times_2_64) {
    const auto scale = hn::Set(d, static_cast<L>(0x1p-64));  // d <= the column's length: 2^-64 / d is normal
    for (std::size_t j = 0; j < width; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, s.factor + j), scale), d, s.factor + j);
  }
  return table ? OutputOf::table_exp : OutputOf::folded_exp;
}

// How far ahead the output pass fetches its source, in bytes of rows (at least one
// row): four rows of 4 KiB take about 1 us here, a few DRAM latencies.
inline constexpr std::size_t kOutputFetchBytes = 16 * 1024;

// The columns [begin, end) of each row that a panel's output pass writes
// (ColumnPanel::lead and trims_end): from and up to line boundaries of y where the
// panel shares its rows' end lines with the panels beside it.
struct OwnedColumns {
  std::size_t lead = 0;
  bool trims_end = false;

  template <class T>
  std::size_t begin(const T* row) const {
    return lead > 0 ? lead - PastLineStart(row + lead) : 0;
  }
  template <class T>
  std::size_t end(const T* row, std::size_t width) const {
    return trims_end ? width - PastLineStart(row + width) : width;
  }
};

// Pass 3, last row first (the rows read last are the likeliest still in cache), from
// `src` (S: the terms, or x) to y (T), as kOf says. `stream`: float-lane rows are
// written with streaming stores (whole vectors of T at aligned addresses; 16-bit
// vectors narrower than 16 bytes, SSE4's, through the cache), then fenced.
// Four column vectors a step: each exp is one long chain of dependent operations, and
// four side by side ran online panels 5-10% faster than one at a time (Intel Xeon VM,
// 256 x 512 along axis 0 in L2, online asked).
// With kNotNaN (no column's factor is NaN: no output is; bf16 only) the outputs
// round without the NaN case, four vectors as two pairs (StoreF32x2NotNaN).
template <bool kUnitT, OutputOf kOf, bool kNotNaN, class D, class T, class S, class L = hn::TFromD<D>>
void OutputPassT(D d, Strided<const S> src, Strided<T> y, std::size_t width, std::size_t length,
                 const InverseTemperatureLanes<D>& t, const ColumnState<L>& s, OwnedColumns owned, bool stream) {
  const std::size_t N = hn::Lanes(d);
  const std::size_t fetch_rows = std::max<std::size_t>(1, kOutputFetchBytes / (width * sizeof(S)));
  for (std::size_t i = length; i-- > 0;) {
    const std::size_t begin = owned.begin(y.row(i));
    const std::size_t row_width = owned.end(y.row(i), width) - begin;
    const S* from = src.row(i) + begin;
    T* to = y.row(i) + begin;
    // This row's columns of the column state.
    const L* m = s.m + begin;
    const L* factor_of = s.factor + begin;
    const L* split_shift = s.split_shift + begin;
    const L* split_delta = s.split_delta + begin;
    // src a few rows ahead, a line per vector (for the reasons of OnlineStatsPass's).
    const S* ahead = i >= fetch_rows ? src.row(i - fetch_rows) + begin : nullptr;
    auto value = [&](std::size_t j, std::size_t count, auto tail_tag) SMAX_INLINE_LAMBDA {
      constexpr bool kTail = decltype(tail_tag)::value;
      if (ahead != nullptr) __builtin_prefetch(ahead + j, 0, 2);
      const auto factor = hn::LoadU(d, factor_of + j);
      const auto v = Load<S, kTail>(d, from + j, count, hn::Zero(d));
      if constexpr (kOf == OutputOf::terms) {
        return hn::Mul(v, factor);
      } else if constexpr (kOf == OutputOf::folded_exp) {
        const MaxSplitLanes<D> split(Folded<kUnitT>(d, t, hn::Neg(hn::LoadU(d, m + j))).hi,
                                     hn::LoadU(d, split_shift + j), hn::LoadU(d, split_delta + j));
        return hn::Mul(FoldedExp<kOutputRange<T>>(d, split, Folded<kUnitT>(d, t, v)), factor);
      } else if constexpr (kOf == OutputOf::table_exp) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
        if constexpr (kHasScalef<hn::Vec<D>>) {
          const TableLanes<D> split(d, Folded<kUnitT>(d, t, hn::Neg(hn::LoadU(d, m + j))).hi,
                                    hn::LoadU(d, split_shift + j), hn::LoadU(d, split_delta + j));
          return hn::Mul(FoldedExp<kOutputRange<T>>(d, split, Folded<kUnitT>(d, t, v)), factor);
        }
#endif
        return v;  // never: OutputExp returns table_exp only where the branch above is compiled
      } else {
        if constexpr (kOf == OutputOf::log) {
          // (x - m) / T - log(d) in plain arithmetic: the terms never cancel (as the
          // rows' LogSoftmaxNormalizeT).
          const auto x_minus_m = hn::Add(v, hn::LoadU(d, m + j));
          return hn::Sub(kUnitT ? x_minus_m : hn::Mul(x_minus_m, t.hi), factor);
        } else {
          hn::Vec<D> z, z_lo;
          ScaledDifference<kUnitT, true>(d, t, v, hn::LoadU(d, m + j), z, z_lo);
          return hn::Mul(Exp<T>(d, z, z_lo), factor);
        }
      }
    };
    // Four whole vectors [j, j + 4N), all computed before put(v, at) stores any (or
    // put_pair(v, w, at) stores a pair, with kNotNaN: as one store where the row starts
    // at a cache line, else as two, as put does).
    const bool pairs_aligned = reinterpret_cast<std::uintptr_t>(to) % kCacheLineBytes == 0;
    auto four = [&](std::size_t j, auto&& put, auto&& put_pair) SMAX_INLINE_LAMBDA {
      const auto v0 = value(j, N, std::false_type());
      const auto v1 = value(j + N, N, std::false_type());
      const auto v2 = value(j + 2 * N, N, std::false_type());
      const auto v3 = value(j + 3 * N, N, std::false_type());
      if constexpr (kNotNaN) {
        put_pair(v0, v1, j);
        put_pair(v2, v3, j + 2 * N);
      } else {
        put(v0, j);
        put(v1, j + N);
        put(v2, j + 2 * N);
        put(v3, j + 3 * N);
      }
    };
    if constexpr (std::is_same_v<L, float>) {
      if (stream && reinterpret_cast<std::uintptr_t>(to) % sizeof(T) == 0) {
        // The lines at the ends of a streamed row that it covers only in part (stored
        // through the cache: WalkLineGroups), a few rows ahead: each such store
        // otherwise waits for its line from memory, likely holding back the streaming
        // stores behind it. f32 [32, 81, 8732] along axis 1 (rows 48 bytes past a line
        // apart) took 1.27x the time an element of 8720's whole lines; the fetches made
        // it 1.04x (one thread) and 1.10x (two) faster (docs/PERFORMANCE.md, forty-second
        // session). (Panels with a lead have such lines only at the ends of y's rows.)
        if (ahead != nullptr) {
          T* ahead_row = y.row(i - fetch_rows);
          const std::size_t ahead_begin = owned.begin(ahead_row);
          FetchPartLinesForWriting(ahead_row + ahead_begin, owned.end(ahead_row, width) - ahead_begin);
        }
        WalkLineGroups<4>(
            d, to, row_width,
            [&](std::size_t j) SMAX_INLINE_LAMBDA {
              four(
                  j, [&](hn::Vec<D> v, std::size_t at) SMAX_INLINE_LAMBDA { StreamF32<kNotNaN>(d, v, to + at); },
                  [&](auto v, auto w, std::size_t at)
                      SMAX_INLINE_LAMBDA { StoreF32x2NotNaN</*kStream=*/true>(d, v, w, to + at); });
            },
            [&](std::size_t j) SMAX_INLINE_LAMBDA { StreamF32<kNotNaN>(d, value(j, N, std::false_type()), to + j); },
            [&](std::size_t j, std::size_t count) SMAX_INLINE_LAMBDA {
              Store<T, true>(d, value(j, count, std::true_type()), to + j, count);
            });
        continue;
      }
    }
    Walk<4>(
        d, row_width, false,
        [&](std::size_t j) SMAX_INLINE_LAMBDA {
          four(
              j, [&](hn::Vec<D> v, std::size_t at) SMAX_INLINE_LAMBDA { Store<T, false, kNotNaN>(d, v, to + at, N); },
              [&](auto v, auto w, std::size_t at) SMAX_INLINE_LAMBDA {
                if (pairs_aligned) {
                  StoreF32x2NotNaN</*kStream=*/false>(d, v, w, to + at);
                } else {
                  Store<T, false, kNotNaN>(d, v, to + at, N);
                  Store<T, false, kNotNaN>(d, w, to + at + N, N);
                }
              });
        },
        [&](std::size_t j) SMAX_INLINE_LAMBDA {
          Store<T, false, kNotNaN>(d, value(j, N, std::false_type()), to + j, N);
        },
        [&](std::size_t j, std::size_t count) SMAX_INLINE_LAMBDA {
          Store<T, true>(d, value(j, count, std::true_type()), to + j, count);
        });
  }
  if (stream) hwy::FlushStream();
}

// Gives the columns whose factor is NaN (Finish: a NaN or +inf in them, or all -inf
// under AllMasked::nan) that NaN in every row the panel writes. The output pass
// multiplies their terms or exps by it, and where both are NaN (+inf - +inf, a NaN
// input) the product's NaN is the operand the compiler happened to put first, which
// can differ between the vectors of one pass: the same input then gave NaNs of either
// sign depending on where its column lay in the panel.
template <class D, class T, class L = hn::TFromD<D>>
void SetNaNColumns(D d, Strided<T> y, std::size_t width, std::size_t length, const ColumnState<L>& s,
                   OwnedColumns owned) {
  for (std::size_t j = 0; j < width; ++j) {
    if (!std::isnan(s.factor[j])) continue;
    const auto nan = hn::Set(d, s.factor[j]);
    for (std::size_t i = 0; i < length; ++i) {
      T* row = y.row(i);
      if (j >= owned.begin(row) && j < owned.end(row, width)) Store<T, true>(d, nan, row + j, 1);
    }
  }
}

// OutputPassT, kNotNaN for bf16 outputs where no column's factor is NaN (only a
// poisoned or, where asked, all -inf column's is: Finish), since rounding a NaN
// without its own case could turn it into infinity or zero. bf16 softmax along axis
// 0 of 4096 x 4096 1.03-1.05x, along axis 1 of [8, 256, 3136] 1.01-1.03x, panels in
// cache on one thread 1.05x; pairs stored as one where rows do not start at a line
// ([8, 100, 1000], 2000-byte rows) ran 0.95-0.98x from memory, as two 0.99-1.04x
// (Intel Xeon VM, docs/PERFORMANCE.md, twenty-fourth session). Then, where a factor
// is NaN, SetNaNColumns (log_softmax subtracts its factor: its NaN's operand order is
// fixed).
template <bool kUnitT, OutputOf kOf, class D, class T, class S, class L = hn::TFromD<D>>
void OutputPass(D d, Strided<const S> src, Strided<T> y, std::size_t width, std::size_t length,
                const InverseTemperatureLanes<D>& t, const ColumnState<L>& s, OwnedColumns owned, bool stream) {
  // (The lanes past the panel's width, in its last vector, hold a factor of their
  // own: the max of their -inf fill, NaN under AllMasked::nan.)
  bool any_nan = false;
  for (std::size_t j = 0; j < width; j += hn::Lanes(d)) {
    const auto nan = hn::And(hn::FirstN(d, width - j), hn::IsNaN(hn::LoadU(d, s.factor + j)));
    any_nan = any_nan || !hn::AllFalse(d, nan);
  }
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (!any_nan) return OutputPassT<kUnitT, kOf, true>(d, src, y, width, length, t, s, owned, stream);
  }
  OutputPassT<kUnitT, kOf, false>(d, src, y, width, length, t, s, owned, stream);
  if constexpr (kOf != OutputOf::log) {
    if (any_nan) SetNaNColumns(d, y, width, length, s, owned);
  }
}

// Softmax's output from x (online panels, 16-bit outputs): the folded exp where the
// panel allows it.
template <bool kUnitT, class D, class T, class L = hn::TFromD<D>>
void ExpOutputPass(D d, Strided<const T> x, Strided<T> y, std::size_t width, std::size_t length,
                   const InverseTemperatureLanes<D>& t, const ColumnState<L>& s, OwnedColumns owned, bool stream) {
  switch (OutputExp<kUnitT, T>(d, width, t, s)) {
    case OutputOf::table_exp:
      OutputPass<kUnitT, OutputOf::table_exp>(d, x, y, width, length, t, s, owned, stream);
      break;
    case OutputOf::folded_exp:
      OutputPass<kUnitT, OutputOf::folded_exp>(d, x, y, width, length, t, s, owned, stream);
      break;
    default:
      OutputPass<kUnitT, OutputOf::exp>(d, x, y, width, length, t, s, owned, stream);
  }
}

// The passes over one panel (see f32_columns.hpp). Softmax keeps its exp terms
// between passes 2 and 4: in y where y holds the lanes' type exactly (f32, f64), is not
// streamed and does not crowd x's L1 sets, else in the thread's scratch panel
// (ColumnState::terms; state_for decides).
template <bool kUnitT, class D, class T, class L = hn::TFromD<D>>
void PanelT(D d, const ColumnPanel<T>& p, const ColumnParams& params, const InverseTemperature& it,
            const ColumnState<L>& s) {
  const InverseTemperatureLanes<D> t(d, it);
  const Strided<const T> x{p.x, p.x_stride};
  const Strided<T> y{p.y, p.y_stride};
  const bool softmax = params.op == Op::softmax;
  const bool stream = params.stores == Stores::streaming;  // float-lane outputs (OutputPass)
  const OwnedColumns owned{p.lead, p.trims_end};
  if constexpr (std::is_same_v<L, float>) {
    if (params.online) {
      if (softmax) {
        OnlineStatsPass<kUnitT, false>(x, p.width, p.length, t, params.inv_t, s);
      } else {
        OnlineStatsPass<kUnitT, true>(x, p.width, p.length, t, params.inv_t, s);
      }
      Finish(d, p.y, p.width, params, s);
      if (softmax) {
        ExpOutputPass<kUnitT>(d, x, y, p.width, p.length, t, s, owned, stream);
      } else if (params.op == Op::log_softmax) {
        OutputPass<kUnitT, OutputOf::log>(d, x, y, p.width, p.length, t, s, owned, stream);
      }
      return;
    }
  }
  MaxPass(d, x, p.width, p.length, s);
  // Softmax's terms wait in the scratch panel (16-bit outputs; f32 outputs that
  // stream), else in y where y holds L exactly (f32, f64) and the panel's rows are its
  // own (no lead, no trimmed end: ColumnPanel); outputs without either compute each
  // exp again in the output pass.
  const bool keeps_terms =
      softmax && (s.terms != nullptr || (std::is_same_v<T, L> && p.lead == 0 && !p.trims_end));
  const Strided<L> terms = s.terms != nullptr ? Strided<L>{s.terms, s.terms_stride}
                                              : Strided<L>{reinterpret_cast<L*>(p.y), p.y_stride};
  const Strided<const T> next{p.next_x, p.x_stride};
  if (keeps_terms) {
    SumPass<kUnitT, true, false>(d, x, terms, p.width, p.length, t, s, next, p.next_width);
  } else if (softmax) {
    SumPass<kUnitT, false, false>(d, x, terms, p.width, p.length, t, s, next, p.next_width);
  } else {
    SumPass<kUnitT, false, true>(d, x, terms, p.width, p.length, t, s, next, p.next_width);
  }
  Finish(d, p.y, p.width, params, s);
  if (keeps_terms) {
    OutputPass<kUnitT, OutputOf::terms>(d, Strided<const L>{terms.p, terms.stride}, y, p.width, p.length, t, s, owned,
                                        stream && s.terms != nullptr);
  } else if (softmax) {
    ExpOutputPass<kUnitT>(d, x, y, p.width, p.length, t, s, owned, stream);
  } else if (params.op == Op::log_softmax) {
    OutputPass<kUnitT, OutputOf::log>(d, x, y, p.width, p.length, t, s, owned, stream);
  }
}

template <class D, class T, class L = hn::TFromD<D>>
void AnyPanel(D d, const ColumnPanel<T>& p, const ColumnParams& params, const ColumnState<L>& s) {
  const InverseTemperature it = InverseTemperature::of(params.inv_t);
  if (it.unit) {
    PanelT<true>(d, p, params, it, s);
  } else {
    PanelT<false>(d, p, params, it, s);
  }
}

}  // namespace columns

void ColumnsF32(const ColumnPanel<float>& p, const ColumnParams& params,
                const columns_detail::ColumnState<float>& s) {
  columns::AnyPanel(columns::DF(), p, params, s);
}
void ColumnsF16(const ColumnPanel<half>& p, const ColumnParams& params, const columns_detail::ColumnState<float>& s) {
  columns::AnyPanel(columns::DF(), p, params, s);
}
void ColumnsBF16(const ColumnPanel<bfloat16>& p, const ColumnParams& params,
                 const columns_detail::ColumnState<float>& s) {
  columns::AnyPanel(columns::DF(), p, params, s);
}
void ColumnsF64(const ColumnPanel<double>& p, const ColumnParams& params,
                const columns_detail::ColumnState<double>& s) {
  columns::AnyPanel(columns::D64(), p, params, s);
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::cpu::simd {
namespace {

// This thread's column state for lanes of L, grown to hold `width` columns padded to
// whole vectors of any target (at most 256 bytes).
template <class L>
columns_detail::ColumnState<L> state_for(std::size_t width) {
  thread_local hwy::AlignedFreeUniquePtr<L[]> lanes;
  thread_local hwy::AlignedFreeUniquePtr<double[]> doubles;
  thread_local std::size_t capacity = 0;
  const std::size_t padded = (width + 63) / 64 * 64;
  if (padded > capacity) {
    lanes = hwy::AllocateAligned<L>(5 * padded);
    doubles = hwy::AllocateAligned<double>(3 * padded);
    capacity = padded;
  }
  return {lanes.get(),   lanes.get() + capacity,   lanes.get() + 2 * capacity,
          doubles.get(), doubles.get() + capacity, doubles.get() + 2 * capacity,
          lanes.get() + 3 * capacity, lanes.get() + 4 * capacity};
}

// L1 as the column passes meet it: 64 sets of lines (the 32 KiB 8-way L1D of Zen 4
// and Skylake, the 48 KiB 12-way one of Ice Lake and later).
constexpr std::size_t kL1Sets = 64;
constexpr std::size_t kL1LineBytes = detail::kCacheLineBytes;

// How many of a block's lines (kColumnBlockRows rows of a panel, at one column) fall
// in each L1 set, each line counted in its set and the next (the next column vector's,
// which the prefetcher brings).
using SetLines = std::array<std::uint8_t, kL1Sets>;
SetLines block_lines(const void* p, std::ptrdiff_t stride_bytes) {
  SetLines lines{};
  for (std::size_t k = 0; k < kColumnBlockRows; ++k) {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(p) + k * static_cast<std::uintptr_t>(stride_bytes);
    const std::size_t set = address / kL1LineBytes % kL1Sets;
    ++lines[set];
    ++lines[(set + 1) % kL1Sets];
  }
  return lines;
}
// The most lines that a block of a panel read and one of a panel written put together
// into one L1 set holding lines of both: where they crowd a set, the lines stored
// evict those loaded and fetched. Rows a multiple of 4 KiB apart put a whole block in
// one set: f32 softmax panels of 81 x 1024 along axis 0 whose terms wait in y ran 1.75x
// as slow with y at x's offset in a page as with y 2 KiB further, and 81 x 512 and 81 x
// 1536 (8 lines to a set) 1.1-1.3x as slow (one thread; docs/PERFORMANCE.md,
// thirty-ninth session).
std::size_t lines_sharing_a_set(const SetLines& read, const SetLines& written) {
  std::size_t most = 0;
  for (std::size_t set = 0; set < kL1Sets; ++set) {
    if (read[set] > 0 && written[set] > 0) most = std::max<std::size_t>(most, read[set] + written[set]);
  }
  return most;
}
// The most that ran at full speed: f32 rows of 256 columns (1 KiB apart, y at x's
// offset in a page) put 4 lines in each of 8 sets.
constexpr std::size_t kMostSharedLines = 4;

// Whether a block of x's rows and one of y's crowd an L1 set. Moving x and y by the
// same whole lines rotates both blocks' sets alike, so the answer depends only on each
// address's offset in its line, the lines from x's to y's modulo the sets, and the
// strides modulo the span of the sets. It is kept for the key last asked: the check
// costs about 85 ns, a panel of 81 x 64 f32 elements about 2 us, and the panels of a
// call whose y moves with x (lines of columns apart) all ask the same key.
bool crowds_l1_sets(const void* x, std::ptrdiff_t x_stride_bytes, const void* y, std::ptrdiff_t y_stride_bytes) {
  constexpr std::uintptr_t kSpan = kL1Sets * kL1LineBytes;
  const auto x_address = reinterpret_cast<std::uintptr_t>(x);
  const auto y_address = reinterpret_cast<std::uintptr_t>(y);
  const std::array<std::uintptr_t, 5> key{x_address % kL1LineBytes, y_address % kL1LineBytes,
                                          (y_address / kL1LineBytes - x_address / kL1LineBytes) % kL1Sets,
                                          static_cast<std::uintptr_t>(x_stride_bytes) % kSpan,
                                          static_cast<std::uintptr_t>(y_stride_bytes) % kSpan};
  thread_local std::array<std::uintptr_t, 5> last_key{kSpan, kSpan, kSpan, kSpan, kSpan};  // no key matches
  thread_local bool last_crowds = false;
  if (key != last_key) {
    last_crowds = lines_sharing_a_set(block_lines(x, x_stride_bytes), block_lines(y, y_stride_bytes)) > kMostSharedLines;
    last_key = key;
  }
  return last_crowds;
}

// state_for, with the scratch panel of ColumnState::terms where a three-pass softmax
// panel keeps its exp terms apart from y: 16-bit outputs (which cannot hold them), f32
// outputs that stream, and f32 and f64 outputs whose rows crowd L1 sets with x's
// (crowds_l1_sets). Rows of whole cache lines, this thread's, grown to the
// largest panel met and kept. Without it (it cannot grow) f32 and f64 terms wait in y,
// stored through the cache, and 16-bit outputs compute each exp again. (The planner's
// leaves_room_to_fetch counts on this rule.)
template <class T, class L = std::conditional_t<std::is_same_v<T, double>, double, float>>
columns_detail::ColumnState<L> state_for(const ColumnPanel<T>& panel, const ColumnParams& params) {
  columns_detail::ColumnState<L> s = state_for<L>(panel.width);
  if (params.online || params.op != Op::softmax) return s;
  const bool streams = !std::is_same_v<T, double> && params.stores == Stores::streaming;
  constexpr auto kBytes = static_cast<std::ptrdiff_t>(sizeof(T));
  const bool terms_in_y = std::is_same_v<T, L> && !streams &&
                          !crowds_l1_sets(panel.x, panel.x_stride * kBytes, panel.y, panel.y_stride * kBytes);
  if (terms_in_y) return s;
  thread_local hwy::AlignedFreeUniquePtr<L[]> terms;
  thread_local std::size_t capacity = 0;
  constexpr std::size_t kLine = kL1LineBytes / sizeof(L);
  const std::size_t stride = (panel.width + kLine - 1) / kLine * kLine;
  const std::size_t size = stride * panel.length;
  if (size > capacity) {
    terms = hwy::AllocateAligned<L>(size);
    capacity = terms != nullptr ? size : 0;
  }
  if (terms != nullptr) {
    s.terms = terms.get();
    s.terms_stride = static_cast<std::ptrdiff_t>(stride);
  }
  return s;
}

}  // namespace

HWY_EXPORT(ColumnsF32);
HWY_EXPORT(ColumnsF16);
HWY_EXPORT(ColumnsBF16);
HWY_EXPORT(ColumnsF64);

void columns(const ColumnPanel<float>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsF32)(panel, params, state_for(panel, params));
}
void columns(const ColumnPanel<half>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsF16)(panel, params, state_for(panel, params));
}
void columns(const ColumnPanel<bfloat16>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsBF16)(panel, params, state_for(panel, params));
}
void columns(const ColumnPanel<double>& panel, const ColumnParams& params) {
  HWY_DYNAMIC_DISPATCH(ColumnsF64)(panel, params, state_for(panel, params));
}

}  // namespace smax::cpu::simd
#endif  // HWY_ONCE
