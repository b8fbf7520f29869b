// The kernels of gradient_rows.hpp, written once over the storage type (float, half,
// bfloat16; see cpu/simd/convert-inl.h), compiled for every target Highway offers
// (foreach_target.h re-includes this file once per target) and dispatched at run
// time with HWY_DYNAMIC_DISPATCH.
#include "training/simd/gradient_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cache_line.hpp"
#include "cpu/simd/f32_rows.hpp"
#include "training/rows.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "training/simd/gradient_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "cpu/simd/argument-inl.h"
#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/exp_f64-inl.h"
#include "cpu/simd/exp_minus_max-inl.h"
#include "cpu/simd/max-inl.h"
#include "cpu/simd/sum-inl.h"
#include "cpu/simd/walk-inl.h"
#include "training/simd/wide-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::training::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace cs = smax::cpu::simd::HWY_NAMESPACE;

// Whole float vectors, for the kernels that run in float lanes.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <class T>
HWY_INLINE VF LoadFloats(DF df, const T* p, std::size_t count, VF fill) {
  return count == hn::Lanes(df) ? cs::LoadF32(df, p) : cs::LoadTailF32(df, p, count, fill);
}

// Pulls bytes [next.begin, next.end) of the next row's inputs towards L2 over a pass
// of n elements, in step with it: a line of each once the pass has reached its share
// of elements (a 16-bit fixed-point count of them, kept as the element at which the
// next line is due: one comparison a call between lines).
class PacedPrefetch {
 public:
  PacedPrefetch(const NextRow& next, std::size_t n)
      : a_(static_cast<const char*>(next.a)), b_(static_cast<const char*>(next.b)), line_(next.begin) {
    const std::size_t end = std::min(next.end, next.bytes);
    if (a_ == nullptr || n == 0 || line_ >= end) return;
    lines_ = (end - line_ + kLine - 1) / kLine;
    elements_per_line_ = (static_cast<std::uint64_t>(n) << 16) / lines_;
    due_ = 0;
  }

  HWY_INLINE void Reach(std::size_t i) {
    while ((static_cast<std::uint64_t>(i) << 16) >= due_) {
#if defined(__GNUC__) || defined(__clang__)
      __builtin_prefetch(a_ + line_, 0, 2);
      if (b_ != nullptr) __builtin_prefetch(b_ + line_, 0, 2);
#endif
      line_ += kLine;
      due_ = --lines_ == 0 ? kNever : due_ + elements_per_line_;
    }
  }

 private:
  static constexpr std::size_t kLine = smax::detail::kCacheLineBytes;
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};
  const char* a_;
  const char* b_;
  std::size_t line_;
  std::size_t lines_ = 0;
  std::uint64_t elements_per_line_ = 0;
  std::uint64_t due_ = kNever;
};

// Knuth's TwoSum, branch-free: a + b rounded, and its rounding error, exact.
template <class V>
HWY_INLINE V TwoSum(V a, V b, V& error) {
  const V t = hn::Add(a, b);
  const V b_part = hn::Sub(t, a);
  const V a_part = hn::Sub(t, b_part);
  error = hn::Add(hn::Sub(a, a_part), hn::Sub(b, b_part));
  return t;
}

// Per-lane compensated sums: each addition's rounding error is exact (TwoSum) and
// collected in `error`.
template <class D>
struct CompensatedLanes {
  hn::Vec<D> sum;
  hn::Vec<D> error;
  explicit CompensatedLanes(D d = D()) : sum(hn::Zero(d)), error(hn::Zero(d)) {}
  HWY_INLINE void Add(hn::Vec<D> v) {
    hn::Vec<D> e;
    sum = TwoSum(sum, v, e);
    error = hn::Add(error, e);
  }
};

// The exact sums of up to N rows' compensated lanes (N the lanes of a double vector):
// sum[r] and error[r] hold row r's, and after the call out[r] its SplitSum. Adjacent
// lanes pair by TwoSum (branch-free), level by level, the rows at once: a level's
// pairs of rows' vectors are gathered by ConcatEven and ConcatOdd, so that after log2
// N levels lane r holds row r; the errors, each far below the sum's last unit, follow
// the same tree plainly. Every operation is lanewise, so a row's result does not
// depend on the rows beside it (a row alone, JoinOne, gets the same bits). Against a
// row's own chain of scalar TwoSums (CompensatedSum's branch before, mispredicted
// about every other lane: 45 ns a row of 10 f32 on AMD Zen 4; branch-free, 24 ns) a
// level is one vector operation for all the rows. A non-finite plain sum (the lanes'
// error then holds NaN) is returned as is, with lo = 0; it does not depend on the
// order of the additions (the terms are products of two floats, far from double's
// overflow).
template <class D>
HWY_INLINE void JoinRows(D d, const CompensatedLanes<D>* rows, std::size_t count, SplitSum* out) {
  using V = hn::Vec<D>;
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  const std::size_t N = hn::Lanes(d);
  V sum[kMaxLanes], error[kMaxLanes];
  for (std::size_t r = 0; r < N; ++r) {
    sum[r] = r < count ? rows[r].sum : hn::Zero(d);
    error[r] = r < count ? rows[r].error : hn::Zero(d);
  }
#if HWY_TARGET != HWY_SCALAR  // one lane: nothing to join
  for (std::size_t width = N; width > 1; width /= 2) {
    for (std::size_t k = 0; k < width / 2; ++k) {
      V pair_error;
      const V t = TwoSum(hn::ConcatEven(d, sum[2 * k + 1], sum[2 * k]), hn::ConcatOdd(d, sum[2 * k + 1], sum[2 * k]),
                         pair_error);
      const V errors = hn::Add(hn::ConcatEven(d, error[2 * k + 1], error[2 * k]),
                               hn::ConcatOdd(d, error[2 * k + 1], error[2 * k]));
      error[k] = hn::Add(errors, pair_error);
      sum[k] = t;
    }
  }
#endif
  const V hi = hn::Add(sum[0], error[0]);
  const V lo = hn::Sub(error[0], hn::Sub(hi, sum[0]));
  const auto finite = hn::IsFinite(sum[0]);
  HWY_ALIGN double his[kMaxLanes];
  HWY_ALIGN double los[kMaxLanes];
  hn::Store(hn::IfThenElse(finite, hi, sum[0]), d, his);
  hn::Store(hn::IfThenElseZero(finite, lo), d, los);
  for (std::size_t r = 0; r < count; ++r) out[r] = SplitSum{his[r], los[r]};
}

template <class D>
HWY_INLINE SplitSum JoinOne(D d, const CompensatedLanes<D>& lanes) {
  SplitSum out;
  JoinRows(d, &lanes, 1, &out);
  return out;
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

// A TwoSum per term costs several times the loads and the product it follows, so the
// terms are added plainly into four accumulators (each ends a block of kPlainSteps
// groups with kPlainSteps rounded additions), and only each block's total, after two
// more, joins the compensated sum. The error is then at most (kPlainSteps + 2) units
// of double's precision (2^-53) times the sum of the terms' magnitudes, far below what
// the float outputs can show unless dy and s agree to about 2^-50 of their size,
// where the tests' cancellation allowance (four units of 2^-52) takes over.
constexpr std::size_t kPlainSteps = 4;

// A row's sum before its lanes are joined (JoinRows, JoinOne).
using SumLanes = CompensatedLanes<DD>;

// add_group(i, count, acc) adds the terms of [i, i + count), count <= group (the
// group size, a whole number of double vectors: 4 for the four accumulators), to acc;
// the window of `next` is fetched in step.
template <class AddGroup>
HWY_INLINE SumLanes BlockedSum(std::size_t n, std::size_t group, const NextRow& next, AddGroup&& add_group) {
  const DD dd;
  VD acc[4] = {hn::Zero(dd), hn::Zero(dd), hn::Zero(dd), hn::Zero(dd)};
  SumLanes total(dd);
  auto end_block = [&]() SMAX_INLINE_LAMBDA {
    total.Add(hn::Add(hn::Add(acc[0], acc[1]), hn::Add(acc[2], acc[3])));
    for (VD& a : acc) a = hn::Zero(dd);
  };
  std::size_t i = 0;
  // The loop twice, with and without the prefetches: its checks cost where none is
  // asked (3% on f32 8 x 128256 from L3).
  const auto whole_groups = [&](auto&& reach) SMAX_INLINE_LAMBDA {
    while (i + kPlainSteps * group <= n) {
      for (std::size_t step = 0; step < kPlainSteps; ++step, i += group) {
        reach(i + group);
        add_group(i, group, acc);
      }
      end_block();
    }
    for (; i + group <= n; i += group) {
      reach(i + group);
      add_group(i, group, acc);
    }
  };
  if (next.a == nullptr) {
    whole_groups([](std::size_t) {});
  } else {
    PacedPrefetch prefetch(next, n);
    whole_groups([&](std::size_t at) SMAX_INLINE_LAMBDA { prefetch.Reach(at); });
  }
  if (i < n) add_group(i, n - i, acc);
  end_block();
  return total;
}

// The count (<= 4 double vectors) elements at p, through four double vectors: f(k,
// vector k of the group) for each vector that holds any of them, the other lanes 0.
template <class T, class F>
HWY_INLINE void ForGroupVectors(const T* p, std::size_t count, F&& f) {
  const DD dd;
  const std::size_t N = hn::Lanes(dd);
  if (count == 4 * N) {
    for (std::size_t k = 0; k < 4; ++k) f(k, LoadWide(dd, p + k * N));
    return;
  }
  for (std::size_t k = 0; k < 4 && k * N < count; ++k) f(k, LoadAny(dd, p + k * N, std::min(N, count - k * N)));
}

// Products of two floats are exact in double, so the fused multiply-add rounds once,
// as an addition would.
template <class T>
SumLanes SumOfProductsWide(const T* y, const T* dy, std::size_t n, const NextRow& next) {
  const DD dd;
  const std::size_t N = hn::Lanes(dd);
  return BlockedSum(n, 4 * N, next, [&](std::size_t i, std::size_t count, VD(&acc)[4]) SMAX_INLINE_LAMBDA {
    if (count == 4 * N) {
      for (std::size_t k = 0; k < 4; ++k) {
        acc[k] = hn::MulAdd(LoadWide(dd, y + i + k * N), LoadWide(dd, dy + i + k * N), acc[k]);
      }
      return;
    }
    for (std::size_t k = 0; k < 4 && k * N < count; ++k) {
      const std::size_t c = std::min(N, count - k * N);
      acc[k] = hn::MulAdd(LoadAny(dd, y + i + k * N, c), LoadAny(dd, dy + i + k * N, c), acc[k]);
    }
  });
}

#if HWY_TARGET != HWY_SCALAR
// The sums of 16-bit rows, whose conversions cost more than the arithmetic: terms(i,
// count, t) forms the float terms of [i, i + count) (count <= 4 float vectors; the
// lanes past it 0) in four float vectors, where whole in LoadF32x4AnyOrder's order;
// each vector widens half by half into double lanes, and the two halves' sum joins an
// accumulator: one rounding more for each term than the bound above counts (kPlainSteps
// + 3 units of 2^-53, still within the tests' allowance, and far below what a 16-bit
// output can show). Shorter blocks cost more: their compensated additions form a
// chain of their own.
template <class T, class Terms>
HWY_INLINE SumLanes SumOfFloatTerms16(std::size_t n, const NextRow& next, Terms&& terms) {
  const hn::Half<DF> dh;
  const DD dd;
  static_assert(sizeof(hn::Vec<hn::Rebind<double, hn::Half<DF>>>) == sizeof(VD), "one half widens to a VD");
  const std::size_t N = hn::Lanes(DF());
  return BlockedSum(n, 4 * N, next, [&](std::size_t i, std::size_t count, VD(&acc)[4]) SMAX_INLINE_LAMBDA {
    VF t[4];
    terms(i, count, t);
    for (std::size_t k = 0; k < 4; ++k) {
      const VD halves = hn::Add(hn::PromoteTo(dd, hn::LowerHalf(dh, t[k])), hn::PromoteTo(dd, hn::UpperHalf(dh, t[k])));
      acc[k] = hn::Add(acc[k], halves);
    }
  });
}

// The count (<= 4 float vectors) elements at p as float, the lanes past count 0.
template <class T>
HWY_INLINE void LoadGroup16(const T* p, std::size_t count, VF (&v)[4]) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  if (count == 4 * N) {
    cs::LoadF32x4AnyOrder(df, p, v);
    return;
  }
  for (std::size_t k = 0; k < 4; ++k) {
    v[k] = k * N < count ? LoadFloats(df, p + k * N, std::min(N, count - k * N), hn::Zero(df)) : hn::Zero(df);
  }
}

// Two 16-bit values have at most 11 significant bits each, so their product is exact
// in float: the products are formed a whole float vector at a time.
template <class T>
SumLanes SumOfProducts16(const T* y, const T* dy, std::size_t n, const NextRow& next) {
  return SumOfFloatTerms16<T>(n, next, [&](std::size_t i, std::size_t count, VF(&t)[4]) SMAX_INLINE_LAMBDA {
    VF vy[4];
    LoadGroup16(y + i, count, vy);
    LoadGroup16(dy + i, count, t);
    for (std::size_t k = 0; k < 4; ++k) t[k] = hn::Mul(vy[k], t[k]);
  });
}

template <class T>
SumLanes SumOf16(const T* v, std::size_t n, const NextRow& next) {
  return SumOfFloatTerms16<T>(n, next, [&](std::size_t i, std::size_t count, VF(&t)[4]) SMAX_INLINE_LAMBDA {
    LoadGroup16(v + i, count, t);
  });
}
#endif

template <class T>
SumLanes SumOfProducts(const T* y, const T* dy, std::size_t n, const NextRow& next) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (!std::is_same_v<T, float>) return SumOfProducts16(y, dy, n, next);
#endif
  return SumOfProductsWide(y, dy, n, next);
}

// bf16 products are formed in float (SumOfProducts16), where two values beyond 2^64
// overflow though their double product, the scalar code's, does not: a row whose sum
// is not finite sums again with double products (one with an infinite or NaN input
// stays so).
template <class T>
HWY_INLINE SplitSum RedoOverflowedProducts(const T* y, const T* dy, std::size_t n, SplitSum s) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (HWY_UNLIKELY(!std::isfinite(s.hi))) return JoinOne(DD(), SumOfProductsWide(y, dy, n, NextRow{}));
  }
  return s;
}

template <class T>
SumLanes SumOf(const T* v, std::size_t n, const NextRow& next) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (!std::is_same_v<T, float>) return SumOf16(v, n, next);
#endif
  const DD dd;
  return BlockedSum(n, 4 * hn::Lanes(dd), next, [&](std::size_t i, std::size_t count, VD(&acc)[4]) SMAX_INLINE_LAMBDA {
    ForGroupVectors(v + i, count, [&](std::size_t k, VD term) SMAX_INLINE_LAMBDA { acc[k] = hn::Add(acc[k], term); });
  });
}

// Whether dx can take streaming stores where asked: aligned to its element.
template <class T>
HWY_INLINE bool Streams(bool stream, const T* dx) {
  return stream && reinterpret_cast<std::uintptr_t>(dx) % sizeof(T) == 0;
}

// A pair of vectors (LoadF32x2Paired's order, at element i) whose lanes that are not
// `exact` take the double lanes' result: wide(j, count, out) writes that of [j, j +
// count) to out, as T. Where pairs keep the elements' order, only a vector with such
// lanes is redone (f32's cancellation test fails in a few vectors in a hundred on
// normal data, and a pair redone whole then cost a third of the pass); bf16's
// interleaved pair is redone whole.
template <class T, class M, class Wide>
HWY_INLINE void RedoInexactLanes(std::size_t i, VF& v0, VF& v1, M exact0, M exact1, Wide&& wide) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  if constexpr (cs::kPairsInOrder<DF, T>) {
    HWY_ALIGN T out[hn::MaxLanes(DF())];
    if (!hn::AllTrue(df, exact0)) {
      wide(i, N, out);
      v0 = hn::IfThenElse(exact0, v0, cs::LoadF32(df, out));  // exact: out holds T values
    }
    if (!hn::AllTrue(df, exact1)) {
      wide(i + N, N, out);
      v1 = hn::IfThenElse(exact1, v1, cs::LoadF32(df, out));
    }
  } else {
    HWY_ALIGN T out[2 * hn::MaxLanes(DF())];
    wide(i, 2 * N, out);
    VF wide0, wide1;
    cs::LoadF32x2Paired(df, out, wide0, wide1);
    v0 = hn::IfThenElse(exact0, v0, wide0);
    v1 = hn::IfThenElse(exact1, v1, wide1);
  }
}

// Walks [0, n) in float vectors, two at a time (pair(i), prefetching that stretch of
// the next row), then one, then the tail: step(i, count). With `aligned_to` (an output
// row of T), the walk first takes the piece before its first address aligned to a
// vector of T, so that every whole vector after it (count == Lanes) is aligned, as
// streaming stores need.
template <class T, class Pair, class Step>
HWY_INLINE void WalkFloatPairs(std::size_t n, const NextRow& next, Pair&& pair, Step&& step,
                               const T* aligned_to = nullptr) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  std::size_t i = 0;
  if (aligned_to != nullptr) {
    i = cs::AlignmentHead(df, aligned_to, n);
    if (i > 0) step(0, i);
  }
  // The loop twice, with and without the prefetches, as BlockedSum's.
  if (next.a == nullptr) {
    for (; i + 2 * N <= n; i += 2 * N) pair(i);
  } else {
    PacedPrefetch prefetch(next, n);
    for (; i + 2 * N <= n; i += 2 * N) {
      prefetch.Reach(i + 2 * N);
      pair(i);
    }
  }
  for (; i + N <= n; i += N) step(i, N);
  if (i < n) step(i, n - i);
}

// WalkFloatPairs with each pair as two steps.
template <class T, class Step>
HWY_INLINE void WalkFloats(std::size_t n, const NextRow& next, Step&& step, const T* aligned_to = nullptr) {
  const std::size_t N = hn::Lanes(DF());
  WalkFloatPairs<T>(
      n, next,
      [&](std::size_t i) SMAX_INLINE_LAMBDA {
        step(i, N);
        step(i + N, N);
      },
      step, aligned_to);
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

// The scalar code's arithmetic in double lanes: for rows whose s or 1/T does not fit
// the float lanes, and for the f32 vectors whose float result may be inexact.
template <class T>
void SoftmaxBackwardWide(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t) {
  const DD dd;
  const VD hi = hn::Set(dd, s.hi);
  const VD lo = hn::Set(dd, s.lo);
  const VD scale = hn::Set(dd, inv_t);
  // dy - hi is exact where dy is close to s (Sterbenz); lo then corrects it.
  MapWide(y, dy, dx, n, [&](VD vy, VD vdy) { return hn::Mul(hn::Mul(vy, hn::Sub(hn::Sub(vdy, hi), lo)), scale); });
}

// s = hi + mid + lo in floats, within about 2^-72 of s: where dy is close to s, dy -
// hi is exact (Sterbenz), then subtracting mid is exact as well or rounds relative to
// a result that no longer cancels, and lo only adds one rounding. False where s does
// not fit float's range.
struct FloatTriple {
  float hi = 0, mid = 0, lo = 0;
};
HWY_INLINE bool SplitIntoFloats(SplitSum s, FloatTriple& out) {
  out.hi = static_cast<float>(s.hi);
  if (!std::isfinite(out.hi)) return false;
  const double rest = (s.hi - static_cast<double>(out.hi)) + s.lo;
  out.mid = static_cast<float>(rest);
  out.lo = static_cast<float>(rest - static_cast<double>(out.mid));
  return true;
}

// In float lanes: dx = y * (((dy - hi) - mid) - lo) * (1/T), five float roundings
// (with 1/T's own) of at most 2^-24 each, within f32's 1e-6 (16-bit outputs: far
// within their unit in the last place). For f32 and bf16 an element is redone in
// double where its float result overflowed (dx itself may still fit, after the
// product by 1/T), and, when 1/T > 1, where the product y * (dy - s) fell below
// float's normal range (1/T would enlarge its absolute rounding beyond a subnormal
// step); y = 0 gives an exact 0 either way. Only those elements: each element's bits
// then do not depend on where the vectors fall (dx's alignment decides that when dx
// streams). s is finite here, so no y or dy was NaN or infinite (any would have made
// it NaN or infinite): dx has no NaN, and 16-bit stores round without their NaN case.
// Overflow is rare, so with kRowChecks (dx is neither input, and 1/T <= 1) the pass
// only carries v * 0 + acc, 0 unless some v was infinite or NaN, and where it was
// runs the row again as in place, where each vector is tested.
template <class T, bool kScaled, bool kTinyProductsMatter, bool kRowChecks>
void SoftmaxBackwardFloatLanes(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, const FloatTriple& parts,
                               float inv_t_f, double inv_t, const NextRow& next, bool stream) {
  static_assert(!(kRowChecks && kTinyProductsMatter), "tiny products are tested with each vector");
  // f16's products stay far below float's overflow.
  constexpr bool kVectorChecks = !std::is_same_v<T, half> && !kRowChecks;
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF hi = hn::Set(df, parts.hi);
  const VF mid = hn::Set(df, parts.mid);
  const VF lo = hn::Set(df, parts.lo);
  const VF scale = hn::Set(df, inv_t_f);
  const VF zero = hn::Zero(df);
  const VF smallest_normal = hn::Set(df, std::numeric_limits<float>::min());
  VF non_finite = zero;
  // v and whether it is exact enough (where kVectorChecks).
  const auto compute = [&](VF vy, VF vdy, VF& v) SMAX_INLINE_LAMBDA {
    const VF product = hn::Mul(vy, hn::Sub(hn::Sub(hn::Sub(vdy, hi), mid), lo));
    v = kScaled ? hn::Mul(product, scale) : product;
    if constexpr (kRowChecks) non_finite = hn::MulAdd(v, zero, non_finite);
    auto exact = hn::IsFinite(v);
    if constexpr (kTinyProductsMatter) {
      exact = hn::And(exact, hn::Or(hn::Ge(hn::Abs(product), smallest_normal), hn::Eq(vy, zero)));
    }
    return exact;
  };
  const auto step = [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    VF v;
    const auto exact = compute(LoadFloats(df, y + i, count, zero), LoadFloats(df, dy + i, count, zero), v);
    if constexpr (kVectorChecks) {
      if (HWY_UNLIKELY(!hn::AllTrue(df, exact))) {
        HWY_ALIGN T wide[cs::kMaxVectorBytes / sizeof(float)] = {};
        SoftmaxBackwardWide(y + i, dy + i, wide, count, s, inv_t);
        v = hn::IfThenElse(exact, v, LoadFloats(df, wide, count, zero));  // exact: wide holds T values
      }
    }
    if (count == N) cs::StoreOrStreamF32</*kNotNaN=*/true>(df, v, dx + i, stream);  // aligned: the walk's aligned_to
    else cs::StoreTailF32(df, v, dx + i, count);
  };
  // Two vectors in LoadF32x2Paired's order, one test of both.
  const auto pair = [&](std::size_t i) SMAX_INLINE_LAMBDA {
    VF y0, y1, dy0, dy1, v0, v1;
    cs::LoadF32x2Paired(df, y + i, y0, y1);
    cs::LoadF32x2Paired(df, dy + i, dy0, dy1);
    const auto exact0 = compute(y0, dy0, v0);
    const auto exact1 = compute(y1, dy1, v1);
    if constexpr (kVectorChecks) {
      if (HWY_UNLIKELY(!hn::AllTrue(df, hn::And(exact0, exact1)))) {
        RedoInexactLanes<T>(i, v0, v1, exact0, exact1, [&](std::size_t j, std::size_t count, T* out) {
          SoftmaxBackwardWide(y + j, dy + j, out, count, s, inv_t);
        });
      }
    }
    cs::StoreF32x2Paired</*kNotNaN=*/true>(df, v0, v1, dx + i, stream);
  };
  WalkFloatPairs<T>(n, next, pair, step, stream ? dx : nullptr);
  if constexpr (kRowChecks) {
    if (HWY_UNLIKELY(!hn::AllTrue(df, hn::Eq(non_finite, zero)))) {
      SoftmaxBackwardFloatLanes<T, kScaled, false, false>(y, dy, dx, n, s, parts, inv_t_f, inv_t, next, stream);
    }
  }
}

// Rows whose s or 1/T does not fit the float lanes store through the cache (rare).
template <class T>
void SoftmaxBackwardWrite(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t,
                          const NextRow& next, bool stream) {
  FloatTriple parts;
  const float inv_t_f = static_cast<float>(inv_t);
  if (!SplitIntoFloats(s, parts) || !(inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f))) {
    SoftmaxBackwardWide(y, dy, dx, n, s, inv_t);
    return;
  }
  stream = Streams(stream, dx);
  // dx is y, dy, or apart from both (the API refuses any other overlap).
  const bool row_checks = !std::is_same_v<T, half> && dx != y && dx != dy;
  const auto run = [&](auto scaled, auto tiny_products_matter, auto checks) {
    SoftmaxBackwardFloatLanes<T, decltype(scaled)::value, decltype(tiny_products_matter)::value,
                              decltype(checks)::value>(y, dy, dx, n, s, parts, inv_t_f, inv_t, next, stream);
  };
  const std::false_type no;
  const std::true_type yes;
  if (inv_t == 1.0) {
    if (row_checks) run(no, no, yes);
    else run(no, no, no);
  } else if (inv_t_f <= 1.0f) {
    if (row_checks) run(yes, no, yes);
    else run(yes, no, no);
  } else {
    run(yes, yes, no);
  }
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

// max(v, acc) per lane, acc where v is NaN: on x86 what max_ps does (it returns its
// second operand unless the first is greater), elsewhere a comparison and a blend.
HWY_INLINE VF MaxOrKeep(VF v, VF acc) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSSE3
  return hn::Max(v, acc);
#else
  return hn::IfThenElse(hn::Gt(v, acc), v, acc);
#endif
}

// A double exp per element costs more than the memory it reads, so most elements are
// done in float lanes: dx = (dy - p * S) / T with p from a float exp (its error as
// kCancellationBound counts it) and one rounding of dy - p S (f32: two, S being two
// floats). That is exact enough wherever |p S| <= K |dx| (K =
// kCancellationBound<T>: the exp's error, relative to p S, cannot then grow by more
// than K relative to dx), p is a normal float or the p that the exp flushed to 0 is
// negligible (|dy - p S| >= FLT_MIN |S| 2^24, the row's `flushed_floor`), log_y <= 0
// and dy - p S does not overflow (dx may still fit after the division by T); every
// other element (dy and p S cancelling, log_y not a log-probability; a row whose S is
// beyond float's range, or so small that |S| / K would not be a normal float) goes
// through the double lanes again, from memory, alone: its bits do not depend on where
// the vectors fall. The first two conditions are one multiply-add and one comparison
// a vector, p |S| / K + floor <= |v| (false where v is NaN; the sum is at least the
// larger term, so this is if anything stricter). The last two are the rare ones: with
// kRowChecks (dx is neither input, so the row can be read again) the pass only
// carries the largest log_y and |v| it met, and where either was out of bounds runs
// the row again as in place, where they are tested with each vector. Each mask
// operation costs about as much as an arithmetic one (on AMD Zen 5 the five
// comparisons and four mask operations of an earlier form took a third of the pass).
// S is finite here, so no dy is NaN: vectors done wholly in float lanes have no NaN
// (a NaN log_y makes v NaN, which fails the first comparison), and 16-bit stores
// round them without their NaN case.
template <class T, bool kScaled, bool kRowChecks>
void LogSoftmaxBackwardFloatLanes(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, float sum_f,
                                  double inv_t, float inv_t_f, const NextRow& next, bool stream) {
  // Rounded up, and never 0 unless S is (then p S is 0 exactly), so that |v| >= it
  // fails for v = 0 where the flushed p S might not have been 0.
  const double floor_exact = static_cast<double>(std::numeric_limits<float>::min()) * 0x1p24 * std::abs(sum);
  float flushed_floor = static_cast<float>(floor_exact);
  if (static_cast<double>(flushed_floor) < floor_exact) flushed_floor = std::nextafter(flushed_floor, 1.0f);
  if (sum != 0) flushed_floor = std::max(flushed_floor, std::numeric_limits<float>::denorm_min());
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF vsum = hn::Set(df, sum_f);
  // f32's S as two floats (kCancellationBound); its lower part joins only there.
  constexpr bool kSplitSum = std::is_same_v<T, float>;
  const VF vsum_lo = hn::Set(df, static_cast<float>(sum - static_cast<double>(sum_f)));
  const VF scale = hn::Set(df, inv_t_f);
  const VF zero = hn::Zero(df);
  const VF floor = hn::Set(df, flushed_floor);
  const VF abs_sum_over_bound = hn::Set(df, std::abs(sum_f) / kCancellationBound<T>);  // exact: a normal float
  const VF largest = hn::Set(df, std::numeric_limits<float>::max());
  VF max_log_y = hn::Set(df, -std::numeric_limits<float>::infinity());
  VF max_abs_v = zero;
  // v = dy - p S, its output, and whether it is exact enough.
  const auto compute = [&](VF ly, VF vdy, VF& out) SMAX_INLINE_LAMBDA {
    const VF p = std::is_same_v<T, float> ? cs::ExpFlush(df, ly, cs::NoLowPart{}) : cs::ExpFlushCoarse(df, ly);
    VF v = hn::NegMulAdd(p, vsum, vdy);
    if constexpr (kSplitSum) v = hn::NegMulAdd(p, vsum_lo, v);
    const VF abs_v = hn::Abs(v);
    out = kScaled ? hn::Mul(v, scale) : v;
    const auto not_cancelling = hn::Le(hn::MulAdd(p, abs_sum_over_bound, floor), abs_v);
    if constexpr (kRowChecks) {
      max_log_y = MaxOrKeep(ly, max_log_y);
      max_abs_v = MaxOrKeep(abs_v, max_abs_v);
      return not_cancelling;
    } else {
      // max(log_y, |v| - FLT_MAX) <= 0: log_y <= 0 and v finite (|v| - FLT_MAX is 0
      // or below exactly where |v| is finite).
      return hn::And(not_cancelling, hn::Le(hn::Max(ly, hn::Sub(abs_v, largest)), zero));
    }
  };
  // Stores [i, i + count), the vectors not exact enough redone in double lanes.
  const auto store = [&](std::size_t i, std::size_t count, VF out, auto exact_enough) SMAX_INLINE_LAMBDA {
    if (HWY_UNLIKELY(!hn::AllTrue(df, exact_enough))) {
      HWY_ALIGN T wide[cs::kMaxVectorBytes / sizeof(float)] = {};
      LogSoftmaxBackwardWide(log_y + i, dy + i, wide, count, sum, inv_t);
      const VF mixed = hn::IfThenElse(exact_enough, out, LoadFloats(df, wide, count, zero));  // wide holds T values
      if (count == N) cs::StoreOrStreamF32(df, mixed, dx + i, stream);
      else cs::StoreTailF32(df, mixed, dx + i, count);
      return;
    }
    if (count == N) cs::StoreOrStreamF32</*kNotNaN=*/true>(df, out, dx + i, stream);
    else cs::StoreTailF32(df, out, dx + i, count);
  };
  const auto step = [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    VF out;
    const auto exact_enough = compute(LoadFloats(df, log_y + i, count, zero), LoadFloats(df, dy + i, count, zero), out);
    store(i, count, out, exact_enough);
  };
  // Two vectors in LoadF32x2Paired's order, one test of both: the branch and its mask
  // operations once a pair.
  const auto pair = [&](std::size_t i) SMAX_INLINE_LAMBDA {
    VF ly0, ly1, dy0, dy1, out0, out1;
    cs::LoadF32x2Paired(df, log_y + i, ly0, ly1);
    cs::LoadF32x2Paired(df, dy + i, dy0, dy1);
    const auto exact0 = compute(ly0, dy0, out0);
    const auto exact1 = compute(ly1, dy1, out1);
    if (HWY_UNLIKELY(!hn::AllTrue(df, hn::And(exact0, exact1)))) {
      // Loads before stores: dx may be dy.
      RedoInexactLanes<T>(i, out0, out1, exact0, exact1, [&](std::size_t j, std::size_t count, T* out) {
        LogSoftmaxBackwardWide(log_y + j, dy + j, out, count, sum, inv_t);
      });
      cs::StoreF32x2Paired<false>(df, out0, out1, dx + i, stream);
      return;
    }
    cs::StoreF32x2Paired</*kNotNaN=*/true>(df, out0, out1, dx + i, stream);
  };
  WalkFloatPairs<T>(n, next, pair, step, stream ? dx : nullptr);
  if constexpr (kRowChecks) {
    // A NaN in either only ever came with a v that failed its own vector's test. The
    // row again with the tests in each vector: the bits that in place gives.
    if (HWY_UNLIKELY(!hn::AllTrue(df, hn::And(hn::Le(max_log_y, zero), hn::Le(max_abs_v, largest))))) {
      LogSoftmaxBackwardFloatLanes<T, kScaled, false>(log_y, dy, dx, n, sum, sum_f, inv_t, inv_t_f, next, stream);
    }
  }
}

template <class T>
void LogSoftmaxBackwardWrite(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, double inv_t,
                             const NextRow& next, bool stream) {
  const float sum_f = static_cast<float>(sum);
  const float inv_t_f = static_cast<float>(inv_t);
  const bool tiny_sum = sum != 0 && std::abs(sum) < static_cast<double>(std::numeric_limits<float>::min()) *
                                                        static_cast<double>(kCancellationBound<T>);
  if (!std::isfinite(sum_f) || tiny_sum || !(inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f))) {
    LogSoftmaxBackwardWide(log_y, dy, dx, n, sum, inv_t);
    return;
  }
  stream = Streams(stream, dx);
  const auto run = [&](auto scaled, auto row_checks) {
    LogSoftmaxBackwardFloatLanes<T, decltype(scaled)::value, decltype(row_checks)::value>(
        log_y, dy, dx, n, sum, sum_f, inv_t, inv_t_f, next, stream);
  };
  const std::false_type no;
  const std::true_type yes;
  // dx is log_y, dy, or apart from both (the API refuses any other overlap).
  const bool in_place = dx == log_y || dx == dy;
  if (inv_t == 1.0) {
    if (in_place) run(no, no);
    else run(no, yes);
  } else {
    if (in_place) run(yes, no);
    else run(yes, yes);
  }
}

// A batch of rows (BackwardRowsT's callers), a group of them (as many as a double
// vector has lanes, or fewer: below) at a time: their sums' lanes, then the group's
// lanes joined at once (JoinRows), then their writes, each fetching the row a group
// ahead where rows.next_row_bytes asks. Each row gets the bits of the one-row kernels
// (sum_of_products or sum_of, then the write pass); what a call a row cost besides
// its elements (two dispatches, each sum's join a chain of its own; f32 rows of one
// element took 60 ns a row) is shared by the group, and the rows' chains overlap.
template <class T, class RowLanes, class RowWrite>
HWY_INLINE void BackwardRowsT(const T* a, const T* b, T* dx, const BackwardRows& rows, std::size_t n,
                              std::size_t count, RowLanes&& row_lanes, RowWrite&& row_write) {
  const DD dd;
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  SumLanes lanes[kMaxLanes];
  SplitSum sums[kMaxLanes];
  // A group's inputs stay in L1 between its sums and its writes: at most
  // kGroupInputBytes of them (f32 rows of 1000 in groups of 8 ran 5% slower than a row
  // at a time).
  constexpr std::size_t kGroupInputBytes = 16 * 1024;
  const std::size_t fit = std::max<std::size_t>(1, kGroupInputBytes / std::max<std::size_t>(1, 2 * n * sizeof(T)));
  const std::size_t group_rows = std::min(hn::Lanes(dd), fit);
  for (std::size_t first = 0; first < count; first += group_rows) {
    const std::size_t group = std::min(group_rows, count - first);
    for (std::size_t j = 0; j < group; ++j) {
      lanes[j] = row_lanes(a + rows.a[first + j], b + rows.b[first + j]);
    }
    JoinRows(dd, lanes, group, sums);
    for (std::size_t j = 0; j < group; ++j) {
      const std::size_t r = first + j;
      NextRow next;
      if (rows.next_row_bytes > 0 && r + group_rows < count) {
        next = {a + rows.a[r + group_rows], b + rows.b[r + group_rows], rows.next_row_bytes};
      }
      row_write(a + rows.a[r], b + rows.b[r], dx + rows.dx[r], sums[j], next);
    }
  }
}

template <class T>
void SoftmaxBackwardRowsT(const T* y, const T* dy, T* dx, const BackwardRows& rows, std::size_t n, std::size_t count,
                          double inv_t, bool stream) {
  BackwardRowsT(
      y, dy, dx, rows, n, count,
      [&](const T* yj, const T* dyj) SMAX_INLINE_LAMBDA { return SumOfProducts(yj, dyj, n, NextRow{}); },
      [&](const T* yj, const T* dyj, T* dxj, SplitSum s, const NextRow& next) SMAX_INLINE_LAMBDA {
        SoftmaxBackwardWrite(yj, dyj, dxj, n, RedoOverflowedProducts(yj, dyj, n, s), inv_t, next, stream);
      });
}

template <class T>
void LogSoftmaxBackwardRowsT(const T* log_y, const T* dy, T* dx, const BackwardRows& rows, std::size_t n,
                             std::size_t count, double inv_t, bool stream) {
  BackwardRowsT(
      log_y, dy, dx, rows, n, count,
      [&](const T*, const T* dyj) SMAX_INLINE_LAMBDA { return SumOf(dyj, n, NextRow{}); },
      [&](const T* lyj, const T* dyj, T* dxj, SplitSum s, const NextRow& next) SMAX_INLINE_LAMBDA {
        LogSoftmaxBackwardWrite(lyj, dyj, dxj, n, s.hi, inv_t, next, stream);
      });
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

// The gradient factors of a row in float lanes: grad = (S * p - a) * scale = e * P -
// w * A with P = S / d * scale as a double-float (so that its rounding does not add
// to the exp's) and A = spread * scale. `all_in_double` where P or A is beyond
// float's range, or P below its normal range (where its rounding is no longer
// relative): every vector is then done in double.
struct GradientFactors {
  VF p_hi, p_lo, a_scale;
  bool all_in_double;
  GradientFactors(DF df, double p_scale, double a_scale_d) {
    const float p_hi_f = static_cast<float>(p_scale);
    const float a_scale_f = static_cast<float>(a_scale_d);
    p_hi = hn::Set(df, p_hi_f);
    p_lo = hn::Set(df, static_cast<float>(p_scale - static_cast<double>(p_hi_f)));
    a_scale = hn::Set(df, a_scale_f);
    all_in_double = !std::isfinite(p_hi_f) || !std::isfinite(a_scale_f) ||
                    (p_scale != 0 && !(p_hi_f >= std::numeric_limits<float>::min()));
  }
  HWY_INLINE VF Gradient(VF e, VF w) const { return hn::MulAdd(e, p_hi, hn::MulSub(e, p_lo, hn::Mul(w, a_scale))); }
};

// One vector of gradients with the scalar code's formula, in double: for exps below
// float's normal range (flushed, or short of bits) that S / d * scale may lift back
// into range.
HWY_INLINE VF GradientInDouble(DF df, VF vx, VF vw, const CrossEntropyRow& row) {
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(float);
  HWY_ALIGN float xs[kMaxLanes];
  HWY_ALIGN float ws[kMaxLanes];
  hn::Store(vx, df, xs);
  hn::Store(vw, df, ws);
  for (std::size_t j = 0; j < hn::Lanes(df); ++j) {
    const double a = row.spread * static_cast<double>(ws[j]);
    const double p = std::exp(static_cast<double>(xs[j]) - static_cast<double>(row.m)) * row.inv_d;
    xs[j] = static_cast<float>((row.coefficient_sum * p - a) * row.scale);
  }
  return hn::Load(df, xs);
}

template <class T>
double CrossEntropyRowT(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row,
                        bool want_offsets) {
  const DF df;
  const DW dw;
  const std::size_t N = hn::Lanes(df);
  const GradientFactors factors(df, row.coefficient_sum * row.inv_d * row.scale, row.spread * row.scale);
  const VF neg_m = hn::Set(df, -row.m);
  const VF vm = hn::Set(df, row.m);
  const VF one = hn::Set(df, 1.0f);
  const VF normal_floor = hn::Set(df, -87.0f);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const cs::InverseTemperatureLanes<DF> unit_t(df, cpu::simd::InverseTemperature::of(1.0));
  const VW m_wide = hn::Set(dw, static_cast<double>(row.m));
  VW acc0 = hn::Zero(dw), acc1 = hn::Zero(dw);

  WalkFloats<T>(n, NextRow{}, [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    // Tail lanes: x = m adds nothing to the offsets.
    const VF vx = LoadFloats(df, x + i, count, vm);
    const VF vw = weight != nullptr ? LoadFloats(df, weight + i, count, hn::Zero(df)) : one;
    if (want_offsets) AddOffsets(m_wide, vx, vw, acc0, acc1);
    if (grad == nullptr) return;
    VF z, z_lo;
    cs::ScaledDifference<true, true>(df, unit_t, vx, neg_m, z, z_lo);
    VF g;
    if (HWY_UNLIKELY(factors.all_in_double ||
                     !hn::AllFalse(df, hn::And(hn::Lt(z, normal_floor), hn::Gt(z, neg_inf))))) {
      g = GradientInDouble(df, vx, vw, row);
    } else {
      g = factors.Gradient(cs::ExpFlush(df, z, z_lo), vw);
    }
    if (count == N) cs::StoreF32(df, g, grad + i);
    else cs::StoreTailF32(df, g, grad + i, count);
  });
  if (!want_offsets) return 0.0;
  return hn::GetLane(hn::SumOfLanes(dw, hn::Add(acc0, acc1)));
}

// The first pass of cross-entropy with stored exps (gradient_rows.hpp), over one block.
// The exps of a block, exp(x - m_b), stored in e; their sum below the max comes back
// with the count at the max. `scaled_exp(x, z)` gives exp(x - m_b) * 2^64 (z = x -
// m_b), never subnormal (0 below exp(-104)), `correction` the factor its sum below the
// max takes:
// the sum stays exact where every term lies below float's normal range (a confident
// row's loss is their sum), and the stored exps are scaled back by one product.
// side(i, count) runs beside each step over [i, i + count).
template <class T, class ScaledExp, class Side>
HWY_INLINE BlockExpSum StoreScaledExps(const T* x, float* e, std::size_t n, ScaledExp&& scaled_exp,
                                       double correction, T* write_ahead, const Side& side) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const VF unscale = hn::Set(df, 0x1p-64f);
  // The row kernels' sum (cpu/simd/sum-inl.h): the terms at the max (z == 0) counted
  // in integer lanes, the others added in float blocks of sixteen vectors before they
  // widen (a widening every pair and a popcount every vector cost 3% to 5% of a call).
  cs::SumLanes</*kSplitAtMax=*/true> sum;
  // exp(x - m_b) * 2^64 over [i, i + count) (tail lanes' x is -inf: 0), stored scaled
  // back; z is 0 exactly at the max.
  auto exp_at = [&](std::size_t i, std::size_t count, VF& z) SMAX_INLINE_LAMBDA {
    const VF scaled = scaled_exp(LoadFloats(df, x + i, count, neg_inf), z);
    const VF ex = hn::Mul(scaled, unscale);
    if (count == N) hn::StoreU(ex, df, e + i);
    else cs::StoreTail(df, ex, e + i, count);
    return scaled;
  };
  std::size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (write_ahead != nullptr) cs::FetchLines</*kForWriting=*/true>(write_ahead + i, 4 * N);
    side(i, 4 * N);
    VF z0, z1, z2, z3;
    const VF e0 = exp_at(i, N, z0);
    const VF e1 = exp_at(i + N, N, z1);
    const VF e2 = exp_at(i + 2 * N, N, z2);
    const VF e3 = exp_at(i + 3 * N, N, z3);
    sum.Add(e0, z0, e1, z1, e2, z2, e3, z3);
  }
  for (; i < n; i += N) {
    side(i, std::min(N, n - i));
    VF z;
    const VF ev = exp_at(i, std::min(N, n - i), z);
    sum.Add(ev, z);
  }
  const cpu::simd::ExpSum total = sum.Result();
  BlockExpSum out;
  out.at_max = total.at_max;
  out.below_max = total.below_max * 0x1p-64 * correction;
  return out;
}

// With FMA and a block max within MaxSplit's range, exp_minus_max-inl.h's exp: x - m_b
// folded into the reduction (no TwoSum; on AVX-512 through the table of 2^(j / 32)
// where TableSplit allows), about two thirds of the operations of the general form
// (exp-inl.h's with the argument's rounding error). `side` runs beside each step
// (StoreScaledExps); inlined, so that its state stays in registers.
template <class T, class Side>
HWY_INLINE BlockExpSum StoreExps(const T* x, float* e, std::size_t n, float block_max, T* write_ahead,
                                 const Side& side) {
  const DF df;
  if constexpr (HWY_NATIVE_FMA) {
    if (cpu::simd::MaxSplit::fits(block_max)) {
      return cs::WithFoldedExp<cs::ExpRange::times_2_64>(df, block_max, [&](const auto exp_of) SMAX_INLINE_LAMBDA {
        return StoreScaledExps(
            x, e, n, [=](VF vx, VF& z) SMAX_INLINE_LAMBDA { return exp_of(df, vx, z); },
            exp_of.below_max_correction, write_ahead, side);
      });
    }
  }
  const VF neg_m = hn::Set(df, -block_max);
  const cs::InverseTemperatureLanes<DF> unit_t(df, cpu::simd::InverseTemperature::of(1.0));
  return StoreScaledExps(x, e, n, [=](VF vx, VF& z) SMAX_INLINE_LAMBDA {
    VF z_lo;
    cs::ScaledDifference<true, true>(df, unit_t, vx, neg_m, z, z_lo);
    return cs::ExpTimes2Pow64(df, z, z_lo);
  }, 1.0, write_ahead, side);
}

// StoreExps with, beside it, the max of the next block x_next[0, n_next) (n_next <=
// n), whose loads fill the cycles of the exps instead of taking a pass of their own.
template <class T>
BlockExpSumAndNextMax StoreExpsAndNextMax(const T* x, float* e, std::size_t n, float block_max, T* write_ahead,
                                          const T* x_next, std::size_t n_next) {
  cs::MaxLanes<T, 2> max;
  const auto beside = [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    max.AddWithin(x_next, n_next, i, count);
  };
  BlockExpSumAndNextMax r;
  r.sum = StoreExps(x, e, n, block_max, write_ahead, beside);
  r.next_max = max.Result(x_next, n_next);
  return r;
}

// The second pass of cross-entropy with stored exps, over one block; its whole
// vectors of grad streamed with kStream. A loop of each kind: one choosing per vector
// ran rows in cache 2-8% slower.
template <bool kStream, class T>
double BlockGradientFromExps(const T* x, const float* e, T* grad, const T* weight, std::size_t n,
                             float block_max, const CrossEntropyRow& row, bool want_offsets, const NextRow& next) {
  const DF df;
  const DW dw;
  const std::size_t N = hn::Lanes(df);
  // exp(x - m) = exp(x - m_b) * exp(m_b - m): the block's factor joins P.
  // (1 exactly for a row of one block, without a libm call a row.)
  const double block_factor =
      block_max == row.m ? 1.0 : std::exp(static_cast<double>(block_max) - static_cast<double>(row.m));
  const GradientFactors factors(df, row.coefficient_sum * row.inv_d * row.scale * block_factor,
                                row.spread * row.scale);
  const VF vm = hn::Set(df, row.m);
  const VF one = hn::Set(df, 1.0f);
  const VF zero = hn::Zero(df);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const VW m_wide = hn::Set(dw, static_cast<double>(row.m));
  VW acc0 = hn::Zero(dw), acc1 = hn::Zero(dw);
  WalkFloats<T>(n, next, [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
    const VF ve = LoadFloats(df, e + i, count, one);
    const VF vw = weight != nullptr ? LoadFloats(df, weight + i, count, zero) : one;
    // Tail lanes: x = m adds nothing to the offsets.
    const auto load_x = [&]() SMAX_INLINE_LAMBDA { return LoadFloats(df, x + i, count, vm); };
    if (want_offsets) AddOffsets(m_wide, load_x(), vw, acc0, acc1);
    VF g = factors.Gradient(ve, vw);
    // An exp below FLT_MIN lost bits (a subnormal) or all of them (0, exact only for
    // x = -inf): such lanes, and only they, are computed in double, so that no lane's
    // bits depend on which vector it falls in (streamed rows start their vectors at
    // the gradient's aligned addresses).
    const auto flushed = hn::Lt(ve, hn::Set(df, std::numeric_limits<float>::min()));
    if (HWY_UNLIKELY(factors.all_in_double || !hn::AllFalse(df, flushed))) {
      const VF vx = load_x();
      const auto redo = hn::And(flushed, hn::Gt(vx, neg_inf));
      if (factors.all_in_double) {
        g = GradientInDouble(df, vx, vw, row);
      } else if (!hn::AllFalse(df, redo)) {
        g = hn::IfThenElse(redo, GradientInDouble(df, vx, vw, row), g);
      }
    }
    if (count == N) cs::StoreOrStreamF32(df, g, grad + i, kStream);  // aligned: the walk's aligned_to
    else cs::StoreTailF32(df, g, grad + i, count);
  }, kStream ? grad : nullptr);
  if (!want_offsets) return 0.0;
  return hn::GetLane(hn::SumOfLanes(dw, hn::Add(acc0, acc1)));
}

template <class T>
double CrossEntropyBlockFromExpsT(const T* x, const float* e, T* grad, const T* weight, std::size_t n,
                                  float block_max, const CrossEntropyRow& row, bool want_offsets,
                                  const NextRow& next, bool stream) {
  return Streams(stream, grad)
             ? BlockGradientFromExps<true>(x, e, grad, weight, n, block_max, row, want_offsets, next)
             : BlockGradientFromExps<false>(x, e, grad, weight, n, block_max, row, want_offsets, next);
}

// cross_entropy_rows_stats: each row as run_with_stored_exps takes a row of one block
// (the first row's max from cpu/simd's f32_rmax, each next one's found beside the
// exps of the row before it; then StoreExps).
template <class T>
void CrossEntropyRowsStatsT(const T* x, const std::int64_t* x_rows, float* e, T* fetch,
                            const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,
                            const CrossEntropyColumns& p) {
  float next_max = rows > 0 ? cpu::simd::f32_rmax(x + x_rows[0], n) : 0.0f;
  for (std::size_t j = 0; j < rows; ++j) {
    const T* row = x + x_rows[j];
    const float m = next_max;
    // The next row's max beside this row's exps (StoreExpsAndNextMax), or alone where
    // this row has none.
    const T* next = j + 1 < rows ? x + x_rows[j + 1] : nullptr;
    cs::MaxLanes<T, 2> max;
    BlockExpSum sum;
    T* write_ahead = fetch != nullptr ? fetch + fetch_rows[j] : nullptr;
    if (std::isfinite(m)) {
      sum = StoreExps(row, e + j * n, n, m, write_ahead, [&](std::size_t i, std::size_t count) SMAX_INLINE_LAMBDA {
        if (next != nullptr) max.AddWithin(next, n, i, count);
      });
    } else if (next != nullptr) {
      max.AddAny(next, n);
    }
    if (next != nullptr) next_max = max.Result(next, n);
    p.m[j] = static_cast<double>(m);
    p.at_max[j] = static_cast<double>(sum.at_max);
    p.below[j] = sum.below_max;
  }
}

// cross_entropy_rows_write: each active row as cross_entropy_block_from_exps writes it.
template <class T>
void CrossEntropyRowsWriteT(const T* x, const std::int64_t* x_rows, const float* e, T* grad,
                            const std::int64_t* grad_rows, const T* weight, std::size_t n, std::size_t rows,
                            const CrossEntropyColumns& p, bool stream) {
  const bool want_offsets = p.spread != 0;
  CrossEntropyRow row;
  row.spread = p.spread;
  row.scale = p.scale;
  for (std::size_t j = 0; j < rows; ++j) {
    if (p.ignored[j] != 0 || !std::isfinite(p.m[j])) continue;
    row.m = static_cast<float>(p.m[j]);
    row.coefficient_sum = p.sum_a[j];
    row.inv_d = p.inv_d[j];
    const T* xj = x + x_rows[j];
    T* gj = grad + grad_rows[j];
    const double offsets =
        Streams(stream, gj)
            ? BlockGradientFromExps<true>(xj, e + j * n, gj, weight, n, row.m, row, want_offsets, NextRow{})
            : BlockGradientFromExps<false>(xj, e + j * n, gj, weight, n, row.m, row, want_offsets, NextRow{});
    if (want_offsets) p.spread_offsets[j] = offsets;
  }
}

template <class T>
void CrossEntropyRowsLogProbT(const T* x, const std::int64_t* x_rows, T* out, const std::int64_t* out_rows,
                              std::size_t n, std::size_t rows, const double* row_m, const double* row_log_d) {
  const DD dd;
  const std::size_t N = hn::Lanes(dd);
  for (std::size_t j = 0; j < rows; ++j) {
    const T* xj = x + x_rows[j];
    T* oj = out + out_rows[j];
    const bool finite = std::isfinite(row_m[j]);
    const VD m = hn::Set(dd, row_m[j]);
    const VD log_d = hn::Set(dd, row_log_d[j]);
    const VD nan = hn::Set(dd, std::numeric_limits<double>::quiet_NaN());
    for (std::size_t i = 0; i < n; i += N) {
      const std::size_t count = std::min(N, n - i);
      const VD v = finite ? hn::Sub(hn::Sub(LoadAny(dd, xj + i, count), m), log_d) : nan;
      StoreAny(dd, v, oj + i, count);
    }
  }
}

// Plain names per storage type, for HWY_EXPORT.
#define SMAX_GRADIENT_KERNELS(Suffix, T)                                                                          \
  SplitSum SumOfProducts##Suffix(const T* y, const T* dy, std::size_t n, NextRow next) {                          \
    return RedoOverflowedProducts(y, dy, n, JoinOne(DD(), SumOfProducts(y, dy, n, next)));                       \
  }                                                                                                               \
  SplitSum SumOf##Suffix(const T* v, std::size_t n, NextRow next) { return JoinOne(DD(), SumOf(v, n, next)); }    \
  void SoftmaxBackwardWrite##Suffix(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t,      \
                                    NextRow next, bool stream) {                                                  \
    SoftmaxBackwardWrite(y, dy, dx, n, s, inv_t, next, stream);                                                   \
  }                                                                                                               \
  void LogSoftmaxBackwardWrite##Suffix(const T* ly, const T* dy, T* dx, std::size_t n, double sum, double inv_t,  \
                                       NextRow next, bool stream) {                                               \
    LogSoftmaxBackwardWrite(ly, dy, dx, n, sum, inv_t, next, stream);                                             \
  }                                                                                                               \
  void SoftmaxBackwardRows##Suffix(const T* y, const T* dy, T* dx, const BackwardRows& rows, std::size_t n,      \
                                   std::size_t count, double inv_t, bool stream) {                                \
    SoftmaxBackwardRowsT(y, dy, dx, rows, n, count, inv_t, stream);                                               \
  }                                                                                                               \
  void LogSoftmaxBackwardRows##Suffix(const T* ly, const T* dy, T* dx, const BackwardRows& rows, std::size_t n,   \
                                      std::size_t count, double inv_t, bool stream) {                             \
    LogSoftmaxBackwardRowsT(ly, dy, dx, rows, n, count, inv_t, stream);                                           \
  }                                                                                                               \
  double CrossEntropyRow##Suffix(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row, \
                                 bool want_offsets) {                                                             \
    return CrossEntropyRowT(x, grad, weight, n, row, want_offsets);                                               \
  }                                                                                                               \
  BlockExpSum StoreExps##Suffix(const T* x, float* e, std::size_t n, float block_max, T* write_ahead) {           \
    return StoreExps(x, e, n, block_max, write_ahead, [](std::size_t, std::size_t) {});                           \
  }                                                                                                               \
  BlockExpSumAndNextMax StoreExpsAndNextMax##Suffix(const T* x, float* e, std::size_t n, float block_max,         \
                                                    T* write_ahead, const T* x_next, std::size_t n_next) {        \
    return StoreExpsAndNextMax(x, e, n, block_max, write_ahead, x_next, n_next);                                  \
  }                                                                                                               \
  double CrossEntropyBlockFromExps##Suffix(const T* x, const float* e, T* grad, const T* weight, std::size_t n,   \
                                           float block_max, const CrossEntropyRow& row, bool want_offsets,        \
                                           NextRow next, bool stream) {                                           \
    return CrossEntropyBlockFromExpsT(x, e, grad, weight, n, block_max, row, want_offsets, next, stream);         \
  }                                                                                                               \
  void CrossEntropyRowsStats##Suffix(const T* x, const std::int64_t* x_rows, float* e, T* fetch,                 \
                                     const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,             \
                                     const CrossEntropyColumns& p) {                                              \
    CrossEntropyRowsStatsT(x, x_rows, e, fetch, fetch_rows, n, rows, p);                                          \
  }                                                                                                               \
  void CrossEntropyRowsWrite##Suffix(const T* x, const std::int64_t* x_rows, const float* e, T* grad,             \
                                     const std::int64_t* grad_rows, const T* weight, std::size_t n,               \
                                     std::size_t rows, const CrossEntropyColumns& p, bool stream) {               \
    CrossEntropyRowsWriteT(x, x_rows, e, grad, grad_rows, weight, n, rows, p, stream);                            \
  }                                                                                                               \
  void CrossEntropyRowsLogProb##Suffix(const T* x, const std::int64_t* x_rows, T* out,                            \
                                       const std::int64_t* out_rows, std::size_t n, std::size_t rows,             \
                                       const double* m, const double* log_d) {                                    \
    CrossEntropyRowsLogProbT(x, x_rows, out, out_rows, n, rows, m, log_d);                                        \
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
  HWY_EXPORT(SoftmaxBackwardRows##Suffix);                                                                     \
  HWY_EXPORT(LogSoftmaxBackwardRows##Suffix);                                                                  \
  HWY_EXPORT(CrossEntropyRow##Suffix);                                                                         \
  HWY_EXPORT(StoreExps##Suffix);                                                                               \
  HWY_EXPORT(StoreExpsAndNextMax##Suffix);                                                                     \
  HWY_EXPORT(CrossEntropyBlockFromExps##Suffix);                                                               \
  HWY_EXPORT(CrossEntropyRowsStats##Suffix);                                                                   \
  HWY_EXPORT(CrossEntropyRowsWrite##Suffix);                                                                   \
  HWY_EXPORT(CrossEntropyRowsLogProb##Suffix);                                                                 \
  SplitSum sum_of_products(const T* y, const T* dy, std::size_t n, NextRow next) {                             \
    return HWY_DYNAMIC_DISPATCH(SumOfProducts##Suffix)(y, dy, n, next);                                        \
  }                                                                                                            \
  SplitSum sum_of(const T* v, std::size_t n, NextRow next) {                                                   \
    return HWY_DYNAMIC_DISPATCH(SumOf##Suffix)(v, n, next);                                                    \
  }                                                                                                            \
  void softmax_backward_write(const T* y, const T* dy, T* dx, std::size_t n, SplitSum s, double inv_t,         \
                              NextRow next, bool stream) {                                                     \
    HWY_DYNAMIC_DISPATCH(SoftmaxBackwardWrite##Suffix)(y, dy, dx, n, s, inv_t, next, stream);                  \
  }                                                                                                            \
  void log_softmax_backward_write(const T* log_y, const T* dy, T* dx, std::size_t n, double sum, double inv_t, \
                                  NextRow next, bool stream) {                                                 \
    HWY_DYNAMIC_DISPATCH(LogSoftmaxBackwardWrite##Suffix)(log_y, dy, dx, n, sum, inv_t, next, stream);         \
  }                                                                                                            \
  void softmax_backward_rows(const T* y, const T* dy, T* dx, const BackwardRows& rows, std::size_t n,         \
                             std::size_t count, double inv_t, bool stream) {                                   \
    HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRows##Suffix)(y, dy, dx, rows, n, count, inv_t, stream);               \
  }                                                                                                            \
  void log_softmax_backward_rows(const T* log_y, const T* dy, T* dx, const BackwardRows& rows, std::size_t n,  \
                                 std::size_t count, double inv_t, bool stream) {                               \
    HWY_DYNAMIC_DISPATCH(LogSoftmaxBackwardRows##Suffix)(log_y, dy, dx, rows, n, count, inv_t, stream);        \
  }                                                                                                            \
  double cross_entropy_row(const T* x, T* grad, const T* weight, std::size_t n, const CrossEntropyRow& row,    \
                           bool want_offsets) {                                                                \
    return HWY_DYNAMIC_DISPATCH(CrossEntropyRow##Suffix)(x, grad, weight, n, row, want_offsets);               \
  }                                                                                                            \
  BlockExpSum store_exps(const T* x, float* e, std::size_t n, float block_max, T* write_ahead) {               \
    return HWY_DYNAMIC_DISPATCH(StoreExps##Suffix)(x, e, n, block_max, write_ahead);                           \
  }                                                                                                            \
  BlockExpSumAndNextMax store_exps_and_next_max(const T* x, float* e, std::size_t n, float block_max,          \
                                                T* write_ahead, const T* x_next, std::size_t n_next) {         \
    return HWY_DYNAMIC_DISPATCH(StoreExpsAndNextMax##Suffix)(x, e, n, block_max, write_ahead, x_next, n_next); \
  }                                                                                                            \
  double cross_entropy_block_from_exps(const T* x, const float* e, T* grad, const T* weight, std::size_t n,    \
                                       float block_max, const CrossEntropyRow& row, bool want_offsets,         \
                                       NextRow next, bool stream) {                                            \
    return HWY_DYNAMIC_DISPATCH(CrossEntropyBlockFromExps##Suffix)(x, e, grad, weight, n, block_max, row,      \
                                                                   want_offsets, next, stream);                \
  }                                                                                                            \
  void cross_entropy_rows_stats(const T* x, const std::int64_t* x_rows, float* e, T* fetch,                   \
                                const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,               \
                                const CrossEntropyColumns& p) {                                                \
    HWY_DYNAMIC_DISPATCH(CrossEntropyRowsStats##Suffix)(x, x_rows, e, fetch, fetch_rows, n, rows, p);          \
  }                                                                                                            \
  void cross_entropy_rows_write(const T* x, const std::int64_t* x_rows, const float* e, T* grad,               \
                                const std::int64_t* grad_rows, const T* weight, std::size_t n, std::size_t rows, \
                                const CrossEntropyColumns& p, bool stream) {                                   \
    HWY_DYNAMIC_DISPATCH(CrossEntropyRowsWrite##Suffix)(x, x_rows, e, grad, grad_rows, weight, n, rows, p,     \
                                                        stream);                                               \
  }                                                                                                            \
  void cross_entropy_rows_log_prob(const T* x, const std::int64_t* x_rows, T* out, const std::int64_t* out_rows, \
                                   std::size_t n, std::size_t rows, const double* m, const double* log_d) {    \
    HWY_DYNAMIC_DISPATCH(CrossEntropyRowsLogProb##Suffix)(x, x_rows, out, out_rows, n, rows, m, log_d);        \
  }

SMAX_EXPORT_GRADIENT_KERNELS(F32, float)
SMAX_EXPORT_GRADIENT_KERNELS(F16, half)
SMAX_EXPORT_GRADIENT_KERNELS(BF16, bfloat16)
#undef SMAX_EXPORT_GRADIENT_KERNELS

}  // namespace smax::training::simd
#endif  // HWY_ONCE
