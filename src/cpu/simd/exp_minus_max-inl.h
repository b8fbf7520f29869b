// exp(x - m) for the elements x of a row with max m, without computing x - m exactly.
//
// Why: x - m rounds in float (by up to half an ulp of m, which the exp turns into a
// relative error of |m| * 2^-24), so exp-inl.h's callers carry that rounding error
// (argument-inl.h: TwoSum, 6 operations a vector). Here the subtraction goes into
// exp's own range reduction instead. With m = k * ln2 + delta (k an integer, |delta|
// <= ln2 / 2, both found once per row):
//   s = x - m in float: it only picks n, marks the max (s == 0) and finds the
//       results below the cutoff; its rounding error does not reach the result;
//   n = round(s * log2(e)),
//   r = x - (n + k) * ln2_hi - (n + k) * ln2_lo - delta,
//   exp(x - m) = 2^n * exp(r),   |r| <= 0.35, exp(r) - 1 by exp-inl.h's polynomial.
// The first step of r is exp(x)'s usual Cody-Waite step: (n + k) * ln2_hi has at most
// 24 bits, and x lies within ln2 of it, so the difference is exact or rounds by at
// most 2^-25 (x near 0); the later steps round by at most 2^-25 and 2^-26 each, and
// delta (a double) by 2^-26 as a float: at most 2.5 ulp in all by this count, 1.25
// measured (tests/unit/simd_exp_minus_max_test.cpp), where the kernels with TwoSum
// reach 1.01. At x == m every step is exact but the last two, whose errors
// stay below 2^-25, so exp(0) is exactly 1 (and the log ops can count the terms at
// the max exactly).
//
// Domain: ln2_hi has 9 significant bits, so (n + k) * ln2_hi is exact for |n + k| <
// 2^15: RowShift::fits asks |m| <= 16384, which covers every x within 104 of the max
// (those further below give 0, whatever their size, -inf included). Results below
// FLT_MIN (s < kExpCutoff) flush to 0, as exp-inl.h's do. At T != 1 the row kernels
// pass x / T as a float and its rest, x_lo, and the max in the same units (m rounded,
// and exact in double for the split): x_lo joins r through delta. Targets with FMA
// only: without it, (n + k) * ln2_lo rounds, by far more than 2^-26 when k is large.
//
// The first part (once per translation unit) splits a row's max; the second is
// compiled once per Highway target (the -inl.h convention).
#ifndef SMAX_CPU_SIMD_EXP_MINUS_MAX_ONCE
#define SMAX_CPU_SIMD_EXP_MINUS_MAX_ONCE

#include <cmath>
#include <cstdint>

#include "cpu/simd/exp-inl.h"  // its first part: kRowLn2Hi, kRowLn2Lo, kPow2Over32

namespace smax::cpu::simd {

// A row's max as m = k * (kRowLn2Hi + kRowLn2Lo) + delta.
struct MaxSplit {
  float m = 0;
  float k = 0;      // an integer, |k| < 2^15
  float delta = 0;  // rounded from the exact double difference, |delta| <= 0.35
  // The exps come out exp(delta_exact - delta) times too large below the max (at the
  // max they are exactly 1): a factor within 2^-26 of 1, common to the row, which a
  // sum of the terms below the max takes back by multiplying with this.
  double below_max_correction = 1;

  // Whether a row with this (finite) max can take exp_minus_max-inl.h's exp.
  static bool fits(float m) { return std::abs(m) <= 16384.0f; }

  // `exact`: the max the exps are taken against, where m is only its float rounding
  // (a scaled max, hi m + lo m for 1/T = hi + lo); by default m itself.
  static MaxSplit of(float m, double exact) {
    MaxSplit s;
    s.m = m;
    s.k = std::nearbyint(static_cast<float>(static_cast<double>(m) * 1.4426950408889634));
    // k * (hi + lo) has at most 15 + 33 bits, and m lies within ln2 of it: exact.
    const double c = static_cast<double>(s.k) * (static_cast<double>(kRowLn2Hi) + static_cast<double>(kRowLn2Lo));
    const double delta = exact - c;
    s.delta = static_cast<float>(delta);
    // exp(e) for |e| <= 2^-26 (delta's rounding): 1 + e + e^2 / 2 is exact to double's
    // rounding, without a libm call per row.
    const double e = static_cast<double>(s.delta) - delta;
    s.below_max_correction = 1.0 + (e + 0.5 * e * e);
    return s;
  }
  static MaxSplit of(float m) { return of(m, m); }
};

// A row's max as m = k * (kRowLn2Hi + kRowLn2Lo) / 32 + delta, for ExpMinusMaxTable.
struct TableSplit {
  float m = 0;
  float shift_b = 0;  // kRoundingShift32 + b / 32, b = k mod 32
  float shift_a = 0;  // kRoundingShift32 - a, a = (k - b) / 32
  int b = 0;
  float delta = 0;  // rounded from the exact double difference, |delta| <= ln2 / 64
  double below_max_correction = 1;  // as MaxSplit's

  // (n + k) / 32 * kRowLn2Hi must be exact: |n + k| < 2^15 for every n from 104 below
  // the max (n >= -4802; m may also be a guess that x exceeds by up to 64, n <=
  // 2955), so |k| <= 27965.
  static bool fits(float m) { return std::abs(m) <= 600.0f; }

  // delta for a reduction that takes ln2 as the one float kLn2Float (DirectTableExp's
  // coarse form): m - k ln2_float / 32, exact in double, rounded once. With the split
  // ln2's delta instead, the two ln2 would differ by 1.9e-9 times (n + k) / 32, up to
  // 2e-6 in r for maxima near 600.
  float coarse_delta() const {
    const double k = 32.0 * (static_cast<double>(kRoundingShift32) - static_cast<double>(shift_a)) + b;
    return static_cast<float>(static_cast<double>(m) - k * static_cast<double>(kLn2Float) / 32);
  }

  static TableSplit of(float m) { return of(m, m); }
  static TableSplit of(float m, double exact) {  // `exact` as MaxSplit::of's
    TableSplit s;
    s.m = m;
    const double k = std::nearbyint(static_cast<double>(m) * (32 * 1.4426950408889634));
    const auto ki = static_cast<std::int32_t>(k);
    s.b = static_cast<int>(((ki % 32) + 32) % 32);
    const std::int32_t a = (ki - s.b) / 32;
    s.shift_b = kRoundingShift32 + static_cast<float>(s.b) / 32;
    s.shift_a = kRoundingShift32 - static_cast<float>(a);
    // k * (hi + lo) / 32 has at most 15 + 33 bits, and m lies within ln2 / 64 of it.
    const double c = k * (static_cast<double>(kRowLn2Hi) + static_cast<double>(kRowLn2Lo)) / 32;
    const double delta = exact - c;
    s.delta = static_cast<float>(delta);
    const double e = static_cast<double>(s.delta) - delta;
    s.below_max_correction = 1.0 + (e + 0.5 * e * e);
    return s;
  }
};

// The table form's split with t taken from x directly: t = x log2(e) + c, c =
// shift_b - m log2(e) rounded to a float (a multiple of 1/32, within 1/64 of it), one
// multiply-add where TableSplit's t needs s = x - m first: one operation and one step
// fewer on the chain that bounds the exp pass (AMD Zen 5, a scratch loop: 7.0 against
// 7.7 cycles a vector). c's rounding moves n by at most one from round(32 (x - m)
// log2(e)), so |r| <= ln2 / 32, where the cubic's error r^4 / 24 stays below 1e-8: the
// result is still exp(x - m), as accurate, and exactly 1 at the max, where c's error
// below 1/64 leaves n = 0. Maxima whose m log2(e) lies exactly halfway (or nearly) are
// not `exact_at_max` and take TableExp. The flush is decided on x against `threshold`
// (no s to compare), 2^-10 above m + cutoff so that its rounding keeps no exp below
// the cutoff.
struct DirectTableSplit {
  TableSplit table;       // k = 32a + b, shift_a, delta
  float rounding = 0;     // c
  float threshold = 0;    // x below it gives 0 (just above m + the cutoff)
  bool exact_at_max = false;

  static DirectTableSplit of(float m, float cutoff, double exact) {  // `exact` as MaxSplit::of's
    constexpr double kLog2e = 1.44269502162933349609375;  // the float the kernels multiply by
    DirectTableSplit s;
    s.table = TableSplit::of(m, exact);
    const double shift_b = s.table.shift_b;
    const double product = static_cast<double>(m) * kLog2e;  // exact: 24 by 24 bits
    s.rounding = static_cast<float>(shift_b - product);
    // m log2(e) + c - shift_b: exactly +-1/64 at a tie; the sum rounds by 2^-43 at most.
    const double error = (static_cast<double>(s.rounding) - shift_b) + product;
    s.exact_at_max = std::abs(error) < 1.0 / 64 - 0x1p-40;
    // Rounded to float by at most 2^-15 (|m + cutoff| < 1024): still above m + cutoff.
    s.threshold = static_cast<float>(static_cast<double>(m) + static_cast<double>(cutoff) + 0x1p-10);
    return s;
  }
};

}  // namespace smax::cpu::simd
#endif  // SMAX_CPU_SIMD_EXP_MINUS_MAX_ONCE

#if defined(SMAX_CPU_SIMD_EXP_MINUS_MAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_EXP_MINUS_MAX_INL_H_
#undef SMAX_CPU_SIMD_EXP_MINUS_MAX_INL_H_
#else
#define SMAX_CPU_SIMD_EXP_MINUS_MAX_INL_H_
#endif

#include <hwy/highway.h>

#include "cpu/simd/exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// MaxSplit in lanes: one max for every lane (a row), or one per lane (columns).
template <class D>
struct MaxSplitLanes {
  using V = hn::Vec<D>;
  V m;
  V shift_minus_k;  // t - shift_minus_k = n + k (exact: integers below 2^24)
  V delta;

  MaxSplitLanes(D d, const MaxSplit& s)
      : m(hn::Set(d, s.m)), shift_minus_k(hn::Set(d, kRoundingShift - s.k)), delta(hn::Set(d, s.delta)) {}

  // Each lane's max m (|m| <= 16384) split in lanes: k = round(m log2(e)) (the float
  // product may round k the other way at a half, leaving |delta| a little above ln2 / 2,
  // which the exp's reduction absorbs), delta = m - k ln2_hi - k ln2_lo rounded once,
  // as MaxSplit::of does (the first step is exact).
  static MaxSplitLanes Of(D d, V m) {
    const V shift = hn::Set(d, kRoundingShift);
    const V k = hn::Sub(hn::MulAdd(m, hn::Set(d, 1.44269502162933349609375f), shift), shift);
    const V delta = hn::NegMulAdd(k, hn::Set(d, kRowLn2Lo), hn::NegMulAdd(k, hn::Set(d, kRowLn2Hi), m));
    return MaxSplitLanes(m, hn::Sub(shift, k), delta);
  }
  static MaxSplitLanes PerLane(D d, V m) { return Of(d, m); }  // TableLanes's name

  // From the parts of an Of kept in memory (column panels keep one per column).
  MaxSplitLanes(V m_lanes, V shift_minus_k_lanes, V delta_lanes)
      : m(m_lanes), shift_minus_k(shift_minus_k_lanes), delta(delta_lanes) {}
};

// What ExpMinusMax does below float's normal range.
enum class ExpRange {
  flush,     // 0 below FLT_MIN (s < kExpCutoff)
  gradual,   // float's subnormals kept, down to exp(-104) (bf16 outputs: their subnormals are float's)
  times_2_64  // exp(x - m) * 2^64, never subnormal; 0 below exp(-104) * 2^64. For softmax,
              // whose scaling by 1 / sum of these removes the 2^64: bf16 keeps its
              // subnormal outputs without the gradual steps
};

// The power of two by which kRange's results are scaled (times_2_64's 2^64).
template <ExpRange kRange>
inline constexpr int kRangeScaleLog2 = kRange == ExpRange::times_2_64 ? 64 : 0;

// The cutoff below which kRange's exps are 0 (flushed: FLT_MIN; times 2^64: exp(-104)).
template <ExpRange kRange>
inline constexpr float kRangeCutoff = kRange == ExpRange::flush ? kExpCutoff : -104.0f;

// The reduction: s = x - m (rounded: 0 exactly at the max), t = n + kRoundingShift,
// n + k, and returns r (delta: c.delta, or less the rest of x, ExpMinusMax's x_lo).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ReducedMinusMax(D d, const MaxSplitLanes<D>& c, V x, V delta, V& s, V& t, V& n_plus_k) {
  s = hn::Sub(x, c.m);
  t = hn::MulAdd(s, hn::Set(d, 1.44269502162933349609375f), hn::Set(d, kRoundingShift));  // log2(e)
  n_plus_k = hn::Sub(t, c.shift_minus_k);
  const V r = hn::NegMulAdd(n_plus_k, hn::Set(d, kRowLn2Hi), x);
  return hn::Sub(hn::NegMulAdd(n_plus_k, hn::Set(d, kRowLn2Lo), r), delta);
}

// s = x - m (rounded: 0 exactly at the max) and exp(x + x_lo - m), below the normal
// range as kRange says. x_lo, a rest of x far below its ulp (a scaled x's rounding
// error), joins r through delta: exact but for one rounding of |delta - x_lo|
// <= 0.35.
template <ExpRange kRange = ExpRange::flush, class D, class V = hn::Vec<D>>
HWY_INLINE V ExpMinusMax(D d, const MaxSplitLanes<D>& c, V x, V x_lo, V& s) {
  const hn::RebindToUnsigned<D> du;
  V t, n_plus_k;
  const V r = ReducedMinusMax(d, c, x, hn::Sub(c.delta, x_lo), s, t, n_plus_k);
  if constexpr (kRange != ExpRange::gradual && kHasScalef<V>) {
    constexpr bool kFlush = kRange == ExpRange::flush;
    const V power = hn::Sub(t, hn::Set(d, kFlush ? kRoundingShift : kRoundingShift - 64.0f));  // n (+ 64)
    return ScalefWhereNotBelow(ExpPoly(d, r), power, s, hn::Set(d, kRangeCutoff<kRange>));
  }
  const V q = ExpM1Poly(d, r);
  // 2^n from t's low bits (exp-inl.h); lanes where n + bias leaves the exponent field
  // wrap, and are zeroed.
  if constexpr (kRange == ExpRange::flush) {
    const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(du, t), hn::Set(du, 127u))));
    return hn::IfThenZeroElse(hn::Lt(s, hn::Set(d, kExpCutoff)), hn::MulAdd(q, scale, scale));
  } else if constexpr (kRange == ExpRange::times_2_64) {
    const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(du, t), hn::Set(du, 127u + 64u))));
    return hn::IfThenZeroElse(hn::Lt(s, hn::Set(d, -104.0f)), hn::MulAdd(q, scale, scale));
  } else {
    const auto below_normal = hn::Lt(t, hn::Set(d, kRoundingShift - 125.0f));  // n < -125
    return ScaleGradual(d, q, hn::BitCast(du, t), below_normal, hn::Lt(s, hn::Set(d, -104.0f)));
  }
}

template <ExpRange kRange = ExpRange::flush, class D, class V = hn::Vec<D>>
HWY_INLINE V ExpMinusMax(D d, const MaxSplitLanes<D>& c, V x, V& s) {
  return ExpMinusMax<kRange>(d, c, x, hn::Zero(d), s);
}


#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// r = x - c ln2_hi - (c ln2_lo + delta), c = (n + k) / 32: the first product is
// exact, and the two sums run side by side, one multiply-add shorter on the exp's
// chain than x - c ln2_hi - c ln2_lo - delta in turn (AMD Zen 5: 6.9 cycles a vector
// against 7.6, the pass being bound by that chain). The table's domain keeps |c
// ln2_lo| <= 0.22, so rounding the second sum costs 0.07 ulp (1.08 measured); the
// polynomial's n + k reach 2^15, where it cost 3.5 ulp, so FoldedExp keeps the sums in
// turn. At the max (x = m, n = 0) both sums lie within 2^-30 of delta: exactly 1 still.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V TableReduced(D d, V x, V n_plus_k, V delta) {
  const V high = hn::NegMulAdd(n_plus_k, hn::Set(d, kRowLn2Hi), x);
  return hn::Sub(high, hn::MulAdd(n_plus_k, hn::Set(d, kRowLn2Lo), delta));
}

// exp(x - m) through the table of 2^(j / 32) (exp-inl.h's table forms): with m = k ln2
// / 32 + delta (TableSplit),
//   n = round(32 (x - m) log2(e)),
//   r = x - (n + k) / 32 * ln2_hi - ((n + k) / 32 * ln2_lo + delta),   |r| <= ln2 / 64,
//   exp(x - m) = 2^floor((n + b) / 32) * 2^((j - b) / 32) * exp(r),  j = (n + b) mod 32.
// The rounding sum t = shift_b + (n + b) / 32 holds j in its low bits (the lookup's
// index) and gives the power (t - kRoundingShift32) and (n + k) / 32 (t - shift_a)
// exactly: 14 operations a vector, as ExpMinusMax, on a shorter chain (the cubic, and
// TableReduced). 1.08 ulp measured (tests/unit/simd_exp_minus_max_test.cpp). At the max n =
// 0, j = b, the entry is 1 and r lies within 2^-30 of 0: exactly 1.
template <class D>
struct TableLanes {
  using V = hn::Vec<D>;
  V m, shift_b, shift_a, delta;
  V table_lo, table_hi;  // 2^((j - b) / 32) for j = 0 .. 15 and 16 .. 31

  TableLanes(D d, const TableSplit& s)
      : m(hn::Set(d, s.m)),
        shift_b(hn::Set(d, s.shift_b)),
        shift_a(hn::Set(d, s.shift_a)),
        delta(hn::Set(d, s.delta)),
        table_lo(hn::LoadU(d, kPow2Over32 + 32 - s.b)),
        table_hi(hn::LoadU(d, kPow2Over32 + 48 - s.b)) {}

  // One max per lane (column panels): b = 0 in every lane (the table unrotated, shift_b
  // kRoundingShift32), so shift_a = kRoundingShift32 - k / 32 carries each lane's k.
  TableLanes(D d, V m_lanes, V shift_a_lanes, V delta_lanes)
      : m(m_lanes),
        shift_b(hn::Set(d, kRoundingShift32)),
        shift_a(shift_a_lanes),
        delta(delta_lanes),
        table_lo(hn::LoadU(d, kPow2Over32 + 32)),
        table_hi(hn::LoadU(d, kPow2Over32 + 48)) {}

  // TableSplit::of in lanes (|m| <= 600): k = round(32 m log2(e)) in each lane (the
  // float product may round k the other way at a half, leaving |delta| a little above
  // ln2 / 64, which the cubic absorbs), delta = m - k / 32 ln2_hi - k / 32 ln2_lo
  // rounded once (the first step is exact, as in MaxSplitLanes::Of).
  static TableLanes PerLane(D d, V m) {
    const V shift = hn::Set(d, kRoundingShift32);
    const V k = hn::Sub(hn::MulAdd(m, hn::Set(d, 1.44269502162933349609375f), shift), shift);  // k / 32
    const V delta = hn::NegMulAdd(k, hn::Set(d, kRowLn2Lo), hn::NegMulAdd(k, hn::Set(d, kRowLn2Hi), m));
    return TableLanes(d, m, hn::Sub(shift, k), delta);
  }
};

// exp(x + x_lo - m), x_lo as ExpMinusMax's.
template <ExpRange kRange, class D, class V = hn::Vec<D>>
HWY_INLINE V ExpMinusMaxTable(D d, const TableLanes<D>& c, V x, V x_lo, V& s) {
  static_assert(kRange != ExpRange::gradual && kHasScalef<V>);
  s = hn::Sub(x, c.m);
  const V t = hn::MulAdd(s, hn::Set(d, 1.44269502162933349609375f), c.shift_b);  // log2(e)
  const V power = hn::Sub(t, hn::Set(d, kRoundingShift32 - static_cast<float>(kRangeScaleLog2<kRange>)));
  const V n_plus_k = hn::Sub(t, c.shift_a);  // (n + k) / 32
  const V r = TableReduced(d, x, n_plus_k, hn::Sub(c.delta, x_lo));
  return ScalefWhereNotBelow(TableEntryTimesExp(d, c.table_lo, c.table_hi, t, r), power, s,
                             hn::Set(d, kRangeCutoff<kRange>));
}

template <ExpRange kRange, class D, class V = hn::Vec<D>>
HWY_INLINE V ExpMinusMaxTable(D d, const TableLanes<D>& c, V x, V& s) {
  return ExpMinusMaxTable<kRange>(d, c, x, hn::Zero(d), s);
}

// exp(x - m) by the table form with t taken from x directly (DirectTableSplit):
// 13 operations a vector. z is x, not x - m: passes that count the terms at the max
// find them where z is z_at_max, m itself (SumLanes), and take below_max_correction
// as TableExp's.
//
// kCoarse, for softmax rows stored as f16 or bf16 (whose outputs keep 11 and 8
// bits): 11 operations, within 4e-6 of exp(x - m) instead of 1.01 ulp. The reduction
// r = (x - c kLn2Float) - delta (TableSplit::coarse_delta) takes ln2 as one float: one
// multiply-add, rounded once relative to |r + delta| <= 0.03, where the split ln2
// takes two operations; the float's error, 1.9e-9 times n / 32 (n >= -4802 above the
// cutoff, n <= 2955 for a guess), moves r by at most 3e-7. exp(r) = 1 + r + r^2 / 2
// leaves out r^3 / 6 <= 1.7e-6 (|r| <= ln2 / 32). Both far below half a unit of an f16
// output (2.4e-4) or a bf16 one (2e-3); the outputs, exps divided by their sum, move
// by at most twice as much before their rounding.
template <ExpRange kRange, class D, bool kCoarse = false>
struct DirectTableExp {
  using V = hn::Vec<D>;
  static_assert(kRange != ExpRange::gradual && kHasScalef<V>);
  float z_at_max;
  double below_max_correction;
  V rounding, threshold, shift_a, delta;
  V table_lo, table_hi;  // as TableLanes's

  DirectTableExp(D d, const DirectTableSplit& s)
      : z_at_max(s.table.m),
        below_max_correction(s.table.below_max_correction),
        rounding(hn::Set(d, s.rounding)),
        threshold(hn::Set(d, s.threshold)),
        shift_a(hn::Set(d, s.table.shift_a)),
        delta(hn::Set(d, kCoarse ? s.table.coarse_delta() : s.table.delta)),
        table_lo(hn::LoadU(d, kPow2Over32 + 32 - s.table.b)),
        table_hi(hn::LoadU(d, kPow2Over32 + 48 - s.table.b)) {}

  HWY_INLINE V operator()(D d, V x, V& z) const { return (*this)(d, x, hn::Zero(d), z); }

  // exp(x + x_lo - m), x_lo as ExpMinusMax's.
  HWY_INLINE V operator()(D d, V x, V x_lo, V& z) const {
    z = x;
    const V t = hn::MulAdd(x, hn::Set(d, 1.44269502162933349609375f), rounding);  // log2(e)
    const V power = hn::Sub(t, hn::Set(d, kRoundingShift32 - static_cast<float>(kRangeScaleLog2<kRange>)));
    const V c = hn::Sub(t, shift_a);  // (n + k) / 32
    const V delta_less_x_lo = hn::Sub(delta, x_lo);
    if constexpr (kCoarse) {
      const V r = hn::Sub(hn::NegMulAdd(c, hn::Set(d, kLn2Float), x), delta_less_x_lo);  // delta: coarse_delta()
      return ScalefWhereNotBelow(TableEntryTimesExpQuadratic(d, table_lo, table_hi, t, r), power, x, threshold);
    } else {
      const V r = TableReduced(d, x, c, delta_less_x_lo);
      return ScalefWhereNotBelow(TableEntryTimesExp(d, table_lo, table_hi, t, r), power, x, threshold);
    }
  }
};

#endif

// The folded exp of a row with max m as a functor: exp_of(d, x, z) is exp(x - m)
// with z = x - m rounded (0 exactly at the max). below_max_correction multiplies a
// sum of the terms below the max (MaxSplit): the log ops' d - 1 and cross-entropy's
// gradient p - a cancel, so a bias common to the row must not stay.
template <ExpRange kRange, class D>
struct FoldedExp {
  MaxSplitLanes<D> c;
  double below_max_correction;
  FoldedExp(D d, const MaxSplit& split) : c(d, split), below_max_correction(split.below_max_correction) {}
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, hn::Vec<D>& z) const { return ExpMinusMax<kRange>(d, c, x, z); }
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, hn::Vec<D> x_lo, hn::Vec<D>& z) const {
    return ExpMinusMax<kRange>(d, c, x, x_lo, z);
  }
};

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The same through the table of 2^(j / 32): AVX-512, the flush and 2^64 forms.
template <ExpRange kRange, class D>
struct TableExp {
  TableLanes<D> c;
  double below_max_correction;
  TableExp(D d, const TableSplit& split) : c(d, split), below_max_correction(split.below_max_correction) {}
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, hn::Vec<D>& z) const {
    return ExpMinusMaxTable<kRange>(d, c, x, z);
  }
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, hn::Vec<D> x_lo, hn::Vec<D>& z) const {
    return ExpMinusMaxTable<kRange>(d, c, x, x_lo, z);
  }
};
#endif

// Calls f with the folded exp for a row with max m (MaxSplit::fits(m), a target with
// FMA): TableExp where the target, the form and m allow it (and `table`), else
// FoldedExp. With kMarksMax false, for passes that need no z = x - m (they count no
// terms at the max), DirectTableExp where it is exact at the max, and its coarse form
// with kCoarse (softmax's exps for 16-bit outputs). `exact`: the max the exps are
// taken against where m is its float rounding (a scaled max; MaxSplit::of), else m.
template <ExpRange kRange, bool kMarksMax = true, bool kCoarse = false, class D, class F>
HWY_INLINE auto WithFoldedExp(D d, float m, F&& f, bool table, double exact) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kRange != ExpRange::gradual && kHasScalef<hn::Vec<D>>) {
    if (table && TableSplit::fits(m)) {
      if constexpr (!kMarksMax) {
        const DirectTableSplit split = DirectTableSplit::of(m, kRangeCutoff<kRange>, exact);
        if (split.exact_at_max) return f(DirectTableExp<kRange, D, kCoarse>(d, split));
        return f(TableExp<kRange, D>(d, split.table));
      }
      return f(TableExp<kRange, D>(d, TableSplit::of(m, exact)));
    }
  }
#endif
  (void)table;
  return f(FoldedExp<kRange, D>(d, MaxSplit::of(m, exact)));
}

template <ExpRange kRange, bool kMarksMax = true, bool kCoarse = false, class D, class F>
HWY_INLINE auto WithFoldedExp(D d, float m, F&& f, bool table = true) {
  return WithFoldedExp<kRange, kMarksMax, kCoarse>(d, m, f, table, static_cast<double>(m));
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_EXP_MINUS_MAX_INL_H_
