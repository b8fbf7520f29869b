// Softmax and log_softmax of short rows (f32, f16 or bf16 storage, float lanes; at
// most two vectors: MoE routers' 8 to 32 experts, classifiers' 10 classes, small
// windows) a vector's lanes of rows at a time, each row in one lane: a block of 16 rows
// (AVX-512; 8 with AVX2, and for rows of at most 8) is transposed in registers, a
// vector of each row at a time, so that its max, its exp's split (per lane), its sum
// and 1 / d are lane arithmetic over column vectors, then transposed back. Where such a
// row runs alone (SoftmaxInRegistersT), its max and sum are reductions across lanes
// and its split is scalar double code: a chain the core overlaps only a few rows deep,
// about 21 ns a row of 4 to 32 elements (AMD Zen 4 VM, in cache, one thread: 0.9 of
// oneDNN's speed at 16). Here nothing crosses lanes but the transposes (64 shuffles
// per 16 x 16 elements, 24 per 8 x 8, each way): 4.1 times as fast at 8 elements, 2.7
// at 16, 1.5 at 32 (in cache, one thread; docs/PERFORMANCE.md). Any temperature: at
// T != 1 the exps fold x / T as the row kernels' do (LaneExp).
//
// Each lane does the same arithmetic whatever block, thread or position it lands in
// (the transposes only move data), so results do not depend on the thread count.
// Rows this form cannot take (a NaN, or a max that is infinite or beyond the table's
// range, LaneExp::Limit) are left to the caller by returning at the first of them: the
// choice depends on the row alone.
//
// Accuracy as the row kernels': their exps (LaneExp), each group of four terms
// summed in float (two roundings) and the groups in double lanes, 1 / d in double,
// rounded once to float; log_softmax's log(d) as log1p(d - 1) in double lanes with the
// terms at the max counted apart (LaneNormalizer), and (x - m) / T - log(d) in float.
//
// The -inl.h convention: included once per target by f32_rows.cpp.
#if defined(SMAX_CPU_SIMD_ROWS_ACROSS_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_ROWS_ACROSS_LANES_INL_H_
#undef SMAX_CPU_SIMD_ROWS_ACROSS_LANES_INL_H_
#else
#define SMAX_CPU_SIMD_ROWS_ACROSS_LANES_INL_H_
#endif

#include <cstddef>
#include <limits>

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "core/cache_line.hpp"
#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp_minus_max-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// What a block computes: exp(x - m) / d, or (x - m) - log(d).
enum class LaneOp { softmax, log_softmax };

#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
inline constexpr bool kHasRowsAcrossLanes = true;

using RowsD = hn::ScalableTag<float>;  // 16 lanes on AVX-512, 8 on AVX2
inline constexpr std::size_t kRowsLanes = hn::MaxLanes(RowsD());
using HalfRowsD = hn::Full256<float>;  // 8 lanes: rows of at most 8 on AVX-512 too

// The lanes x lanes floats of v (16 or 8 lanes) transposed in place: lane j of v[i]
// becomes lane i of v[j]. Rounds of two-operand shuffles: 32-bit, 64-bit, then
// 128-bit blocks (twice with 512-bit vectors' four blocks).
template <class V, std::size_t kLanes>
HWY_INLINE void Transpose(V (&v)[kLanes]) {
  static_assert(kLanes == 16 || kLanes == 8);
#if HWY_TARGET <= HWY_AVX3
  if constexpr (kLanes == 16) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(v[i].raw, v[i + 1].raw);
      t[i + 1] = _mm512_unpackhi_ps(v[i].raw, v[i + 1].raw);
    }
    // u[4g + c] holds, in each 128-bit block b, element 4b + c of rows 4g .. 4g + 3.
    for (int g = 0; g < 4; ++g) {
      const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
      const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
      u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; ++c) {
      // Blocks 0 and 2, then 1 and 3, of rows 0-3 with rows 4-7 (and 8-11 with 12-15).
      const __m512 even_low = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
      const __m512 odd_low = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
      const __m512 even_high = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
      const __m512 odd_high = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
      v[c].raw = _mm512_shuffle_f32x4(even_low, even_high, 0x88);      // element c (block 0)
      v[8 + c].raw = _mm512_shuffle_f32x4(even_low, even_high, 0xDD);  // element 8 + c (block 2)
      v[4 + c].raw = _mm512_shuffle_f32x4(odd_low, odd_high, 0x88);    // element 4 + c (block 1)
      v[12 + c].raw = _mm512_shuffle_f32x4(odd_low, odd_high, 0xDD);   // element 12 + c (block 3)
    }
    return;
  }
#endif
  if constexpr (kLanes == 8) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(v[i].raw, v[i + 1].raw);
      t[i + 1] = _mm256_unpackhi_ps(v[i].raw, v[i + 1].raw);
    }
    // u[4g + c] holds, in each 128-bit block b, element 4b + c of rows 4g .. 4g + 3.
    for (int g = 0; g < 2; ++g) {
      u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
      v[c].raw = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);      // element c (block 0)
      v[4 + c].raw = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);  // element 4 + c (block 1)
    }
  }
}

// The exp of each lane's own max m (finite, within Limit() in size at unit
// temperature; m / T within it otherwise): 512-bit vectors' table form
// (TableLanes::PerLane, 1.08 ulp), else the polynomial (MaxSplitLanes, 1.25 ulp). At T
// != 1 (kUnitT false) both fold (x - m) / T as the row kernels' ScaledFoldedExp does:
// p = hi x and its rest p_lo go in, against the split of M = hi m rounded, whose
// rest (hi m - M, exact, plus lo m) joins the split's delta.
template <class Split, class D, class V = hn::Vec<D>>
struct LaneExpOf {
  Split split;
  V hi, lo;
  LaneExpOf(D d, V m, V t_hi, V t_lo, bool unit) : split(SplitOf(d, m, t_hi, t_lo, unit)), hi(t_hi), lo(t_lo) {}
  static Split SplitOf(D d, V m, V t_hi, V t_lo, bool unit) {
    if (unit) return Split::PerLane(d, m);
    const V scaled = hn::Mul(m, t_hi);
    Split s = Split::PerLane(d, scaled);
    s.delta = hn::Add(s.delta, hn::MulAdd(m, t_lo, hn::MulSub(m, t_hi, scaled)));
    return s;
  }
};

template <class D, ExpRange kRange, bool kUnitT, class V = hn::Vec<D>, bool kTable = kHasScalef<V>>
struct LaneExp;

template <class D, ExpRange kRange, bool kUnitT, class V>
struct LaneExp<D, kRange, kUnitT, V, false> : LaneExpOf<MaxSplitLanes<D>, D> {
  static constexpr float Limit() { return 16384.0f; }
  LaneExp(D d, V m, V t_hi, V t_lo) : LaneExpOf<MaxSplitLanes<D>, D>(d, m, t_hi, t_lo, kUnitT) {}
  HWY_INLINE V operator()(D d, V x) const {
    V unused;
    if constexpr (kUnitT) return ExpMinusMax<kRange>(d, this->split, x, unused);
    const V p = hn::Mul(x, this->hi);
    return ExpMinusMax<kRange>(d, this->split, p, hn::MulAdd(x, this->lo, hn::MulSub(x, this->hi, p)), unused);
  }
};

#if HWY_TARGET <= HWY_AVX3
template <class D, ExpRange kRange, bool kUnitT, class V>
struct LaneExp<D, kRange, kUnitT, V, true> : LaneExpOf<TableLanes<D>, D> {
  static constexpr float Limit() { return 600.0f; }
  LaneExp(D d, V m, V t_hi, V t_lo) : LaneExpOf<TableLanes<D>, D>(d, m, t_hi, t_lo, kUnitT) {}
  HWY_INLINE V operator()(D d, V x) const {
    V unused;
    if constexpr (kUnitT) return ExpMinusMaxTable<kRange>(d, this->split, x, unused);
    const V p = hn::Mul(x, this->hi);
    return ExpMinusMaxTable<kRange>(d, this->split, p, hn::MulAdd(x, this->lo, hn::MulSub(x, this->hi, p)), unused);
  }
};
#endif

// The exps' range: bf16 takes them 2^64 too large (never subnormal), which softmax's
// 1 / d takes back in the one product that rounds its subnormal results, as the row
// kernels' softmax does, and log_softmax's sum in double lanes (its bf16 outputs keep
// -log(1 + tiny) at the max down to float's subnormals); the others flush below
// FLT_MIN.
template <class T>
inline constexpr ExpRange kLaneRange = std::is_same_v<T, bfloat16> ? ExpRange::times_2_64 : ExpRange::flush;

// A block's max per lane and, apart (x86's max drops a NaN by operand order), a sum
// that is NaN where the row holds a NaN (or both infinities, whose max is not finite
// anyway), over its columns in four chains.
template <class D, ExpRange kRange>
struct BlockStats {
  using V = hn::Vec<D>;
  V max4[4], sum4[4];
  explicit BlockStats(D d) {
    for (int k = 0; k < 4; ++k) {
      max4[k] = hn::Set(d, -std::numeric_limits<float>::infinity());
      sum4[k] = hn::Zero(d);
    }
  }
  HWY_INLINE void Add(std::size_t j, V column) {
    max4[j % 4] = hn::Max(max4[j % 4], column);
    sum4[j % 4] = hn::Add(sum4[j % 4], column);
  }
  // The exp of the rows this form takes (a finite max within LaneExp's range, no NaN;
  // any exp in the other lanes), each lane's max in m (0 in the other lanes), and in
  // `done` how many of the first `block` rows lead before one it does not take. 1/T =
  // t_hi + t_lo (1 and 0 with kUnitT).
  template <bool kUnitT>
  HWY_INLINE LaneExp<D, kRange, kUnitT> Taken(D d, V t_hi, V t_lo, std::size_t block, std::size_t& done, V& m) const {
    m = hn::Max(hn::Max(max4[0], max4[1]), hn::Max(max4[2], max4[3]));
    const V any = hn::Add(hn::Add(sum4[0], sum4[1]), hn::Add(sum4[2], sum4[3]));
    const V size = hn::Abs(kUnitT ? m : hn::Mul(m, t_hi));
    const auto takes = hn::AndNot(hn::IsNaN(any), hn::Le(size, hn::Set(d, LaneExp<D, kRange, kUnitT>::Limit())));
    done = HWY_LIKELY(hn::AllTrue(d, takes)) ? block : hn::FindKnownFirstTrue(d, hn::Not(takes));
    m = hn::IfThenElseZero(takes, m);
    return LaneExp<D, kRange, kUnitT>(d, m, t_hi, t_lo);
  }
};

// A block's sums per lane in double lanes, each group of four terms summed in float
// (two roundings, as the row kernels' sums allow), then widened, and the output they
// make. Softmax: the outputs are the exps times 1 / d, rounded once to float.
// log_softmax: the terms at the row's max (exactly 1 each) are counted apart from the
// others, so that log(d) = log1p((at_max - 1) + others) keeps a dominant max's tiny
// rest (the row kernels' kCountAtMax); the outputs are (x - m) / T - log(d) in float
// (1/T as its float t_hi, as LogSoftmaxNormalizeT), two terms <= 0 that never cancel.
// kRange times_2_64: the exps are 2^64 too large, as softmax's scaling wants them;
// log_softmax takes the factor out of its double sum.
template <class D, LaneOp kOp, ExpRange kRange, bool kUnitT>
struct LaneNormalizer {
  using V = hn::Vec<D>;
  using DD = hn::Repartition<double, D>;
  hn::Vec<DD> low, high;  // d, or log_softmax's terms below the max
  V m, t_hi, at_max, factor;  // factor: 1 / d, or log(d)
  LaneNormalizer(D d, V max, V inv_t)
      : low(hn::Zero(DD())), high(hn::Zero(DD())), m(max), t_hi(inv_t), at_max(hn::Zero(d)), factor(m) {}

  // The exps e0..e3 of four columns c0..c3.
  HWY_INLINE void Add4(D d, V c0, V c1, V c2, V c3, V e0, V e1, V e2, V e3) {
    if constexpr (kOp == LaneOp::log_softmax) {
      const V one = hn::Set(d, 1.0f);
      const auto a0 = hn::Eq(c0, m), a1 = hn::Eq(c1, m), a2 = hn::Eq(c2, m), a3 = hn::Eq(c3, m);
      at_max = hn::Add(at_max, hn::Add(hn::Add(hn::IfThenElseZero(a0, one), hn::IfThenElseZero(a1, one)),
                                       hn::Add(hn::IfThenElseZero(a2, one), hn::IfThenElseZero(a3, one))));
      e0 = hn::IfThenZeroElse(a0, e0);
      e1 = hn::IfThenZeroElse(a1, e1);
      e2 = hn::IfThenZeroElse(a2, e2);
      e3 = hn::IfThenZeroElse(a3, e3);
    } else {
      (void)c0, (void)c1, (void)c2, (void)c3;
    }
    const hn::Half<D> dh;
    const V group = hn::Add(hn::Add(e0, e1), hn::Add(e2, e3));
    low = hn::Add(low, hn::PromoteTo(DD(), hn::LowerHalf(dh, group)));
    high = hn::Add(high, hn::PromoteTo(DD(), hn::UpperHalf(dh, group)));
  }

  // Once every column is in.
  HWY_INLINE void Finish(D d) {
    const DD dd;
    const hn::Half<D> dh;
    if constexpr (kOp == LaneOp::softmax) {
      const auto one = hn::Set(dd, 1.0);
      factor = hn::Combine(d, hn::DemoteTo(dh, hn::Div(one, high)), hn::DemoteTo(dh, hn::Div(one, low)));
    } else {
      const auto log_d = [&](hn::Vec<DD> others, hn::Vec<DD> count) {
        if constexpr (kRange == ExpRange::times_2_64) others = hn::Mul(others, hn::Set(dd, 0x1p-64));
        const auto d_minus_one = hn::Add(hn::Sub(count, hn::Set(dd, 1.0)), others);
        return hn::DemoteTo(dh, hn::Log1p(dd, hn::Max(d_minus_one, hn::Zero(dd))));  // >= 0 but in untaken lanes
      };
      factor = hn::Combine(d, log_d(high, hn::PromoteTo(dd, hn::UpperHalf(dh, at_max))),
                           log_d(low, hn::PromoteTo(dd, hn::LowerHalf(dh, at_max))));
    }
  }

  // The output of an element: its exp for softmax, the element itself for log_softmax.
  HWY_INLINE V Out(V v) const {
    if constexpr (kOp == LaneOp::softmax) return hn::Mul(v, factor);
    const V x_minus_m = hn::Sub(v, m);
    return hn::Sub(kUnitT ? x_minus_m : hn::Mul(x_minus_m, t_hi), factor);
  }
};

// Rows [0, rows) of 1 <= n <= kRowsLanes elements, x and y rows xs and ys elements
// apart; returns the rows done (all, or up to the first this form leaves). With
// `stream`, whole rows at aligned addresses go out with streaming stores. All columns
// are computed (those past n are -inf, whose exps are 0), so that the loops have fixed
// counts and the columns stay in registers: softmax's exps replace them, log_softmax
// keeps them.
template <LaneOp kOp, bool kUnitT, class D, class T>
HWY_INLINE std::size_t RowsAcrossLanes(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys, std::size_t rows,
                                       std::size_t n, const InverseTemperature& inv, bool stream) {
  using V = hn::Vec<D>;
  const D d;
  const V t_hi = hn::Set(d, inv.hi), t_lo = hn::Set(d, inv.lo);
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (std::size_t first = 0; first < rows; first += kLanes) {
    const std::size_t block = rows - first < kLanes ? rows - first : kLanes;
    // c[j]: element j of every row of the block, one row a lane (rows past the block
    // are zeros, elements past n -inf).
    V c[kLanes];
    for (std::size_t i = 0; i < kLanes; ++i) {
      const T* p = x + static_cast<std::ptrdiff_t>(first + i) * xs;
      if (HWY_UNLIKELY(i >= block)) c[i] = hn::Zero(d);
      else if (n == kLanes) c[i] = LoadF32(d, p);
      else c[i] = LoadTailF32(d, p, n, neg_inf);
    }
    Transpose(c);
    BlockStats<D, kLaneRange<T>> stats(d);
    for (std::size_t j = 0; j < kLanes; ++j) stats.Add(j, c[j]);
    std::size_t done = 0;
    V m;
    const LaneExp<D, kLaneRange<T>, kUnitT> exp_of = stats.template Taken<kUnitT>(d, t_hi, t_lo, block, done, m);
    LaneNormalizer<D, kOp, kLaneRange<T>, kUnitT> out(d, m, t_hi);
    for (std::size_t j = 0; j < kLanes; j += 4) {
      V e[4];
      for (std::size_t k = 0; k < 4; ++k) e[k] = exp_of(d, c[j + k]);
      out.Add4(d, c[j], c[j + 1], c[j + 2], c[j + 3], e[0], e[1], e[2], e[3]);
      if constexpr (kOp == LaneOp::softmax) {
        for (std::size_t k = 0; k < 4; ++k) c[j + k] = e[k];
      }
    }
    out.Finish(d);
    for (std::size_t j = 0; j < kLanes; ++j) c[j] = out.Out(c[j]);
    Transpose(c);
    for (std::size_t i = 0; i < done; ++i) {
      T* out = y + static_cast<std::ptrdiff_t>(first + i) * ys;
      if (n < kLanes) StoreTailF32(d, c[i], out, n);
      else if (stream) StreamF32</*kNotNaN=*/true>(d, c[i], out);
      else StoreF32NotNaN(d, c[i], out);
    }
    if (HWY_UNLIKELY(done < block)) {
      if (stream) hwy::FlushStream();
      return first + done;
    }
  }
  if (stream) hwy::FlushStream();
  return rows;
}

// The same for rows of kRowsLanes < n <= kRowsLanes * kChunks elements, their
// columns (softmax: then their exps) waiting in an aligned buffer between the passes:
// left to the compiler, 32 columns spilled (rows of 32 ran 1.1 times as fast as
// SoftmaxInRegistersT, against 1.45 so; in registers, one vector's ran 15% faster
// than through the buffer).
template <LaneOp kOp, bool kUnitT, std::size_t kChunks, class D = RowsD, class T>
HWY_INLINE std::size_t RowsAcrossLanesBuffered(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys,
                                               std::size_t rows, std::size_t n, const InverseTemperature& inv,
                                               bool stream) {
  static_assert(kChunks >= 2 && kChunks <= 4);
  using V = hn::Vec<D>;
  const D d;
  const V t_hi = hn::Set(d, inv.hi), t_lo = hn::Set(d, inv.lo);
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  // A row's chunks go out at different times: streamed, a chunk of part of a line would
  // leave the line to be written in pieces (bf16 rows of 32 from memory ran at 0.75x).
  stream = stream && kLanes * sizeof(T) % smax::detail::kCacheLineBytes == 0;
  constexpr std::size_t kColumns = kChunks * kLanes;
  const std::size_t last = (n - 1) / kLanes;    // the last chunk holding elements
  const std::size_t tail = n - last * kLanes;   // its elements, 1 .. kLanes
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  HWY_ALIGN float buffer[kColumns * kLanes];
  const auto column = [&](std::size_t j) { return buffer + j * kLanes; };
  for (std::size_t first = 0; first < rows; first += kLanes) {
    const std::size_t block = rows - first < kLanes ? rows - first : kLanes;
    // Column j: element j of every row of the block, one row a lane (rows past the
    // block are zeros, elements past n -inf).
    BlockStats<D, kLaneRange<T>> stats(d);
    for (std::size_t k = 0; k < kChunks; ++k) {
      V c[kLanes];
      for (std::size_t i = 0; i < kLanes; ++i) {
        const T* p = x + static_cast<std::ptrdiff_t>(first + i) * xs + k * kLanes;
        if (HWY_UNLIKELY(i >= block)) c[i] = hn::Zero(d);
        else if (k > last) c[i] = neg_inf;
        else if (k < last || tail == kLanes) c[i] = LoadF32(d, p);
        else c[i] = LoadTailF32(d, p, tail, neg_inf);
      }
      Transpose(c);
      for (std::size_t j = 0; j < kLanes; ++j) {
        stats.Add(j, c[j]);
        hn::Store(c[j], d, column(k * kLanes + j));
      }
    }
    std::size_t done = 0;
    V m;
    const LaneExp<D, kLaneRange<T>, kUnitT> exp_of = stats.template Taken<kUnitT>(d, t_hi, t_lo, block, done, m);
    LaneNormalizer<D, kOp, kLaneRange<T>, kUnitT> out(d, m, t_hi);
    for (std::size_t j = 0; j < kColumns; j += 4) {
      V c[4], e[4];
      for (std::size_t k = 0; k < 4; ++k) {
        c[k] = hn::Load(d, column(j + k));
        e[k] = exp_of(d, c[k]);
        if constexpr (kOp == LaneOp::softmax) hn::Store(e[k], d, column(j + k));
      }
      out.Add4(d, c[0], c[1], c[2], c[3], e[0], e[1], e[2], e[3]);
    }
    out.Finish(d);
    for (std::size_t k = 0; k <= last; ++k) {
      V c[kLanes];
      for (std::size_t j = 0; j < kLanes; ++j) c[j] = out.Out(hn::Load(d, column(k * kLanes + j)));
      Transpose(c);
      for (std::size_t i = 0; i < done; ++i) {
        T* out = y + static_cast<std::ptrdiff_t>(first + i) * ys + k * kLanes;
        if (k == last && tail < kLanes) StoreTailF32(d, c[i], out, tail);
        else if (stream) StreamF32</*kNotNaN=*/true>(d, c[i], out);
        else StoreF32NotNaN(d, c[i], out);
      }
    }
    if (HWY_UNLIKELY(done < block)) {
      if (stream) hwy::FlushStream();
      return first + done;
    }
  }
  if (stream) hwy::FlushStream();
  return rows;
}

// Rows of 1 <= n <= 2 * kRowsLanes elements by the form that fits them.
template <LaneOp kOp, bool kUnitT, class T>
HWY_INLINE std::size_t ShortRowsAcrossLanesT(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys,
                                             std::size_t rows, std::size_t n, const InverseTemperature& inv,
                                             bool stream) {
  // Rows of at most 8 in blocks of 8 rows on AVX-512 too: blocks of 16 would compute
  // twice the columns (1024 x 8: 8.1 us against 5.4 in 8 lanes).
  if (n <= 8) return RowsAcrossLanes<kOp, kUnitT, HalfRowsD>(x, xs, y, ys, rows, n, inv, stream);
  if (n <= kRowsLanes) return RowsAcrossLanes<kOp, kUnitT, RowsD>(x, xs, y, ys, rows, n, inv, stream);
  return RowsAcrossLanesBuffered<kOp, kUnitT, 2>(x, xs, y, ys, rows, n, inv, stream);
}

template <LaneOp kOp, class T>
HWY_INLINE std::size_t ShortRowsAcrossLanes(const T* x, std::ptrdiff_t xs, T* y, std::ptrdiff_t ys,
                                            std::size_t rows, std::size_t n, const InverseTemperature& inv,
                                            bool stream) {
  if (inv.unit) return ShortRowsAcrossLanesT<kOp, true>(x, xs, y, ys, rows, n, inv, stream);
  return ShortRowsAcrossLanesT<kOp, false>(x, xs, y, ys, rows, n, inv, stream);
}
#else
inline constexpr bool kHasRowsAcrossLanes = false;
inline constexpr std::size_t kRowsLanes = 1;

template <LaneOp kOp, class T>
HWY_INLINE std::size_t ShortRowsAcrossLanes(const T*, std::ptrdiff_t, T*, std::ptrdiff_t, std::size_t, std::size_t,
                                            const InverseTemperature&, bool) {
  return 0;  // never called: kHasRowsAcrossLanes is false
}
#endif

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_ROWS_ACROSS_LANES_INL_H_
