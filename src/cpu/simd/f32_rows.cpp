// The row kernels of f32_rows.hpp, written once over the storage type (float, half,
// bfloat16; see convert-inl.h), compiled for every target Highway offers
// (foreach_target.h re-includes this file once per target) and dispatched at run
// time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd/f32_rows.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd/f32_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/exp_minus_max-inl.h"
#include "cpu/simd/max-inl.h"
#include "cpu/simd/rows_across_lanes-inl.h"
#include "cpu/simd/sum-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;

// -m and 1/T in every lane.
struct ArgConsts {
  VF neg_m;
  InverseTemperatureLanes<DF> t;
  ArgConsts(DF d, float m, const InverseTemperature& inv) : neg_m(hn::Set(d, -m)), t(d, inv) {}
};

// z + z_lo = (x - m) / T for the exps (argument-inl.h): z_lo may be NaN or large only
// where z is -inf or far below the exp's domain, where the exps return 0 anyway.
template <bool kUnitT>
HWY_INLINE void Argument(DF d, const ArgConsts& c, VF x, VF& z, VF& z_lo) {
  ScaledDifference<kUnitT, /*kForExp=*/true>(d, c.t, x, c.neg_m, z, z_lo);
}

// exp(z + z_lo) for storage type T: bf16 keeps float's subnormals (its own).
template <class T>
HWY_INLINE VF ExpFor(DF d, VF z, VF z_lo) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return ExpGradual(d, z, z_lo);
  } else {
    return ExpFlush(d, z, z_lo);
  }
}

// The two ways to the exps exp((x - m) / T), as functors the passes take: both return
// the exp and set z, the argument (0 exactly at the max: SumLanes counts the terms at
// the max by it; see ZAtMax).
//
// ExactArgumentExp: x - m with its rounding error, scaled by 1/T (argument-inl.h),
// then exp-inl.h's exp. Any finite m, any T.
template <class T, bool kUnitT>
struct ExactArgumentExp {
  ArgConsts c;
  double below_max_correction = 1;  // see FoldedExp
  ExactArgumentExp(DF d, float m, const InverseTemperature& inv) : c(d, m, inv) {}
  HWY_INLINE VF operator()(DF d, VF x, VF& z) const {
    VF z_lo;
    Argument<kUnitT>(d, c, x, z, z_lo);
    return ExpFor<T>(d, z, z_lo);
  }
};

// The folded exps (exp_minus_max-inl.h's WithFoldedExp): x - m folded into the exp's
// range reduction, 6 operations a vector fewer (and on AVX-512 the table's shorter
// polynomial). At T != 1 they fold (x - m) / T as p + p_lo - M: p = hi x rounded,
// p_lo the rest of (hi + lo) x (ScaledFoldedExp), M the max in the same units
// (FoldedMax). MaxSplit::fits(M), and targets with FMA: the reduction's (n + k) *
// ln2_lo must not round, and n + k can be large; p_lo needs FMA too. bf16 keeps
// float's subnormals (see ExpFor).
struct FoldedMax {
  float m;       // hi m rounded, as the kernels round hi x: p - m is 0 exactly at the max
  double exact;  // hi m + lo m
  FoldedMax(float max, const InverseTemperature& inv)
      : m(inv.unit ? max : max * inv.hi),
        exact(inv.unit ? max : static_cast<double>(max) * inv.hi + static_cast<double>(max) * inv.lo) {}
};

// Whether a row with max m takes the folded exps. kFoldScaled false keeps T != 1 on the exact argument: rows of a few vectors in
// registers, where the folded forms' split of the max per row (double arithmetic)
// weighs more than their exps save (16384 x 8 and x 32 at T = 0.7: 0.88 of the speed).
template <bool kFoldScaled = true>
HWY_INLINE bool FoldsMax(float m, const InverseTemperature& inv) {
  return HWY_NATIVE_FMA && (kFoldScaled || inv.unit) && MaxSplit::fits(FoldedMax(m, inv).m);
}

// exp((x - m) / T) by a folded exp (Inner, taken against FoldedMax) of p = hi x and
// p_lo = (hi x - p) + lo x, the first part exact (FMA), the second rounded by 2^-48
// of p: three operations a vector more than at unit temperature, against
// argument-inl.h's argument (nine) and exp-inl.h's longer polynomial. z = p - hi m
// rounded: 0 exactly at the max.
template <class Inner>
struct ScaledFoldedExp {
  Inner inner;
  VF hi, lo;
  double below_max_correction = 1;  // Inner's, where it has one (the passes that mark the max)
  float z_at_max = 0;                // Inner's (ZAtMax)
  ScaledFoldedExp(DF d, const Inner& e, const InverseTemperature& inv)
      : inner(e), hi(hn::Set(d, inv.hi)), lo(hn::Set(d, inv.lo)) {
    if constexpr (requires { e.below_max_correction; }) below_max_correction = e.below_max_correction;
    if constexpr (requires { e.z_at_max; }) z_at_max = e.z_at_max;
  }
  HWY_INLINE VF operator()(DF d, VF x, VF& z) const {
    const VF p = hn::Mul(x, hi);
    const VF p_lo = hn::MulAdd(x, lo, hn::MulSub(x, hi, p));
    return inner(d, p, p_lo, z);
  }
};

// The z that an exp functor gives the terms at the max, above every other z
// (SumLanes): 0 where z is x - m, the max where z is x (DirectTableExp, and so
// ScaledFoldedExp around it, whose z is hi x and its max hi m rounded alike).
template <class Exp>
HWY_INLINE float ZAtMax(const Exp& exp_of) {
  if constexpr (requires { exp_of.z_at_max; }) {
    return exp_of.z_at_max;
  } else {
    return 0.0f;
  }
}

// WithFoldedExp<kRange, kMarksMax, kCoarse> for a row whose max folds (FoldsMax).
template <ExpRange kRange, bool kMarksMax, bool kCoarse, class F>
HWY_INLINE auto WithRowFoldedExp(float m, const InverseTemperature& inv, F&& f) {
  const DF d;
  if (inv.unit) return WithFoldedExp<kRange, kMarksMax, kCoarse>(d, m, f);
  const FoldedMax folded(m, inv);
  return WithFoldedExp<kRange, kMarksMax, kCoarse>(
      d, folded.m,
      [&](const auto inner) SMAX_INLINE_LAMBDA {
        return f(ScaledFoldedExp<std::remove_const_t<decltype(inner)>>(d, inner, inv));
      },
      true,
      folded.exact);
}

// Softmax's passes that count no terms at the max (kMarksMax false) take
// DirectTableExp's coarse form for 16-bit outputs; the log ops' sums, whose log(d)
// meets a cancellation in logsumexp, keep the full one.
template <class T>
inline constexpr bool kCoarseFor = !std::is_same_v<T, float>;

// Calls f with the exp functor for a row with finite max m. f takes it by value: a
// reference could alias the outputs as far as the compiler knows, and every step of a
// pass would load the functor's lanes again (the scaling pass ran 17% slower so).
// kMarksMax false: f's pass counts no terms at the max, so its z need not be x - m
// (WithFoldedExp's DirectTableExp, one operation a vector fewer; its terms at the max
// are found by ZAtMax). kFoldScaled as FoldsMax's; kCoarse: DirectTableExp's coarse
// form (kCoarseFor).
template <class T, bool kMarksMax = true, bool kFoldScaled = true, bool kCoarse = kCoarseFor<T>, class F>
HWY_INLINE auto WithExp(float m, const InverseTemperature& inv, F&& f) {
  const DF d;
  if (FoldsMax<kFoldScaled>(m, inv)) {
    return WithRowFoldedExp<std::is_same_v<T, bfloat16> ? ExpRange::gradual : ExpRange::flush, kMarksMax, kCoarse>(
        m, inv, f);
  }
  if (inv.unit) return f(ExactArgumentExp<T, true>(d, m, inv));
  return f(ExactArgumentExp<T, false>(d, m, inv));
}

// WithExp for a softmax's exps, which the reciprocal of their sum scales: for bf16
// rows exps 2^64 times too large (never subnormal), which that one multiply takes
// back, so that their subnormal outputs come without the gradual exp (and its lack of
// the table).
template <class T, bool kMarksMax = true, bool kFoldScaled = true, bool kCoarse = kCoarseFor<T>, class F>
HWY_INLINE auto WithSoftmaxExp(float m, const InverseTemperature& inv, F&& f) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (FoldsMax<kFoldScaled>(m, inv)) {
      return WithRowFoldedExp<ExpRange::times_2_64, kMarksMax, kCoarse>(m, inv, f);
    }
  }
  return WithExp<T, kMarksMax, kFoldScaled, kCoarse>(m, inv, f);
}

// The factor by which WithSoftmaxExp's exps exceed exp((x - m) / T): 2^64 for bf16
// rows whose max folds, else 1.
template <class T, bool kFoldScaled = true>
HWY_INLINE double SoftmaxExpScale(float m, const InverseTemperature& inv) {
  return std::is_same_v<T, bfloat16> && FoldsMax<kFoldScaled>(m, inv) ? 0x1p64 : 1.0;
}

// Rows in registers fold T != 1 from eight vectors on (FoldsMax): 16384 x 8 and x 32
// at T = 0.7 0.88 of the exact argument's speed, 4096 x 64 0.98, 1024 x 256 1.10.
template <std::size_t kVectors>
inline constexpr bool kFoldsScaledInRegisters = kVectors >= 8;

// Calls step(i, count) over [0, n) as MaxLanes::Add takes it.
template <class Step>
HWY_INLINE void WalkForMax(std::size_t n, Step&& step) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  Walk<4>(
      d, n, false, [&](std::size_t i) { step(i, 4 * N); }, [&](std::size_t i) { step(i, N); },
      [&](std::size_t i, std::size_t count) { step(i, count); });
}

// A max does not depend on the order of its terms, so the walk starts at x's first
// address aligned to the vector: no load crosses a cache line.
template <class T>
float RMax(const T* x, std::size_t n) {
  MaxLanes<T, 4> max;
  const std::size_t head = AlignmentHead(DF(), x, n);
  if (head > 0) max.Add(x, head);
  WalkForMax(n - head, [&](std::size_t i, std::size_t count) { max.Add(x + head + i, count); });
  return max.Result(x, n);
}

// Fetches the part [i, i + count) of `ahead` into cache (x for reading, y for
// writing): a few lines per step of a pass, so that the requests run beside the
// arithmetic and never fill the core's miss buffers at once. x goes into L1, or with
// kIntoL2 into L2 only, for rows that stream from memory (RowsFusedPipelined,
// MapStreaming, the sum pass of split rows run online): f32 and bf16 16384 x 4096 on
// two threads ran 8-12% faster so on the Intel Xeon VM with a 480 MiB L3, one row of
// 2^24 1-3%; rows of 1000 in cache, fetched so, 4% slower (docs/PERFORMANCE.md,
// twenty-first and twenty-second sessions).
template <bool kIntoL2 = false, class T>
HWY_INLINE void FetchAhead(const Ahead<T>& ahead, std::size_t i, std::size_t count) {
  if (ahead.x != nullptr) FetchLines</*kForWriting=*/false, kIntoL2>(ahead.x + i, count);
  if (ahead.y != nullptr) FetchLines</*kForWriting=*/true>(ahead.y + i, count);
}

// A pass's side job (RExp): side(i, count) runs beside each step over [i, i + count).
struct NoSide {
  HWY_INLINE void operator()(std::size_t, std::size_t) const {}
};

// The sum of exp((x - m) / T) over [0, n) with the functor `exp_of` (WithExp),
// forward or backward, the terms at the max counted apart with kSplitAtMax (ExpSum).
// With kStore (the fused variant's middle pass; forward only) each exp is also stored
// to e. `ahead` is fetched meanwhile (into L2 only with kFetchIntoL2: FetchAhead),
// and `side` runs beside each step.
template <bool kStore, bool kSplitAtMax, bool kFetchIntoL2 = false, class T, class Exp, class Side = NoSide>
HWY_INLINE ExpSum RExp(const Exp& exp_of, const T* x, float* e, std::size_t n, bool backward,
                       const Ahead<T>& ahead, const Side& side = {}) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  SumLanes<kSplitAtMax> sum(ZAtMax(exp_of));
  auto store = [&](VF v, std::size_t i) {
    if constexpr (kStore) hn::StoreU(v, d, e + i);
  };
  const ShiftedLoads<T> shifted(d, x, n);
  Walk<4>(
      d, n, backward,
      [&](std::size_t i) SMAX_INLINE_LAMBDA {
        FetchAhead<kFetchIntoL2>(ahead, i, 4 * N);
        side(i, 4 * N);
        VF v[4];
        if (shifted.covers4(d, i)) {
          shifted.Load4(d, i, v);
        } else if constexpr (kStore) {
          for (std::size_t k = 0; k < 4; ++k) v[k] = LoadF32(d, x + i + k * N);
        } else {
          LoadF32x4AnyOrder(d, x + i, v);  // only the sum comes out
        }
        VF z0, z1, z2, z3;
        const VF e0 = exp_of(d, v[0], z0);
        const VF e1 = exp_of(d, v[1], z1);
        const VF e2 = exp_of(d, v[2], z2);
        const VF e3 = exp_of(d, v[3], z3);
        store(e0, i);
        store(e1, i + N);
        store(e2, i + 2 * N);
        store(e3, i + 3 * N);
        sum.Add(e0, z0, e1, z1, e2, z2, e3, z3);
      },
      [&](std::size_t i) SMAX_INLINE_LAMBDA {
        side(i, N);
        VF z;
        const VF ev = exp_of(d, LoadF32(d, x + i), z);
        store(ev, i);
        sum.Add(ev, z);
      },
      [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
        side(i, count);
        VF z;
        const VF ev = exp_of(d, LoadTailF32(d, x + i, count, neg_inf), z);  // -inf adds 0
        if constexpr (kStore) StoreTail(d, ev, e + i, count);
        sum.Add(ev, z);
      });
  return sum.Result();
}

// The sum of WithSoftmaxExp's exps (bf16 rows whose max folds: 2^64 times too large,
// never subnormal, so no gradual steps, and terms below float's normal range keep
// every bit), scaled back in double, exactly. `side` runs beside each step (RExp).
// The exps need no z = x - m even where the terms at the max are counted (ZAtMax):
// log_softmax rows of 1000 to 131072 floats in cache 1.01-1.05x as fast as with it.
template <bool kCountAtMax, bool kFetchIntoL2, class T, class Side>
ExpSum RSumExpT(const T* x, std::size_t n, float m, const InverseTemperature& inv, bool backward,
                const Ahead<T>& ahead, const Side& side) {
  constexpr bool kCoarse = kCoarseFor<T> && !kCountAtMax;
  ExpSum sum = WithSoftmaxExp<T, /*kMarksMax=*/false, /*kFoldScaled=*/true, kCoarse>(
      m, inv, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
        ExpSum s = RExp<false, kCountAtMax, kFetchIntoL2>(exp_of, x, nullptr, n, backward, ahead, side);
        if constexpr (kCountAtMax) s.below_max *= exp_of.below_max_correction;  // softmax scales its exps as they are
        return s;
      });
  sum.below_max /= SoftmaxExpScale<T>(m, inv);
  return sum;
}

template <bool kFetchIntoL2 = false, class T, class Side = NoSide>
ExpSum RSumExp(const T* x, std::size_t n, float m, const InverseTemperature& inv, bool count_at_max, bool backward,
               const Ahead<T>& ahead, const Side& side = {}) {
  return count_at_max ? RSumExpT<true, kFetchIntoL2>(x, n, m, inv, backward, ahead, side)
                      : RSumExpT<false, kFetchIntoL2>(x, n, m, inv, backward, ahead, side);
}

// RSumExp forward with, beside it, the max of x_next[0, n_next) (n_next <= n), whose
// loads fill the cycles of the exps: the next chunk's max for a split row's pass 1.
// x_next comes from memory: fetched into L2 kNextMaxLead elements ahead of the max's
// loads (log_softmax 64 x 128256 and 16 x 262144 on two threads from DRAM 1.19x as
// fast as without; in cache the same).
inline constexpr std::size_t kNextMaxLead = 2048;

template <class T>
ExpSumAndNextMax RSumExpAndNextMax(const T* x, std::size_t n, float m, const InverseTemperature& inv,
                                   bool count_at_max, const T* x_next, std::size_t n_next) {
  MaxLanes<T, 2> max;
  const auto beside = [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    max.AddWithin(x_next, n_next, i, count);
  };
  ExpSumAndNextMax r;
  const Ahead<T> lead{n_next > kNextMaxLead ? x_next + kNextMaxLead : nullptr, nullptr};
  r.sum = RSumExp</*kFetchIntoL2=*/true>(x, n, m, inv, count_at_max, false, lead, beside);
  r.next_max = n_next > 0 ? max.Result(x_next, n_next) : -std::numeric_limits<float>::infinity();
  return r;
}

// Only softmax stores exps, and its d needs no exact d - 1. bf16 rows store them 2^64
// times too large where the max folds (WithSoftmaxExp's form: the table's exp, not
// the gradual one), as ExpSum::stored_scale says.
template <class T, class Side = NoSide>
ExpSum RStoreExp(const T* x, float* e, std::size_t n, float m, const InverseTemperature& inv, const Ahead<T>& ahead,
                 const Side& side = {}) {
  ExpSum sum = WithSoftmaxExp<T, /*kMarksMax=*/false>(
      m, inv,
      [&](const auto exp_of) SMAX_INLINE_LAMBDA { return RExp<true, false>(exp_of, x, e, n, false, ahead, side); });
  sum.stored_scale = SoftmaxExpScale<T>(m, inv);
  sum.below_max /= sum.stored_scale;
  return sum;
}

// A fused chunk's exp pass without a max pass before it (GuessedExpSum): the exps are
// taken against g, the max of the first kGuessLength elements, and the chunk's max is
// found beside them (a pass of its own read the chunk from L2 at about 28 bytes a
// cycle on AMD Zen 5, a fifth of a fused row). Exps above 1 are fine up to
// exp(kGuessHeadroom), which keeps 1 / the chunk's own sum (at least 4e-33 for a chunk
// of at most 32768) a normal float; beyond it, or with a NaN or an infinity anywhere, ok is
// false. (A row max far above the chunk's can still push its scale factor below the
// normal range: split_row then scales in two steps.)
inline constexpr std::size_t kGuessLength = 256;
inline constexpr double kGuessHeadroom = 64;
// bf16 rows take their exps 2^64 too large: e^40 * 2^64 keeps them below float's
// range (inf) and, on targets without vscalefps, 2^(n + 64) within the exponent field
// that ExpMinusMax builds from bits (n + 64 + 127 <= 254), where a larger n would wrap.
inline constexpr double kGuessHeadroom2Pow64 = 40;

// The exp pass with e (kStore) or the sum alone, against the guess, the max beside.
template <bool kStore, class T>
GuessedExpSum ExpsFromGuess(const T* x, float* e, std::size_t n, const InverseTemperature& inv,
                            const Ahead<T>& ahead) {
  GuessedExpSum r;
  if (n == 0) return r;
  const float g = RMax(x, std::min(n, kGuessLength));
  if (!std::isfinite(g)) return r;
  MaxLanes<T, 2, /*kFindsNaN=*/false> max;  // a NaN makes the sum NaN, and r.ok false
  const auto beside = [&](std::size_t i, std::size_t count) { max.Add(x + i, count); };
  if constexpr (kStore) {
    r.sum = RStoreExp(x, e, n, g, inv, ahead, beside);
  } else {
    // The sum alone serves split rows run online, rows too long for the cache: `ahead`
    // comes from memory, into L2 only (FetchAhead).
    r.sum = RSumExp</*kFetchIntoL2=*/true>(x, n, g, inv, false, false, ahead, beside);
  }
  r.m = max.Result(x, n);
  r.g = g;
  const double headroom = std::is_same_v<T, bfloat16> ? kGuessHeadroom2Pow64 : kGuessHeadroom;
  r.ok = std::isfinite(r.m) && std::isfinite(r.sum.below_max) &&
         (static_cast<double>(r.m) - static_cast<double>(g)) * inv.value <= headroom;
  return r;
}

// y = f(x) over [0, n), x and y of storage types, one vector at a time. kNotNaN: f's
// values are never NaN (StoreF32NotNaN). `side` runs beside each step (RExp). The
// whole vectors start where y is aligned to them, as VScaleExps's do (log_softmax
// rows 16 bytes off a page, x and y, one thread in cache: 256 x 1000 1.09x, 64 x
// 8192 1.04x; aligned the same).
template <bool kNotNaN = false, class TX, class TY, class F, class Side = NoSide>
HWY_INLINE void Map(DF d, const TX* x, TY* y, std::size_t n, bool backward, F&& f, const Ahead<TX>& ahead = {},
                    const Side& side = {}) {
  const auto store = [&](VF v, TY* at) {
    if constexpr (kNotNaN) {
      StoreF32NotNaN(d, v, at);
    } else {
      StoreF32(d, v, at);
    }
  };
  const auto part = [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    side(i, count);
    StoreTailF32(d, f(LoadTailF32(d, x + i, count, hn::Zero(d))), y + i, count);
  };
  const std::size_t head = AlignmentHead(d, y, n);
  if (head > 0) part(0, head);
  Walk<1>(
      d, n - head, backward,
      [&](std::size_t i) SMAX_INLINE_LAMBDA {
        FetchAhead(ahead, head + i, hn::Lanes(d));
        side(head + i, hn::Lanes(d));
        store(f(LoadF32(d, x + head + i)), y + head + i);
      },
      [&](std::size_t i) SMAX_INLINE_LAMBDA { store(f(LoadF32(d, x + head + i)), y + head + i); },
      [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA { part(head + i, count); });
}

// Whether y can take streaming stores (Stores): aligned to its element.
template <class T>
HWY_INLINE bool Streams(Stores stores, const T* y) {
  return stores == Stores::streaming && reinterpret_cast<std::uintptr_t>(y) % sizeof(T) == 0;
}

// Map with streaming stores (whole vectors on whole cache lines, the pieces around
// them by the tail stores: WalkAligned), then fenced. kNotNaN: f's values are never NaN
// (StoreF32NotNaN). Outputs stream where the input comes from memory: `ahead` goes
// into L2 only (FetchAhead; one row of 2^24 f32 from DRAM 5-6% faster so).
template <bool kNotNaN = false, class TX, class TY, class F, class Side = NoSide>
HWY_INLINE void MapStreaming(DF d, const TX* x, TY* y, std::size_t n, bool backward, F&& f,
                             const Ahead<TX>& ahead = {}, const Side& side = {}) {
  WalkAligned(
      d, y, n, backward,
      [&](std::size_t i) {
        FetchAhead</*kIntoL2=*/true>(ahead, i, hn::Lanes(d));
        side(i, hn::Lanes(d));
        StreamF32<kNotNaN>(d, f(LoadF32(d, x + i)), y + i);
      },
      [&](std::size_t i, std::size_t count) {
        side(i, count);
        StoreTailF32(d, f(LoadTailF32(d, x + i, count, hn::Zero(d))), y + i, count);
      });
  hwy::FlushStream();
}

// VScale for a softmax's exps (never NaN: StoreF32NotNaN), with streaming stores
// where `stream`. Without them, side(i, count) runs beside each step over [i, i +
// count) (WalkForMax's steps).
template <class T, class Side = NoSide>
HWY_INLINE void VScaleExps(const float* e, T* y, std::size_t n, float scale, bool stream, const Side& side = {}) {
  const DF d;
  const VF vscale = hn::Set(d, scale);
  if (stream) return MapStreaming</*kNotNaN=*/true>(d, e, y, n, false, [&](VF v) { return hn::Mul(v, vscale); });
  const std::size_t N = hn::Lanes(d);
  auto pair = [&](std::size_t i) {
    StoreF32x2NotNaN</*kStream=*/false>(d, hn::Mul(hn::LoadU(d, e + i), vscale),
                                        hn::Mul(hn::LoadU(d, e + i + N), vscale), y + i);
  };
  auto part = [&](std::size_t i, std::size_t count) {
    side(i, count);
    StoreTailF32(d, hn::Mul(LoadTail(d, e + i, count, hn::Zero(d)), vscale), y + i, count);
  };
  // The whole vectors start where y is aligned to them: a store that crosses a cache
  // line costs two (a row of 1024 floats with y 16 bytes off its alignment ran 18%
  // slower on AMD Zen 5). Only the scaling moves so: the exp pass's sums keep their
  // order, whatever the address of y.
  const std::size_t head = AlignmentHead(d, y, n);
  if (head > 0) part(0, head);
  Walk<4>(
      d, n - head, false,
      [&](std::size_t i) {
        side(head + i, 4 * N);
        pair(head + i);
        pair(head + i + 2 * N);
      },
      [&](std::size_t i) {
        side(head + i, N);
        StoreF32NotNaN(d, hn::Mul(hn::LoadU(d, e + head + i), vscale), y + head + i);
      },
      [&](std::size_t i, std::size_t count) { part(head + i, count); });
}

template <class T>
void SoftmaxNormalize(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv, float scale,
                      bool backward, const Ahead<T>& ahead, Stores stores) {
  const DF d;
  const VF vscale = hn::Set(d, scale);
  WithExp<T, /*kMarksMax=*/false>(m, inv, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
    const auto f = [&](VF v) {
      VF z;
      return hn::Mul(exp_of(d, v, z), vscale);
    };
    if (Streams(stores, y)) return MapStreaming<true>(d, x, y, n, backward, f, Ahead<T>{ahead.x, nullptr});
    Map<true>(d, x, y, n, backward, f, ahead);
  });
}

// y = (x - m) / T - log(d): both terms are <= 0 (d >= 1), so they never cancel, and
// the float roundings of x - m, of 1/T and of the product stay within 2^-22 of y (the
// bar is 2e-6): no exact argument (argument-inl.h's 9 operations a vector) is needed.
template <bool kUnitT>
HWY_INLINE VF LogSoftmaxOutput(const ArgConsts& c, VF log_d, VF x) {
  const VF x_minus_m = hn::Add(x, c.neg_m);
  return hn::Sub(kUnitT ? x_minus_m : hn::Mul(x_minus_m, c.t.hi), log_d);
}

template <class T, bool kUnitT, class Side = NoSide>
HWY_INLINE void LogSoftmaxNormalizeT(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv,
                                     float log_d, bool backward, Stores stores, const Side& side = {}) {
  const DF d;
  const ArgConsts c(d, m, inv);
  const VF vlog_d = hn::Set(d, log_d);
  const auto f = [&](VF v) { return LogSoftmaxOutput<kUnitT>(c, vlog_d, v); };
  if (Streams(stores, y)) return MapStreaming<true>(d, x, y, n, backward, f, {}, side);
  Map<true>(d, x, y, n, backward, f, {}, side);
}

// Inlined: its side's state (the next row's MaxLanes) stays in registers; out of line
// it lived on the stack, a store-to-load chain a vector (half the time of a row).
template <class T, class Side = NoSide>
HWY_INLINE void LogSoftmaxNormalize(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv,
                                    float log_d, bool backward, Stores stores, const Side& side = {}) {
  if (inv.unit) {
    LogSoftmaxNormalizeT<T, true>(x, y, n, m, inv, log_d, backward, stores, side);
  } else {
    LogSoftmaxNormalizeT<T, false>(x, y, n, m, inv, log_d, backward, stores, side);
  }
}

// The register budget: 16 vectors (256 floats with AVX-512, 128 with AVX2); larger
// rows take the fused passes over L1.
inline constexpr std::size_t kMaxRegisterVectors = 16;

// The sum of exp_of(v[k]) over every k. Softmax's (kLog false): the exps replace v,
// for the scaling. log_softmax's: v stays, for (x - m) / T - log(d), and the terms
// at the max are counted apart (SumLanes<true>).
template <bool kLog, std::size_t kVectors, class Exp>
HWY_INLINE ExpSum ExpsInRegisters(const Exp& exp_of, VF (&v)[kVectors]) {
  const DF d;
  SumLanes<kLog> sum;
  std::size_t k = 0;
  for (; k + 4 <= kVectors; k += 4) {
    VF z0, z1, z2, z3;
    const VF e0 = exp_of(d, v[k], z0);
    const VF e1 = exp_of(d, v[k + 1], z1);
    const VF e2 = exp_of(d, v[k + 2], z2);
    const VF e3 = exp_of(d, v[k + 3], z3);
    sum.Add(e0, z0, e1, z1, e2, z2, e3, z3);
    if constexpr (!kLog) v[k] = e0, v[k + 1] = e1, v[k + 2] = e2, v[k + 3] = e3;
  }
  for (; k < kVectors; k += 2) {
    VF z0, z1;
    const VF e0 = exp_of(d, v[k], z0);
    if constexpr (!kLog) v[k] = e0;
    if (k + 1 < kVectors) {
      const VF e1 = exp_of(d, v[k + 1], z1);
      if constexpr (!kLog) v[k + 1] = e1;
      sum.Add(e0, z0, e1, z1);
    } else {
      sum.Add(e0, z0);
    }
  }
  return sum.Result();
}

// The max of a row of at most kVectors vectors, or NaN where an element is NaN: a sum
// kept beside the max is NaN then (or where +inf meets -inf, a row whose max is +inf
// anyway). The rows in registers leave rows with either to the general path.
template <class T, std::size_t kVectors>
HWY_INLINE float MaxInRegisters(const T* x, std::size_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const std::size_t full = n / N;
  const std::size_t tail = n % N;
  VF vmax[2] = {neg_inf, neg_inf};
  VF sum = hn::Zero(d);
  for (std::size_t k = 0; k < kVectors; ++k) {
    if (k < full || (k == full && tail > 0)) {
      const VF v = k < full ? LoadF32(d, x + k * N) : LoadTailF32(d, x + k * N, tail, neg_inf);
      vmax[k % 2] = hn::Max(vmax[k % 2], v);
      sum = hn::Add(sum, v);
    }
  }
  const float m = hn::GetLane(hn::MaxOfLanes(d, hn::Max(vmax[0], vmax[1])));
  return std::isnan(hn::GetLane(hn::SumOfLanes(d, sum))) ? std::numeric_limits<float>::quiet_NaN() : m;
}

// x[0..n) into v, the lanes past n -inf (their exps are 0).
template <class T, std::size_t kVectors>
HWY_INLINE void LoadRowInRegisters(const T* x, std::size_t n, VF (&v)[kVectors]) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const std::size_t full = n / N;
  const std::size_t tail = n % N;
  for (std::size_t k = 0; k < kVectors; ++k) {
    v[k] = k < full ? LoadF32(d, x + k * N) : (k == full && tail > 0 ? LoadTailF32(d, x + k * N, tail, neg_inf) : neg_inf);
  }
}

// Softmax of a row of at most kVectors vectors held in registers, whose max m
// (finite) is known: one load and one store per element, no second pass over memory.
// The same arithmetic as the fused passes (terms added in float, widened into double
// lanes, 1 / d rounded to float). Meanwhile the max of the next row (x_next, if not
// null) goes to m_next: ahead of the exps in program order, its loads and its
// reduction overlap them, where they would otherwise wait for this row's sum and
// stores (rows of 256 floats: a fifth of a row's time on AMD Zen 5). With `stream`
// (rows aligned to the vector) whole vectors go out with streaming stores.
template <class T, std::size_t kVectors>
HWY_INLINE void SoftmaxInRegistersT(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv,
                                    bool stream, const T* x_next, float& m_next) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t full = n / N;
  const std::size_t tail = n % N;
  VF v[kVectors];
  LoadRowInRegisters(x, n, v);
  // DirectTableExp's form for the rows of 16 vectors only (AMD Zen 5, A / B against
  // TableExp's: 1024 x 256 1.058, 512 x 200 1.036; 2048 x 128 0.954, 4096 x 64 0.928,
  // where its longer split per row weighs more). The lambda must be inlined: GCC kept
  // it out of line once WithSoftmaxExp had five forms to call it with, and the row's
  // vectors went through memory (1024 x 256 0.77 times the speed).
  constexpr bool kMarksMax = kVectors < kMaxRegisterVectors;
  const double sum = WithSoftmaxExp<T, kMarksMax, kFoldsScaledInRegisters<kVectors>>(
      m, inv, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
        if (x_next != nullptr) m_next = MaxInRegisters<T, kVectors>(x_next, n);
        return ExpsInRegisters</*kLog=*/false, kVectors>(exp_of, v).below_max;
      });
  const VF scale = hn::Set(d, static_cast<float>(1.0 / sum));
  for (std::size_t k = 0; k < kVectors; ++k) {
    if (k < full) {
      StoreOrStreamF32</*kNotNaN=*/true>(d, hn::Mul(v[k], scale), y + k * N, stream);
    } else if (k == full && tail > 0) {
      StoreTailF32(d, hn::Mul(v[k], scale), y + k * N, tail);
    }
  }
}

// log(d) = log1p(d - 1) for d = at_max + below_max, rounded to float, by Highway's
// vector log1p on one lane (glibc's std::log1p took 22 ns a row on AMD Zen 4).
HWY_INLINE float LogOfSum(std::int64_t at_max, double below_max) {
  const hn::CappedTag<double, 1> d1;
  const double d_minus_one = static_cast<double>(at_max - 1) + below_max;
  return static_cast<float>(hn::GetLane(hn::Log1p(d1, hn::Set(d1, d_minus_one))));
}

// d - 1 for log_softmax of a row of at most kVectors vectors, whose max m (finite)
// is known, the row in registers: the sum as RSumExpT<kCountAtMax>'s (WithSoftmaxExp's
// exps, taken back to exp((x - m) / T) in double, the terms at the max counted apart).
// The next row's max as SoftmaxInRegistersT's.
template <class T, std::size_t kVectors>
HWY_INLINE double LogSumInRegistersT(const T* x, std::size_t n, float m, const InverseTemperature& inv,
                                     const T* x_next, float& m_next) {
  VF v[kVectors];
  LoadRowInRegisters(x, n, v);
  constexpr bool kFoldScaled = kFoldsScaledInRegisters<kVectors>;
  const ExpSum sum = WithSoftmaxExp<T, /*kMarksMax=*/true, kFoldScaled>(
      m, inv, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
        if (x_next != nullptr) m_next = MaxInRegisters<T, kVectors>(x_next, n);
        ExpSum s = ExpsInRegisters</*kLog=*/true, kVectors>(exp_of, v);
        s.below_max *= exp_of.below_max_correction;
        return s;
      });
  return static_cast<double>(sum.at_max - 1) + sum.below_max / SoftmaxExpScale<T, kFoldScaled>(m, inv);
}

// y = (x - m) / T - log(d) for a row of at most kVectors vectors.
template <class T, std::size_t kVectors>
HWY_INLINE void WriteLogSoftmaxInRegistersT(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv,
                                            float log_d, bool stream) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t full = n / N;
  const std::size_t tail = n % N;
  const ArgConsts c(d, m, inv);
  const VF vlog_d = hn::Set(d, log_d);
  for (std::size_t k = 0; k < kVectors; ++k) {
    if (k > full || (k == full && tail == 0)) break;
    const VF v = k < full ? LoadF32(d, x + k * N) : LoadTailF32(d, x + k * N, tail, hn::Zero(d));
    const VF out = inv.unit ? LogSoftmaxOutput<true>(c, vlog_d, v) : LogSoftmaxOutput<false>(c, vlog_d, v);
    if (k < full) {
      StoreOrStreamF32</*kNotNaN=*/true>(d, out, y + k * N, stream);
    } else {
      StoreTailF32(d, out, y + k * N, tail);
    }
  }
}

// Whether rows at y, y_row_stride apart, all lie equally far past the alignment of the
// stored vector (Lanes(DF) elements of T), each aligned to its element.
template <class T>
HWY_INLINE bool RowsEquallyAligned(const T* y, std::ptrdiff_t y_row_stride) {
  const std::size_t vector_bytes = hn::Lanes(DF()) * sizeof(T);
  return reinterpret_cast<std::uintptr_t>(y) % sizeof(T) == 0 &&
         static_cast<std::size_t>(y_row_stride) * sizeof(T) % vector_bytes == 0;
}

// Whether they are all aligned to the stored vector.
template <class T>
HWY_INLINE bool RowsAligned(const T* y, std::ptrdiff_t y_row_stride) {
  return RowsEquallyAligned(y, y_row_stride) &&
         reinterpret_cast<std::uintptr_t>(y) % (hn::Lanes(DF()) * sizeof(T)) == 0;
}

// Where a pass that loads x_row and streams y_body (whole vectors of T) step by step
// would, with the k-th vector of each in the same step, put each store within a KiB
// of its step's loads in a page (addresses modulo 4096): the distance in bytes to
// move the stores by, in [0, 4096), so that they lie a KiB behind; otherwise 0. Loads
// that share the low twelve address bits of recent streamed stores seem to wait for
// them (4K aliasing). In part: inputs 16 bytes past a page (NumPy's, malloc's) with
// outputs at one ran 1.3-1.5x the time of page-aligned rows from DRAM on AMD Zen 4, a
// KiB behind as fast as those (thirty-first session). Whole: page-aligned bf16 rows
// of 2048, 4096 and 8192, each row's stores at its successor's page offsets, ran
// 1.4-1.6x the time of rows of 3072 or 5120 (2 KiB apart) on one thread of the Intel
// Xeon VM model 106, and as fast once moved (forty-eighth session; docs/PERFORMANCE.md).
template <class T>
HWY_INLINE std::size_t StoresToMove(const T* x_row, const T* y_body) {
  constexpr std::uintptr_t kPage = 4096;
  constexpr std::uintptr_t kNear = 1024;
  const std::uintptr_t apart =
      (reinterpret_cast<std::uintptr_t>(y_body) - reinterpret_cast<std::uintptr_t>(x_row)) % kPage;
  const bool near = apart < kNear || apart > kPage - kNear;
  return near ? (2 * kPage - kNear - apart) % kPage : 0;
}

// Rows one after another in one call: no dispatch or set-up per row, and the
// out-of-order core overlaps one row's reductions with the next row's loads.
// Streaming stores where asked for rows that are all aligned to the vector.
template <class T, std::size_t kVectors>
std::size_t RowsInRegistersT(const T* x, std::ptrdiff_t x_row_stride, T* y, std::ptrdiff_t y_row_stride,
                             std::size_t rows, std::size_t n, const InverseTemperature& inv, Stores stores) {
  const bool stream = stores == Stores::streaming && RowsAligned(y, y_row_stride);
  float m = rows > 0 ? MaxInRegisters<T, kVectors>(x, n) : 0.0f;
  std::size_t r = 0;
  for (; r < rows; ++r) {
    if (!std::isfinite(m)) break;  // NaN, +inf, or an all -inf row: the general path's
    const T* xr = x + static_cast<std::ptrdiff_t>(r) * x_row_stride;
    const T* x_next = r + 1 < rows ? xr + x_row_stride : nullptr;
    SoftmaxInRegistersT<T, kVectors>(xr, y + static_cast<std::ptrdiff_t>(r) * y_row_stride, n, m, inv, stream, x_next,
                                     m);
  }
  if (stream) hwy::FlushStream();
  return r;
}

// log_softmax rows of at most kVectors vectors a group at a time: each row's sum with
// the row in registers (LogSumInRegistersT), the group's log(d) in one vector log1p,
// then the group's writes, its rows read again from L1. A log per row between its
// sum and its stores was a chain of some 12 ns that the next row could not overlap
// (4096 x 64 on AMD Zen 4, in cache: 0.72 ns an element, 0.52 without the log).
template <class T, std::size_t kVectors>
std::size_t LogRowsInRegistersT(const T* x, std::ptrdiff_t x_row_stride, T* y, std::ptrdiff_t y_row_stride,
                                std::size_t rows, std::size_t n, const InverseTemperature& inv, Stores stores) {
  using DD = hn::ScalableTag<double>;
  constexpr std::size_t kGroup = hn::MaxLanes(DD());
  const bool stream = stores == Stores::streaming && RowsAligned(y, y_row_stride);
  float m = rows > 0 ? MaxInRegisters<T, kVectors>(x, n) : 0.0f;
  for (std::size_t first = 0; first < rows; first += kGroup) {
    const std::size_t group = rows - first < kGroup ? rows - first : kGroup;
    HWY_ALIGN float maxes[kGroup] = {};
    HWY_ALIGN double d_minus_one[kGroup] = {};
    std::size_t done = 0;
    for (; done < group && std::isfinite(m); ++done) {  // NaN, +inf, all -inf: the general path's
      const std::size_t r = first + done;
      const T* xr = x + static_cast<std::ptrdiff_t>(r) * x_row_stride;
      maxes[done] = m;
      d_minus_one[done] = LogSumInRegistersT<T, kVectors>(xr, n, m, inv, r + 1 < rows ? xr + x_row_stride : nullptr, m);
    }
    HWY_ALIGN double log_d[kGroup];
    const DD dd;
    for (std::size_t i = 0; i < kGroup; i += hn::Lanes(dd)) hn::Store(hn::Log1p(dd, hn::Load(dd, d_minus_one + i)), dd, log_d + i);
    for (std::size_t i = 0; i < done; ++i) {
      const std::ptrdiff_t r = static_cast<std::ptrdiff_t>(first + i);
      WriteLogSoftmaxInRegistersT<T, kVectors>(x + r * x_row_stride, y + r * y_row_stride, n, maxes[i], inv,
                                                static_cast<float>(log_d[i]), stream);
    }
    if (done < group) {
      if (stream) hwy::FlushStream();
      return first + done;
    }
  }
  if (stream) hwy::FlushStream();
  return rows;
}

// The fused rows' exp pass: the exps of x to e (WithSoftmaxExp's) and their sum,
// `side` run beside each step (RExp).
template <bool kFetchIntoL2 = false, class T, class Side = NoSide>
HWY_INLINE ExpSum RStoreSoftmaxExps(const T* x, float* e, std::size_t n, float m, const InverseTemperature& inv,
                                    const Ahead<T>& ahead, const Side& side = {}) {
  return WithSoftmaxExp<T, /*kMarksMax=*/false>(
      m, inv, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
        return RExp<true, false, kFetchIntoL2>(exp_of, x, e, n, false, ahead, side);
      });
}

// Longer rows by the fused passes: the max, one pass that stores the exps (to y for
// float rows, to `buffer` for 16-bit ones) and sums them, one that scales them. The
// store pass also fetches the next row (rows up to kPrefetchRowBytes, which leave room
// in L2 for two rows and their outputs), so that a batch streamed from memory overlaps
// its memory traffic with the arithmetic.
inline constexpr std::size_t kPrefetchRowBytes = 64 * 1024;

// The longest float log_softmax rows that fetch their output lines for writing during
// their sum pass (LogSoftmaxRows): with its input, half of a 1 MiB L2.
inline constexpr std::size_t kFetchOutputRowBytes = 256 * 1024;

// How far ahead the pipelined rows fetch float rows at least (FetchLeadRows).
inline constexpr std::size_t kFetchLeadBytes = 8 * 1024;

// The largest call (its input) that the fused passes take to be in cache, where each
// row finds the next one's max beside its exps rather than beside its scaling: then
// the next row's exps need not wait at the row's end for that max to be reduced (in
// cache f32 64 x 1000 1.08-1.12x, 8 x 4096 1.08x, 32 x 512 1.07-1.09x; bf16 64 x 1000
// 1.03x). From DRAM the loads beside the exps cost more than that (the same f32 rows
// 0.86-0.92x, 1024 x 4096 0.79x; docs/PERFORMANCE.md, thirty-sixth session): a small
// call is taken to come from whatever just wrote it, and larger calls, which come from
// memory more often, keep the max beside the scaling.
inline constexpr std::size_t kHotCallBytes = 256 * 1024;

template <class T>
std::size_t RowsFusedPasses(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows,
                            std::size_t n, const InverseTemperature& inv, float* buffer, Stores stores) {
  const bool prefetch = n * sizeof(T) <= kPrefetchRowBytes;
  const bool hot = rows * n * sizeof(T) <= kHotCallBytes;
  float m = rows > 0 ? RMax(x, n) : 0.0f;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::ptrdiff_t>(r) * xs;
    T* yr = y + static_cast<std::ptrdiff_t>(r) * ys;
    if (!std::isfinite(m)) return r;
    const bool streams = Streams(stores, yr);
    float* e = buffer;
    if constexpr (std::is_same_v<T, float>) {
      if (!streams) e = yr;
    }
    // Beside the exps: the next row's input, and the output lines written next, for
    // writing: the next row's where the exps go to y (f32), this row's where they wait
    // in `buffer` (16-bit), so that the scaling pass finds them in cache (bf16 1 x 16384
    // 1.12x from DRAM, 1.21x with the input in cache; docs/PERFORMANCE.md, twenty-fourth
    // session).
    const bool next_row = prefetch && r + 1 < rows;
    Ahead<T> next{next_row ? xr + xs : nullptr, nullptr};
    if (prefetch && !streams) next.y = !std::is_same_v<T, float> ? yr : next_row ? yr + ys : nullptr;
    const T* x_next = r + 1 < rows ? xr + xs : nullptr;
    MaxLanes<T, 2> next_max;
    const auto add_to_next_max = [&](std::size_t i, std::size_t count) { next_max.Add(x_next + i, count); };
    if (x_next != nullptr && !streams && hot) {
      // The next row's max beside the exps: reduced during the scaling pass, so that
      // the next row's exps need not wait for it.
      const ExpSum sum = RStoreSoftmaxExps(xr, e, n, m, inv, next, add_to_next_max);
      m = next_max.Result(x_next, n);
      VScaleExps(e, yr, n, static_cast<float>(1.0 / sum.below_max), false);
      continue;
    }
    const ExpSum sum = RStoreSoftmaxExps(xr, e, n, m, inv, next);
    const float scale = static_cast<float>(1.0 / sum.below_max);
    if (x_next != nullptr && !streams) {
      // The next row's max beside the scaling: its loads and compares fill the
      // cycles the stores leave.
      VScaleExps(e, yr, n, scale, false, add_to_next_max);
      m = next_max.Result(x_next, n);
    } else {
      VScaleExps(e, yr, n, scale, streams);
      if (x_next != nullptr) m = RMax(x_next, n);
    }
  }
  return rows;
}

// The rows ahead that the pipelined rows fetch: the next, or for float rows shorter
// than kFetchLeadBytes the first at least that far ahead: from DRAM on AMD Zen 4, rows
// of 1024 floats ran 1.13-1.16x faster fetched two rows ahead than one (one row ahead
// was even slower than no fetch at all), rows of 512 1.01-1.06x (16-bit rows so:
// 0.95-1.07x, left at one; docs/PERFORMANCE.md, thirty-second session).
template <class T>
constexpr std::size_t FetchLeadRows(std::size_t n) {
  return std::is_same_v<T, float> ? std::max<std::size_t>(1, kFetchLeadBytes / (n * sizeof(T))) : 1;
}

// Rows whose outputs stream, each row's output written inside the next row's pass
// over its input: every step of that pass also computes and streams whole vectors of
// the previous row, so that the stores to memory overlap the arithmetic instead of
// following it. Every row of y lies equally far past the vector's alignment
// (RowsEquallyAligned): a row's whole vectors start at its first aligned element,
// `head`, and the k-th of them goes out with the k-th vector of the next row's pass
// (or, where StoresToMove says so, the (k + r)-th, modulo their count); the pieces
// before and after them go through the cache as soon as the row's pass is done. Rows
// that stream come from memory: each pass fetches a later row into L2 only
// (FetchAhead, FetchLeadRows ahead).
//
// `pass(r, x_row, m, next, drain)` runs row r's pass (m its max, `next` the row to
// fetch), calling drain(i, count) at each step [i, i + count) (i a multiple of the
// vector, count of at most four vectors), and returns the Row that it leaves pending:
// Row::Vector(d, j) is the output vector at element j of the row, Row::Piece(d, j,
// count) its count (< Lanes) elements there. The outputs are never NaN.
template <class Row, class T, class RowPass>
std::size_t PipelinedRows(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows, std::size_t n,
                          const RowPass& pass) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t head = AlignmentHead(d, y, n);
  const std::size_t body_end = head + (n - head) / N * N;
  std::optional<Row> pending;
  T* pending_y = nullptr;
  const std::size_t body_vectors = (body_end - head) / N;
  // The pass's vectors before `split` drain the body's `shift_low` elements further on,
  // those from it `shift_high` (negative) further; split = n and no shifts: the k-th
  // with the k-th.
  std::size_t split = n;
  std::ptrdiff_t shift_low = 0;
  std::ptrdiff_t shift_high = 0;
  // Streams the pending row's whole vectors that go with the step [i, i + count) of a
  // pass (a step of four vectors never across `split`): those from i to i + count,
  // rounded up to a vector and not past the body's count, shifted as above.
  auto drain = [&](std::size_t i, std::size_t count) {
    if (!pending) return;
    const std::size_t end = std::min(body_end - head, (i + count + N - 1) / N * N);
    if (i >= end) return;
    const std::size_t first =
        static_cast<std::size_t>(static_cast<std::ptrdiff_t>(head + i) + (i < split ? shift_low : shift_high));
    const std::size_t last = first + (end - i);
    std::size_t k = first;
    for (; k + 2 * N <= last; k += 2 * N) {
      StoreF32x2NotNaN</*kStream=*/true>(d, pending->Vector(d, k), pending->Vector(d, k + N), pending_y + k);
    }
    if (k < last) StreamF32</*kNotNaN=*/true>(d, pending->Vector(d, k), pending_y + k);
  };
  // The previous row's body rotated where StoresToMove says so (the k-th vector of the
  // pass drains the (k + r)-th of the body, modulo its count), r rounded so that the
  // count less r is a multiple of four (no step of four vectors across `split`).
  auto rotate_for = [&](const T* x_row, const T* y_row) {
    split = n;
    shift_low = shift_high = 0;
    const std::size_t move = StoresToMove(x_row, y_row + head);
    if (body_vectors < 8 || move == 0) return;
    std::size_t r = move / (N * sizeof(T)) % body_vectors;
    r -= (r + 4 - body_vectors % 4) % 4;  // down to body_vectors modulo 4 (wraps past 0: none)
    if (r == 0 || r >= body_vectors) return;
    split = (body_vectors - r) * N;
    shift_low = static_cast<std::ptrdiff_t>(r * N);
    shift_high = -static_cast<std::ptrdiff_t>(split);
  };
  auto pieces = [&]() {
    if (head > 0) StoreTailF32(d, pending->Piece(d, 0, head), pending_y, head);
    if (body_end < n) StoreTailF32(d, pending->Piece(d, body_end, n - body_end), pending_y + body_end, n - body_end);
  };
  auto finish = [&]() {
    split = n;
    shift_low = shift_high = 0;
    drain(0, n);
    hwy::FlushStream();
  };
  const bool prefetch = n * sizeof(T) <= kPrefetchRowBytes;
  const std::size_t lead = FetchLeadRows<T>(n);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::ptrdiff_t>(r) * xs;
    const float m = RMax(xr, n);
    if (!std::isfinite(m)) {
      finish();
      return r;
    }
    const Ahead<T> next{prefetch && r + lead < rows ? xr + static_cast<std::ptrdiff_t>(lead) * xs : nullptr, nullptr};
    if (pending) rotate_for(xr, pending_y);
    pending.emplace(pass(r, xr, m, next, drain));
    pending_y = y + static_cast<std::ptrdiff_t>(r) * ys;
    pieces();
  }
  finish();
  return rows;
}

// A softmax row pending in RowsFusedPipelined: its exps times 1 / their sum.
struct ScaledExps {
  const float* e;
  VF scale;
  VF Vector(DF d, std::size_t j) const { return hn::Mul(hn::LoadU(d, e + j), scale); }
  VF Piece(DF d, std::size_t j, std::size_t count) const {
    return hn::Mul(LoadTail(d, e + j, count, hn::Zero(d)), scale);
  }
};

// Streamed softmax rows, each row's scaling pass run inside the next row's exp pass
// (PipelinedRows): its exps wait in the other half of `buffer` (2n floats).
template <class T>
std::size_t RowsFusedPipelined(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows,
                               std::size_t n, const InverseTemperature& inv, float* buffer) {
  const auto pass = [&](std::size_t r, const T* xr, float m, const Ahead<T>& next,
                        const auto& drain) SMAX_INLINE_LAMBDA {
    float* e = buffer + (r % 2) * n;
    const ExpSum sum = RStoreSoftmaxExps</*kFetchIntoL2=*/true>(xr, e, n, m, inv, next, drain);
    return ScaledExps{e, hn::Set(DF(), static_cast<float>(1.0 / sum.below_max))};
  };
  return PipelinedRows<ScaledExps>(x, xs, y, ys, rows, n, pass);
}

template <class T>
std::size_t SoftmaxRows(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows, std::size_t n,
                        const InverseTemperature& inv, float* buffer, Stores stores) {
  const std::size_t N = hn::Lanes(DF());
  if (n == 0) return 0;
  // Three and four vectors a row across lanes ran faster in cache (48: 1.36x, 64:
  // 1.08x) but from memory at 0.66x and 0.49x (two threads): a block reads each row a
  // line at a time in turn, a stride the prefetchers do not follow (a prefetch of the
  // next block did not help).
  if constexpr (kHasRowsAcrossLanes) {
    if (n <= 2 * kRowsLanes) {
      const bool stream = stores == Stores::streaming && RowsAligned(y, ys);
      return ShortRowsAcrossLanes<LaneOp::softmax>(x, xs, y, ys, rows, n, inv, stream);
    }
  }
  if (n <= 2 * N) return RowsInRegistersT<T, 2>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 3 * N) return RowsInRegistersT<T, 3>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 4 * N) return RowsInRegistersT<T, 4>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 8 * N) return RowsInRegistersT<T, 8>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= kMaxRegisterVectors * N) {
    return RowsInRegistersT<T, kMaxRegisterVectors>(x, xs, y, ys, rows, n, inv, stores);
  }
  // 16-bit rows pipeline where aligned, or where their stores move away from the
  // loads: other bf16 rows ran 8-11% slower so than by the fused passes (seventeenth
  // session); 48 bytes past a page, rows of 1024 0.82x (thirty-first).
  const auto stores_move = [&] { return rows > 1 && StoresToMove(x + xs, y + AlignmentHead(DF(), y, n)) != 0; };
  const bool pipelines =
      RowsEquallyAligned(y, ys) && (std::is_same_v<T, float> || RowsAligned(y, ys) || stores_move());
  if (stores == Stores::streaming && pipelines && 2 * n <= kFusedMaxLength) {
    return RowsFusedPipelined(x, xs, y, ys, rows, n, inv, buffer);
  }
  return RowsFusedPasses(x, xs, y, ys, rows, n, inv, buffer, stores);
}

// A log_softmax row pending in LogRowsPipelinedT: (x - m) / T - log(d) from its input
// (still in cache).
template <bool kUnitT>
struct LogOutputs {
  const float* x;
  ArgConsts c;
  VF log_d;
  VF Vector(DF d, std::size_t j) const { return LogSoftmaxOutput<kUnitT>(c, log_d, LoadF32(d, x + j)); }
  VF Piece(DF d, std::size_t j, std::size_t count) const {
    return LogSoftmaxOutput<kUnitT>(c, log_d, LoadTailF32(d, x + j, count, hn::Zero(d)));
  }
};

// Streamed float log_softmax rows, each row's write pass run inside the next row's
// sum pass (PipelinedRows; from DRAM on AMD Zen 4, rows of 512 to 16384: 0.97-1.16x one
// thread, 1.09-1.27x two; output 16 bytes off a page, its stores moved: 1.13-1.33x
// and 1.08-1.36x; docs/PERFORMANCE.md, thirty-second and thirty-third sessions). bf16
// rows so ran 0.85-0.94x (rows of 4096 and 16384; 1024 1.01x): they keep two passes.
template <bool kUnitT>
std::size_t LogRowsPipelinedT(const float* x, std::ptrdiff_t xs, float* y, std::ptrdiff_t ys, std::size_t rows,
                              std::size_t n, const InverseTemperature& inv) {
  const auto pass = [&](std::size_t, const float* xr, float m, const Ahead<float>& next,
                        const auto& drain) SMAX_INLINE_LAMBDA {
    const ExpSum sum =
        RSumExp</*kFetchIntoL2=*/true>(xr, n, m, inv, /*count_at_max=*/true, /*backward=*/false, next, drain);
    return LogOutputs<kUnitT>{xr, ArgConsts(DF(), m, inv), hn::Set(DF(), LogOfSum(sum.at_max, sum.below_max))};
  };
  return PipelinedRows<LogOutputs<kUnitT>>(x, xs, y, ys, rows, n, pass);
}

// log_softmax of contiguous rows in one call (the general path's max, sum and write
// passes took a dispatch and a finish per row: 82 ns a row of 10 floats): rows of
// at most two vectors across lanes, rows of up to 16 vectors in registers (a group at
// a time), others by the sum with the terms at the max counted apart (log(d) =
// log1p(d - 1) keeps a dominant max's tiny rest), the next row fetched meanwhile (and
// for float rows of up to kFetchOutputRowBytes whose output goes through the cache,
// this row's output lines, for writing: from DRAM 8 x 16384 to 1024 x 1024 1.09-1.35x
// one thread, 1.01-1.15x two, 1 x 32000 1.25x; bf16 0.97-1.10x, left out), and (x -
// m) / T - log(d), the next row's max found beside it (its loads fill the cycles of a
// pass that does one subtraction a vector), as RowsFusedPasses does; not where the
// output streams (loads of the next row between streaming stores: 16384 x 1000 and
// 4096 x 4096 from DRAM 0.74-0.83x).
template <class T>
std::size_t LogSoftmaxRows(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows, std::size_t n,
                           const InverseTemperature& inv, Stores stores) {
  if (n == 0) return 0;
  if constexpr (kHasRowsAcrossLanes) {
    if (n <= 2 * kRowsLanes) {
      const bool stream = stores == Stores::streaming && RowsAligned(y, ys);
      return ShortRowsAcrossLanes<LaneOp::log_softmax>(x, xs, y, ys, rows, n, inv, stream);
    }
  }
  const std::size_t N = hn::Lanes(DF());
  if (n <= 2 * N) return LogRowsInRegistersT<T, 2>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 3 * N) return LogRowsInRegistersT<T, 3>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 4 * N) return LogRowsInRegistersT<T, 4>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= 8 * N) return LogRowsInRegistersT<T, 8>(x, xs, y, ys, rows, n, inv, stores);
  if (n <= kMaxRegisterVectors * N) {
    return LogRowsInRegistersT<T, kMaxRegisterVectors>(x, xs, y, ys, rows, n, inv, stores);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (Streams(stores, y) && rows > 1 && n * sizeof(T) <= kPrefetchRowBytes && RowsEquallyAligned(y, ys)) {
      return inv.unit ? LogRowsPipelinedT<true>(x, xs, y, ys, rows, n, inv)
                      : LogRowsPipelinedT<false>(x, xs, y, ys, rows, n, inv);
    }
  }
  const bool prefetch = n * sizeof(T) <= kPrefetchRowBytes;
  // Every row of y lies as far past its element's alignment as y (Streams' test).
  const bool streams = Streams(stores, y);
  const bool fetch_y = std::is_same_v<T, float> && n * sizeof(T) <= kFetchOutputRowBytes && !streams;
  float m = rows > 0 ? RMax(x, n) : 0.0f;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::ptrdiff_t>(r) * xs;
    T* yr = y + static_cast<std::ptrdiff_t>(r) * ys;
    if (!std::isfinite(m)) return r;
    const Ahead<T> next{prefetch && r + 1 < rows ? xr + xs : nullptr, fetch_y ? yr : nullptr};
    const ExpSum sum = RSumExp(xr, n, m, inv, /*count_at_max=*/true, /*backward=*/false, next);
    const float log_d = LogOfSum(sum.at_max, sum.below_max);
    const T* x_next = r + 1 < rows ? xr + xs : nullptr;
    if (x_next != nullptr && !streams) {
      MaxLanes<T, 2> next_max;
      LogSoftmaxNormalize(xr, yr, n, m, inv, log_d, false, stores,
                          [&](std::size_t i, std::size_t count) { next_max.Add(x_next + i, count); });
      m = next_max.Result(x_next, n);
    } else {
      LogSoftmaxNormalize(xr, yr, n, m, inv, log_d, false, stores);
      if (x_next != nullptr) m = RMax(x_next, n);
    }
  }
  return rows;
}

void ExpArray(const float* z, const float* z_lo, float* y, std::size_t n, bool coarse) {
  const DF d;
  if (coarse) {
    Map(d, z, y, n, false, [&](VF v) { return ExpFlushCoarse(d, v); });
    return;
  }
  Walk<1>(
      d, n, false,
      [&](std::size_t i) { hn::StoreU(ExpFlush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i) { hn::StoreU(ExpFlush(d, hn::LoadU(d, z + i), hn::LoadU(d, z_lo + i)), d, y + i); },
      [&](std::size_t i, std::size_t count) {
        StoreTail(d, ExpFlush(d, LoadTail(d, z + i, count, hn::Zero(d)), LoadTail(d, z_lo + i, count, hn::Zero(d))),
                  y + i, count);
      });
}

bool ExpMinusMaxArray(const float* x, float* y, std::size_t n, float m, ExpMinusMaxForm form, bool table,
                      bool marks_max, bool coarse) {
  const DF d;
  auto run = [&](const auto exp_of) {
    Map(d, x, y, n, false, [&](VF v) {
      VF z;
      return exp_of(d, v, z);
    });
    return true;
  };
  const InverseTemperature unit = InverseTemperature::of(1.0);
  if (!FoldsMax(m, unit)) {
    if (form == ExpMinusMaxForm::times_2_64) return false;
    return form == ExpMinusMaxForm::gradual ? WithExp<bfloat16>(m, unit, run) : WithExp<float>(m, unit, run);
  }
  const auto folded = [&](auto range) {
    constexpr ExpRange kRange = decltype(range)::value;
    if (marks_max) return WithFoldedExp<kRange, true>(d, m, run, table);
    return coarse ? WithFoldedExp<kRange, false, true>(d, m, run, table) : WithFoldedExp<kRange, false>(d, m, run, table);
  };
  switch (form) {
    case ExpMinusMaxForm::flush:
      return folded(std::integral_constant<ExpRange, ExpRange::flush>());
    case ExpMinusMaxForm::gradual:
      return folded(std::integral_constant<ExpRange, ExpRange::gradual>());
    case ExpMinusMaxForm::times_2_64:
      return folded(std::integral_constant<ExpRange, ExpRange::times_2_64>());
  }
  return false;
}

template <class T>
void Convert(const T* x, float* wide, T* y, std::size_t n) {
  const DF d;
  Map(d, x, wide, n, false, [](VF v) { return v; });
  Map(d, wide, y, n, false, [](VF v) { return v; });
}

// Plain names per storage type, for HWY_EXPORT.
#define SMAX_ROW_KERNELS(Suffix, T)                                                                              \
  float RMax##Suffix(const T* x, std::size_t n) { return RMax(x, n); }                                          \
  ExpSum RSumExp##Suffix(const T* x, std::size_t n, float m, const InverseTemperature& inv, bool count_at_max,  \
                         bool back, const Ahead<T>& ahead) {                                                    \
    return RSumExp(x, n, m, inv, count_at_max, back, ahead);                                                    \
  }                                                                                                             \
  ExpSum RStoreExp##Suffix(const T* x, float* e, std::size_t n, float m, const InverseTemperature& inv,          \
                           const Ahead<T>& ahead) {                                                             \
    return RStoreExp(x, e, n, m, inv, ahead);                                                                   \
  }                                                                                                             \
  ExpSumAndNextMax RSumExpAndNextMax##Suffix(const T* x, std::size_t n, float m, const InverseTemperature& inv,     \
                                             bool count_at_max, const T* x_next, std::size_t n_next) {          \
    return RSumExpAndNextMax(x, n, m, inv, count_at_max, x_next, n_next);                                       \
  }                                                                                                             \
  GuessedExpSum RStoreExpFromGuess##Suffix(const T* x, float* e, std::size_t n, const InverseTemperature& inv,  \
                                           const Ahead<T>& ahead) {                                             \
    return ExpsFromGuess<true>(x, e, n, inv, ahead);                                                            \
  }                                                                                                             \
  GuessedExpSum RSumExpFromGuess##Suffix(const T* x, std::size_t n, const InverseTemperature& inv,              \
                                         const Ahead<T>& ahead) {                                               \
    return ExpsFromGuess<false>(x, static_cast<float*>(nullptr), n, inv, ahead);                                \
  }                                                                                                             \
  void VScale##Suffix(const float* e, T* y, std::size_t n, float scale, bool stream) {                          \
    VScaleExps(e, y, n, scale, stream);                                                                         \
  }                                                                                                             \
  std::size_t SoftmaxRows##Suffix(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows,     \
                                  std::size_t n, const InverseTemperature& inv, float* buffer, Stores stores) { \
    return SoftmaxRows(x, xs, y, ys, rows, n, inv, buffer, stores);                                             \
  }                                                                                                             \
  std::size_t LogSoftmaxRows##Suffix(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows,  \
                                     std::size_t n, const InverseTemperature& inv, Stores stores) {             \
    return LogSoftmaxRows(x, xs, y, ys, rows, n, inv, stores);                                                  \
  }                                                                                                             \
  void SoftmaxNormalize##Suffix(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv, float scale, \
                                bool back, const Ahead<T>& ahead, Stores stores) {                              \
    SoftmaxNormalize(x, y, n, m, inv, scale, back, ahead, stores);                                              \
  }                                                                                                             \
  void LogSoftmaxNormalize##Suffix(const T* x, T* y, std::size_t n, float m, const InverseTemperature& inv,           \
                                   float log_d, bool back, Stores stores) {                                     \
    LogSoftmaxNormalize(x, y, n, m, inv, log_d, back, stores);                                                  \
  }

SMAX_ROW_KERNELS(F32, float)
SMAX_ROW_KERNELS(F16, half)
SMAX_ROW_KERNELS(BF16, bfloat16)
#undef SMAX_ROW_KERNELS

void ConvertF16(const half* x, float* wide, half* y, std::size_t n) { Convert(x, wide, y, n); }
void ConvertBF16(const bfloat16* x, float* wide, bfloat16* y, std::size_t n) { Convert(x, wide, y, n); }

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::cpu::simd {

#define SMAX_EXPORT_ROW_KERNELS(Suffix, T)                                                                        \
  HWY_EXPORT(RMax##Suffix);                                                                                       \
  HWY_EXPORT(RSumExp##Suffix);                                                                                    \
  HWY_EXPORT(RStoreExp##Suffix);                                                                                  \
  HWY_EXPORT(RSumExpAndNextMax##Suffix);                                                                          \
  HWY_EXPORT(RStoreExpFromGuess##Suffix);                                                                         \
  HWY_EXPORT(RSumExpFromGuess##Suffix);                                                                           \
  HWY_EXPORT(VScale##Suffix);                                                                                     \
  HWY_EXPORT(SoftmaxRows##Suffix);                                                                                \
  std::size_t f32_softmax_rows(const T* x, std::ptrdiff_t x_row_stride, T* y, std::ptrdiff_t y_row_stride,        \
                               std::size_t rows, std::size_t n, double inv_t, float* buffer, Stores stores) {     \
    return HWY_DYNAMIC_DISPATCH(SoftmaxRows##Suffix)(x, x_row_stride, y, y_row_stride, rows, n,                   \
                                                     InverseTemperature::of(inv_t), buffer, stores);              \
  }                                                                                                               \
  HWY_EXPORT(LogSoftmaxRows##Suffix);                                                                             \
  std::size_t f32_log_softmax_rows(const T* x, std::ptrdiff_t x_row_stride, T* y, std::ptrdiff_t y_row_stride,    \
                                   std::size_t rows, std::size_t n, double inv_t, Stores stores) {                \
    return HWY_DYNAMIC_DISPATCH(LogSoftmaxRows##Suffix)(x, x_row_stride, y, y_row_stride, rows, n,                \
                                                        InverseTemperature::of(inv_t), stores);                   \
  }                                                                                                               \
  HWY_EXPORT(SoftmaxNormalize##Suffix);                                                                           \
  HWY_EXPORT(LogSoftmaxNormalize##Suffix);                                                                        \
  float f32_rmax(const T* x, std::size_t n) { return HWY_DYNAMIC_DISPATCH(RMax##Suffix)(x, n); }                  \
  ExpSum f32_rsum_exp_minus_max(const T* x, std::size_t n, float m, double inv_t, bool count_at_max,             \
                                bool backward, const Ahead<T>& ahead) {                                           \
    return HWY_DYNAMIC_DISPATCH(RSumExp##Suffix)(x, n, m, InverseTemperature::of(inv_t), count_at_max, backward,  \
                                                 ahead);                                                          \
  }                                                                                                               \
  ExpSumAndNextMax f32_rsum_exp_minus_max_and_next_max(const T* x, std::size_t n, float m, double inv_t,          \
                                                       bool count_at_max, const T* x_next, std::size_t n_next) {  \
    return HWY_DYNAMIC_DISPATCH(RSumExpAndNextMax##Suffix)(x, n, m, InverseTemperature::of(inv_t), count_at_max,  \
                                                           x_next, n_next);                                       \
  }                                                                                                               \
  ExpSum f32_rstore_exp_minus_max(const T* x, float* e, std::size_t n, float m, double inv_t,                     \
                                  const Ahead<T>& ahead) {                                                        \
    return HWY_DYNAMIC_DISPATCH(RStoreExp##Suffix)(x, e, n, m, InverseTemperature::of(inv_t), ahead);             \
  }                                                                                                               \
  GuessedExpSum f32_rstore_exp_from_guess(const T* x, float* e, std::size_t n, double inv_t,                       \
                                          const Ahead<T>& ahead) {                                                \
    return HWY_DYNAMIC_DISPATCH(RStoreExpFromGuess##Suffix)(x, e, n, InverseTemperature::of(inv_t), ahead);       \
  }                                                                                                               \
  GuessedExpSum f32_rsum_exp_from_guess(const T* x, std::size_t n, double inv_t, const Ahead<T>& ahead) {         \
    return HWY_DYNAMIC_DISPATCH(RSumExpFromGuess##Suffix)(x, n, InverseTemperature::of(inv_t), ahead);            \
  }                                                                                                               \
  void f32_vscale(const float* e, T* y, std::size_t n, float scale, bool stream) {                                \
    HWY_DYNAMIC_DISPATCH(VScale##Suffix)(e, y, n, scale, stream);                                                 \
  }                                                                                                               \
  void f32_softmax_normalize(const T* x, T* y, std::size_t n, float m, double inv_t, float scale, bool backward,   \
                             const Ahead<T>& ahead, Stores stores) {                                              \
    HWY_DYNAMIC_DISPATCH(SoftmaxNormalize##Suffix)                                                                \
    (x, y, n, m, InverseTemperature::of(inv_t), scale, backward, ahead, stores);                                  \
  }                                                                                                               \
  void f32_log_softmax_normalize(const T* x, T* y, std::size_t n, float m, double inv_t, float log_d,             \
                                 bool backward, Stores stores) {                                                  \
    HWY_DYNAMIC_DISPATCH(LogSoftmaxNormalize##Suffix)                                                             \
    (x, y, n, m, InverseTemperature::of(inv_t), log_d, backward, stores);                                         \
  }

SMAX_EXPORT_ROW_KERNELS(F32, float)
SMAX_EXPORT_ROW_KERNELS(F16, half)
SMAX_EXPORT_ROW_KERNELS(BF16, bfloat16)
#undef SMAX_EXPORT_ROW_KERNELS

HWY_EXPORT(ExpArray);
HWY_EXPORT(ExpMinusMaxArray);
HWY_EXPORT(ConvertF16);
HWY_EXPORT(ConvertBF16);

void f32_exp_flush(const float* z, const float* z_lo, float* y, std::size_t n, bool coarse) {
  HWY_DYNAMIC_DISPATCH(ExpArray)(z, z_lo, y, n, coarse);
}

bool f32_exp_minus_max(const float* x, float* y, std::size_t n, float m, ExpMinusMaxForm form, bool table,
                       bool marks_max, bool coarse) {
  return HWY_DYNAMIC_DISPATCH(ExpMinusMaxArray)(x, y, n, m, form, table, marks_max, coarse);
}

void f32_convert(const half* x, float* wide, half* y, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ConvertF16)(x, wide, y, n);
}

void f32_convert(const bfloat16* x, float* wide, bfloat16* y, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(ConvertBF16)(x, wide, y, n);
}

}  // namespace smax::cpu::simd
#endif  // HWY_ONCE
