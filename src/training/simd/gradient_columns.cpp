// The kernels of gradient_columns.hpp, written once over the storage type (float,
// half, bfloat16), compiled for every target Highway offers (foreach_target.h
// re-includes this file once per target) and dispatched at run time with
// HWY_DYNAMIC_DISPATCH.
//
// A block of a few double vectors of columns goes down the axis twice: the first pass
// sums each lane's row (cross-entropy: its max, then its exps), the second writes it.
// The block's elements of one class are adjacent (backward: 64 floats on AVX-512, four
// cache lines), so the second pass finds what the first read in L1 or L2 for up to a
// few thousand classes.
#include "training/simd/gradient_columns.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "core/cache_line.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "training/simd/gradient_columns.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "cpu/simd/convert-inl.h"
#include "cpu/simd/exp-inl.h"
#include "cpu/simd/exp_f64-inl.h"
#include "cpu/simd/exp_minus_max-inl.h"
#include "hwy/contrib/math/math-inl.h"
#include "training/simd/wide-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::training::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace cs = smax::cpu::simd::HWY_NAMESPACE;

// A sum per lane as the rows' sums take it (gradient_rows.cpp, BlockedSum): the terms
// of kPlainSteps classes added plainly, then their sum joined to a compensated
// (TwoSum) total: at most kPlainSteps + 1 units of double's precision times the sum
// of the terms' magnitudes, far below what the outputs show unless dy and s agree to
// about 2^-50 of their size. A TwoSum per term would cost several times the term.
inline constexpr std::size_t kPlainSteps = 4;

struct LaneSum {
  VD plain, sum, error;
  HWY_INLINE LaneSum() : plain(hn::Zero(DD())), sum(hn::Zero(DD())), error(hn::Zero(DD())) {}

  HWY_INLINE void Join() {
    const VD t = hn::Add(sum, plain);
    const VD plain_part = hn::Sub(t, sum);
    const VD sum_part = hn::Sub(t, plain_part);
    error = hn::Add(error, hn::Add(hn::Sub(sum, sum_part), hn::Sub(plain, plain_part)));
    sum = t;
    plain = hn::Zero(DD());
  }
  // hi + lo after the last Join; a non-finite sum is the plain IEEE sum in hi, lo 0.
  HWY_INLINE VD Hi() const { return hn::IfThenElse(hn::IsFinite(sum), hn::Add(sum, error), sum); }
  HWY_INLINE VD Lo() const { return hn::IfThenElseZero(hn::IsFinite(sum), hn::Sub(error, hn::Sub(Hi(), sum))); }
};

// Calls add(c) for each class c of n and joins `sums` after every kPlainSteps.
template <std::size_t K, class Add>
HWY_INLINE void SumDownTheAxis(LaneSum (&sums)[K], std::size_t n, Add&& add) {
  std::size_t c = 0;
  for (; c + kPlainSteps <= n; c += kPlainSteps) {
    for (std::size_t step = 0; step < kPlainSteps; ++step) add(c + step);
    for (LaneSum& sum : sums) sum.Join();
  }
  for (; c < n; ++c) add(c);
  for (LaneSum& sum : sums) sum.Join();
}

// Pulls the next block's elements of class c (bytes of them from p) towards the cache
// while this block writes: its sum pass then reads cache, where each class is a
// stride away that the hardware prefetchers do not follow.
HWY_INLINE void FetchLines(const void* p, std::size_t bytes) {
  if (p == nullptr) return;
  const char* at = static_cast<const char*>(p);
  for (std::size_t b = 0; b < bytes; b += smax::detail::kCacheLineBytes) hwy::Prefetch(at + b);
}

// Double vectors a backward block takes side by side: independent sums hide the
// latency of each one's chain of additions, and the wider the block, the more of
// each class's line the two passes take at a time (rows apart by a stride the
// hardware prefetchers do not follow). AVX-512's 32 registers hold eight (64 columns:
// log_softmax_backward of [8, 256, 3136] and three other shapes from DRAM 1.1-1.7x as
// fast as four on AMD Zen 4, one thread; softmax_backward 0.9-1.2x; docs/PERFORMANCE.md,
// forty-fifth session); four elsewhere.
inline constexpr std::size_t kVectors = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 ? 8 : 4;

// The k-th vector of a block's columns at p: whole, or with kTail the block's only
// vector, of `count` lanes.
template <bool kTail, class T>
HWY_INLINE VD LoadLanes(DD d, const T* p, std::size_t count) {
  if constexpr (kTail) {
    return LoadTailWide(d, p, count);
  } else {
    (void)count;
    return LoadWide(d, p);
  }
}

template <bool kTail, class T>
HWY_INLINE void StoreLanes(VD v, T* p, std::size_t count) {
  if constexpr (kTail) {
    StoreTailWide(v, p, count);
  } else {
    (void)count;
    StoreWide(v, p);
  }
}

// exp(z) per lane: exp_f64-inl.h's where it equals std::exp to its accuracy (z <= 709
// and not in the range whose results are subnormal), std::exp for the vector
// elsewhere (inputs that are not log-probabilities, NaN, the subnormal range).
// (Out of line, as ExpOutOfLine: the rare path's loop and calls stay out of the pass.)
HWY_NOINLINE VD StdExpLanes(VD z) {
  constexpr std::size_t kMaxLanes = cs::kMaxVectorBytes / sizeof(double);
  HWY_ALIGN double lanes[kMaxLanes];
  hn::Store(z, DD(), lanes);
  for (std::size_t j = 0; j < hn::Lanes(DD()); ++j) lanes[j] = std::exp(lanes[j]);
  return hn::Load(DD(), lanes);
}

HWY_INLINE VD ExpLanes(DD d, VD z) {
  const auto in_range = hn::And(hn::Le(z, hn::Set(d, 709.0)),
                                hn::Or(hn::Ge(z, hn::Set(d, cs::kExpF64Cutoff)), hn::Lt(z, hn::Set(d, -746.0))));
  if (HWY_LIKELY(hn::AllTrue(d, in_range))) return cs::ExpF64Flush(d, z, hn::Zero(d));
  return StdExpLanes(z);
}

#if HWY_TARGET != HWY_SCALAR
// Float vectors of 2N lanes over a block's K double vectors of columns.
using DFW = hn::Repartition<float, DD>;
using VFW = hn::Vec<DFW>;

// Columns [at, at + here) of a float vector whose lanes failed their test: the double
// lanes' results (wide(v, h) gives double vector h's), rounded to T and blended in.
template <class T, class Wide>
HWY_INLINE VFW BlendDoubleResults(VFW out, hn::Mask<DFW> exact, std::size_t here, Wide&& wide) {
  const std::size_t N = hn::Lanes(DD());
  HWY_ALIGN T rounded[2 * hn::MaxLanes(DD())] = {};
  for (std::size_t h = 0; h < 2 && h * N < here; ++h) {
    const std::size_t part = std::min(N, here - h * N);
    StoreTailWide(wide(h, part), rounded + h * N, part);
  }
  return hn::IfThenElse(exact, out, cs::LoadF32(DFW(), rounded));  // exact: T values
}

// A float vector of `here` columns of T at p (the rest 0), and its store.
template <class T>
HWY_INLINE VFW LoadColumns(const T* p, std::size_t here) {
  const DFW df;
  return here == hn::Lanes(df) ? cs::LoadF32(df, p) : cs::LoadTailF32(df, p, here, hn::Zero(df));
}
template <class T>
HWY_INLINE void StoreColumns(VFW v, T* p, std::size_t here) {
  const DFW df;
  if (here == hn::Lanes(df)) cs::StoreF32(df, v, p);
  else cs::StoreTailF32(df, v, p, here);
}

// log_softmax_backward's write pass in float lanes, two double vectors of the block
// (2N columns) a float vector: a double exp per element cost more than the rest of
// the pass (bf16 took 1.5 times f32's time along axis 1, 3 times PyTorch's). Each
// element is decided as the rows decide it (gradient_rows.cpp's
// LogSoftmaxBackwardFloatLanes, without the row checks): the float exp (16-bit
// outputs: the coarse one; f32: S as two floats) and dx = (dy - p S) / T where |p S| <= K |dx|
// (kCancellationBound), p is normal or negligible (the floor, FLT_MIN 2^24 |S|
// rounded up), log_y <= 0 and dy - p S is finite, and where its column's S fits a
// float and is 0 or at least FLT_MIN K; every other element takes the double lanes'
// result (LogSoftmaxBackwardBlock's), so that no element's bits depend on its
// neighbours. total[k]: the columns' S, double vector k.
template <std::size_t K, bool kTail, class T>
HWY_INLINE void LogSoftmaxBackwardFloatBlock(const T* ly, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                             std::size_t count, const VD (&total)[K], double inv_t, bool fetch_next) {
  constexpr std::size_t KF = (K + 1) / 2;
  constexpr float kBound = kCancellationBound<T>;
  const DD d;
  const DFW df;
  const DFD dh;  // N floats: one double vector's
  const hn::RebindToSigned<DFD> di;
  const std::size_t N = hn::Lanes(d);
  const std::size_t lanes = kTail ? count : K * N;
  // Per float vector: S, |S| / K (exact: a power of two, and |S| / K normal or 0), the
  // floor, and which lanes' S the float lanes may take.
  constexpr bool kSplitSum = std::is_same_v<T, float>;  // S as two floats (kCancellationBound)
  VFW sum[KF], sum_lo[KF], sum_over_bound[KF], floor[KF];
  hn::Mask<DFW> sum_fits[KF];
  const VD flt_min_k = hn::Set(d, static_cast<double>(std::numeric_limits<float>::min()) * kBound);
  const VD flt_max = hn::Set(d, static_cast<double>(std::numeric_limits<float>::max()));
  const VD floor_scale = hn::Set(d, static_cast<double>(std::numeric_limits<float>::min()) * 0x1p24);
  for (std::size_t j = 0; j < KF; ++j) {
    hn::Vec<DFD> parts[4][2];  // sum, floor, 1 where S does not fit, S's rest; lower and upper half
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t k = 2 * j + h;
      const VD t = k < K ? total[k] : hn::Zero(d);
      const VD abs_t = hn::Abs(t);
      const auto fits = hn::And(hn::Le(abs_t, flt_max), hn::Or(hn::Eq(t, hn::Zero(d)), hn::Ge(abs_t, flt_min_k)));
      parts[0][h] = hn::DemoteTo(dh, hn::IfThenElseZero(fits, t));
      parts[3][h] = hn::DemoteTo(dh, hn::IfThenElseZero(fits, hn::Sub(t, hn::PromoteTo(d, parts[0][h]))));
      // FLT_MIN 2^24 |S| (exact in double), rounded up to a float.
      const VD floor_exact = hn::IfThenElseZero(fits, hn::Mul(abs_t, floor_scale));
      const hn::Vec<DFD> floor_near = hn::DemoteTo(dh, floor_exact);
      const VD up = hn::IfThenElseZero(hn::Lt(hn::PromoteTo(d, floor_near), floor_exact), hn::Set(d, 1.0));
      parts[1][h] = hn::BitCast(dh, hn::Add(hn::BitCast(di, floor_near), hn::ConvertTo(di, hn::DemoteTo(dh, up))));
      parts[2][h] = hn::DemoteTo(dh, hn::IfThenZeroElse(fits, hn::Set(d, 1.0)));
    }
    sum[j] = hn::Combine(df, parts[0][1], parts[0][0]);
    sum_lo[j] = hn::Combine(df, parts[3][1], parts[3][0]);
    sum_over_bound[j] = hn::Mul(hn::Abs(sum[j]), hn::Set(df, 1.0f / kBound));
    floor[j] = hn::Combine(df, parts[1][1], parts[1][0]);
    sum_fits[j] = hn::And(hn::Eq(hn::Combine(df, parts[2][1], parts[2][0]), hn::Zero(df)),
                          hn::FirstN(df, lanes > 2 * N * j ? lanes - 2 * N * j : 0));
  }
  const bool scaled = inv_t != 1;
  const VFW scale = hn::Set(df, static_cast<float>(inv_t));
  const VD scale_d = hn::Set(d, inv_t);
  const VFW zero = hn::Zero(df);
  const VFW largest = hn::Set(df, std::numeric_limits<float>::max());
  for (std::size_t c = 0; c < n; ++c) {
    const T* lyc = ly + static_cast<std::ptrdiff_t>(c) * s.y;
    const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
    T* dxc = dx + static_cast<std::ptrdiff_t>(c) * s.dx;
    if (fetch_next) {
      FetchLines(lyc + K * N, K * N * sizeof(T));
      FetchLines(dyc + K * N, K * N * sizeof(T));
    }
    for (std::size_t j = 0; j < KF; ++j) {
      const std::size_t at = 2 * N * j;
      const std::size_t here = std::min(2 * N, lanes - at);  // columns of this float vector
      const VFW vly = LoadColumns(lyc + at, here);
      VFW p, v;
      if constexpr (kSplitSum) {
        p = cs::ExpFlush(df, vly, cs::NoLowPart{});
        v = hn::NegMulAdd(p, sum_lo[j], hn::NegMulAdd(p, sum[j], LoadColumns(dyc + at, here)));
      } else {
        p = cs::ExpFlushCoarse(df, vly);
        v = hn::NegMulAdd(p, sum[j], LoadColumns(dyc + at, here));
      }
      const VFW abs_v = hn::Abs(v);
      const auto exact_enough =
          hn::And(hn::And(sum_fits[j], hn::Le(hn::MulAdd(p, sum_over_bound[j], floor[j]), abs_v)),
                  hn::Le(hn::Max(vly, hn::Sub(abs_v, largest)), zero));
      const VFW out = scaled ? hn::Mul(v, scale) : v;
      if (HWY_UNLIKELY(!hn::AllTrue(df, hn::Or(exact_enough, hn::Not(hn::FirstN(df, here)))))) {
        StoreColumns(BlendDoubleResults<T>(out, exact_enough, here, [&](std::size_t h, std::size_t part) HWY_ATTR {
          const VD pd = ExpLanes(d, LoadTailWide(d, lyc + at + h * N, part));
          const VD vd = hn::NegMulAdd(pd, total[2 * j + h], LoadTailWide(d, dyc + at + h * N, part));
          return scaled ? hn::Mul(vd, scale_d) : vd;
        }), dxc + at, here);
      } else {
        StoreColumns(out, dxc + at, here);
      }
    }
  }
}
#endif

#if HWY_TARGET != HWY_SCALAR
// softmax_backward's write pass in float lanes, two double vectors of the block (2N
// columns) a float vector, as the rows' (gradient_rows.cpp's SoftmaxBackwardFloatLanes):
// each column's s = hi + lo split into three floats (SplitIntoFloats: dy - hi is exact
// where dy is close to s), dx = y * (((dy - hi) - mid) - lo) * (1/T), five float
// roundings. An element takes the double lanes' result (SoftmaxBackwardBlock's) where
// its column's s does not fit a float, where the float result is not finite (a
// product beyond float's range), and, when 1/T > 1, where y * (dy - s) fell below
// float's normal range (1/T would enlarge its absolute rounding beyond a subnormal
// step). Against the double lanes, whose conversions of 16-bit values cost more than
// their arithmetic: bf16 1.07-1.38x on one thread (four shapes of [8, C, H, W] along
// axis 1), f32 at par (docs/PERFORMANCE.md, forty-ninth session).
template <std::size_t K, bool kTail, class T>
HWY_INLINE void SoftmaxBackwardFloatBlock(const T* y, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                          std::size_t count, const VD (&hi)[K], const VD (&lo)[K], double inv_t,
                                          bool fetch_next) {
  constexpr std::size_t KF = (K + 1) / 2;
  const DD d;
  const DFW df;
  const std::size_t N = hn::Lanes(d);
  const std::size_t lanes = kTail ? count : K * N;
  VFW s_hi[KF], s_mid[KF], s_lo[KF];
  hn::Mask<DFW> unfit[KF];
  for (std::size_t j = 0; j < KF; ++j) {
    hn::Vec<DFD> parts[4][2];  // hi, mid, lo, 1 where s does not fit; lower and upper half
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t k = 2 * j + h;
      const VD sh = k < K ? hi[k] : hn::Zero(d);
      const VD sl = k < K ? lo[k] : hn::Zero(d);
      const hn::Vec<DFD> high = ToFloat(sh);
      const VD high_d = hn::PromoteTo(d, high);
      const auto fits = hn::IsFinite(high_d);
      const VD rest = hn::IfThenElseZero(fits, hn::Add(hn::Sub(sh, high_d), sl));
      const hn::Vec<DFD> mid = ToFloat(rest);
      parts[0][h] = ToFloat(hn::IfThenElseZero(fits, high_d));
      parts[1][h] = mid;
      parts[2][h] = ToFloat(hn::Sub(rest, hn::PromoteTo(d, mid)));
      parts[3][h] = ToFloat(hn::IfThenZeroElse(fits, hn::Set(d, 1.0)));
    }
    s_hi[j] = hn::Combine(df, parts[0][1], parts[0][0]);
    s_mid[j] = hn::Combine(df, parts[1][1], parts[1][0]);
    s_lo[j] = hn::Combine(df, parts[2][1], parts[2][0]);
    unfit[j] = hn::Ne(hn::Combine(df, parts[3][1], parts[3][0]), hn::Zero(df));
  }
  const bool scaled = inv_t != 1;
  const bool tiny_products_matter = inv_t > 1;
  const VFW scale = hn::Set(df, static_cast<float>(inv_t));
  const VD scale_d = hn::Set(d, inv_t);
  const VFW zero = hn::Zero(df);
  const VFW smallest_normal = hn::Set(df, std::numeric_limits<float>::min());
  for (std::size_t c = 0; c < n; ++c) {
    const T* yc = y + static_cast<std::ptrdiff_t>(c) * s.y;
    const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
    T* dxc = dx + static_cast<std::ptrdiff_t>(c) * s.dx;
    if (fetch_next) {
      FetchLines(yc + K * N, K * N * sizeof(T));
      FetchLines(dyc + K * N, K * N * sizeof(T));
    }
    for (std::size_t j = 0; j < KF; ++j) {
      const std::size_t at = 2 * N * j;
      const std::size_t here = std::min(2 * N, lanes - at);  // columns of this float vector
      const VFW vy = LoadColumns(yc + at, here);
      const VFW product = hn::Mul(vy, hn::Sub(hn::Sub(hn::Sub(LoadColumns(dyc + at, here), s_hi[j]), s_mid[j]), s_lo[j]));
      const VFW v = scaled ? hn::Mul(product, scale) : product;
      auto exact = hn::AndNot(unfit[j], hn::IsFinite(v));
      if (tiny_products_matter) {
        exact = hn::And(exact, hn::Or(hn::Ge(hn::Abs(product), smallest_normal), hn::Eq(vy, zero)));
      }
      if (HWY_UNLIKELY(!hn::AllTrue(df, hn::Or(exact, hn::Not(hn::FirstN(df, here)))))) {
        StoreColumns(BlendDoubleResults<T>(v, exact, here, [&](std::size_t h, std::size_t part) HWY_ATTR {
          const std::size_t k = 2 * j + h;
          const VD diff = hn::Sub(hn::Sub(LoadTailWide(d, dyc + at + h * N, part), hi[k]), lo[k]);
          const VD vd = hn::Mul(LoadTailWide(d, yc + at + h * N, part), diff);
          return scaled ? hn::Mul(vd, scale_d) : vd;
        }), dxc + at, here);
      } else {
        StoreColumns(v, dxc + at, here);
      }
    }
  }
}
#endif

// Products of two floats are exact in double: the fused multiply-add rounds once, as
// an addition would.
template <std::size_t K, bool kTail, class T>
HWY_INLINE void SoftmaxBackwardBlock(const T* y, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                     std::size_t count, double inv_t, bool fetch_next) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  LaneSum sums[K];
  const auto sum_in_double = [&] HWY_ATTR {
    SumDownTheAxis(sums, n, [&](std::size_t c) HWY_ATTR {
      const T* yc = y + static_cast<std::ptrdiff_t>(c) * s.y;
      const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
      for (std::size_t k = 0; k < K; ++k) {
        sums[k].plain = hn::MulAdd(LoadLanes<kTail>(d, yc + k * N, count), LoadLanes<kTail>(d, dyc + k * N, count),
                                   sums[k].plain);
      }
    });
  };
#if HWY_TARGET != HWY_SCALAR
  // 16-bit rows: the products formed in float a float vector at a time, each half then
  // widened, as the rows' SumOfProducts16 forms them (fewer conversions: bf16 calls
  // 1.07-1.14x on one thread, one shape of four at par). Two 16-bit values have at
  // most 11 significant bits each, so the product is exact in float, as the double
  // lanes' fused multiply-add takes it, while it stays in float's normal range (bf16
  // only can leave it: below it the product loses bits, as the rows' do; beyond it,
  // it overflows, and a block whose sums are not all finite sums again in double; an
  // infinite or NaN input stays so).
  if constexpr (!std::is_same_v<T, float>) {
    constexpr std::size_t KF = (K + 1) / 2;
    const DFD dh;
    const std::size_t lanes = kTail ? count : K * N;
    SumDownTheAxis(sums, n, [&](std::size_t c) HWY_ATTR {
      const T* yc = y + static_cast<std::ptrdiff_t>(c) * s.y;
      const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
      for (std::size_t j = 0; j < KF; ++j) {
        const std::size_t at = 2 * N * j;
        const std::size_t here = std::min(2 * N, lanes - at);
        const VFW product = hn::Mul(LoadColumns(yc + at, here), LoadColumns(dyc + at, here));
        sums[2 * j].plain = hn::Add(sums[2 * j].plain, hn::PromoteTo(d, hn::LowerHalf(dh, product)));
        if (2 * j + 1 < K) {
          sums[2 * j + 1].plain = hn::Add(sums[2 * j + 1].plain, hn::PromoteTo(d, hn::UpperHalf(dh, product)));
        }
      }
    });
    if constexpr (std::is_same_v<T, bfloat16>) {
      bool finite = true;
      for (std::size_t k = 0; k < K; ++k) finite = finite && hn::AllTrue(d, hn::IsFinite(sums[k].sum));
      if (HWY_UNLIKELY(!finite)) {
        for (LaneSum& sum : sums) sum = LaneSum();
        sum_in_double();
      }
    }
  } else {
    sum_in_double();
  }
#else
  sum_in_double();
#endif
  VD hi[K], lo[K];
  for (std::size_t k = 0; k < K; ++k) {
    hi[k] = sums[k].Hi();
    lo[k] = sums[k].Lo();
  }
#if HWY_TARGET != HWY_SCALAR
  const auto inv_t_f = static_cast<float>(inv_t);
  if (inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f)) {
    return SoftmaxBackwardFloatBlock<K, kTail>(y, dy, dx, s, n, count, hi, lo, inv_t, fetch_next);
  }
#endif
  const VD scale = hn::Set(d, inv_t);
  for (std::size_t c = 0; c < n; ++c) {
    const T* yc = y + static_cast<std::ptrdiff_t>(c) * s.y;
    const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
    T* dxc = dx + static_cast<std::ptrdiff_t>(c) * s.dx;
    if (fetch_next) {
      FetchLines(yc + K * N, K * N * sizeof(T));
      FetchLines(dyc + K * N, K * N * sizeof(T));
    }
    for (std::size_t k = 0; k < K; ++k) {
      const VD diff = hn::Sub(hn::Sub(LoadLanes<kTail>(d, dyc + k * N, count), hi[k]), lo[k]);
      VD v = hn::Mul(LoadLanes<kTail>(d, yc + k * N, count), diff);
      if (inv_t != 1) v = hn::Mul(v, scale);
      StoreLanes<kTail>(v, dxc + k * N, count);
    }
  }
}

template <std::size_t K, bool kTail, class T>
HWY_INLINE void LogSoftmaxBackwardBlock(const T* ly, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                        std::size_t count, double inv_t, bool fetch_next) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  LaneSum sums[K];
  SumDownTheAxis(sums, n, [&](std::size_t c) HWY_ATTR {
    const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
    for (std::size_t k = 0; k < K; ++k) sums[k].plain = hn::Add(sums[k].plain, LoadLanes<kTail>(d, dyc + k * N, count));
  });
  VD total[K];
  for (std::size_t k = 0; k < K; ++k) total[k] = sums[k].Hi();
#if HWY_TARGET != HWY_SCALAR
  const auto inv_t_f = static_cast<float>(inv_t);
  if (inv_t_f >= std::numeric_limits<float>::min() && std::isfinite(inv_t_f)) {
    return LogSoftmaxBackwardFloatBlock<K, kTail>(ly, dy, dx, s, n, count, total, inv_t, fetch_next);
  }
#endif
  const VD scale = hn::Set(d, inv_t);
  for (std::size_t c = 0; c < n; ++c) {
    const T* lyc = ly + static_cast<std::ptrdiff_t>(c) * s.y;
    const T* dyc = dy + static_cast<std::ptrdiff_t>(c) * s.dy;
    T* dxc = dx + static_cast<std::ptrdiff_t>(c) * s.dx;
    if (fetch_next) {
      FetchLines(lyc + K * N, K * N * sizeof(T));
      FetchLines(dyc + K * N, K * N * sizeof(T));
    }
    for (std::size_t k = 0; k < K; ++k) {
      const VD p = ExpLanes(d, LoadLanes<kTail>(d, lyc + k * N, count));
      VD v = hn::NegMulAdd(p, total[k], LoadLanes<kTail>(d, dyc + k * N, count));
      if (inv_t != 1) v = hn::Mul(v, scale);
      StoreLanes<kTail>(v, dxc + k * N, count);
    }
  }
}

// A block's shape: K double vectors of columns, or with kTail one vector's first lanes.
template <std::size_t K, bool kTail>
struct BlockShape {
  static constexpr std::size_t kVectors = K;
  static constexpr bool kPartial = kTail;
};

// Calls block(BlockShape, j, count, fetch_next) over `columns` columns: kWide whole
// vectors at a time (fetch_next where another such block follows), then whole vectors
// one by one, then the count (< Lanes) columns left.
template <std::size_t kWide, class Block>
HWY_INLINE void ForColumnBlocks(std::size_t columns, Block&& block) {
  const std::size_t N = hn::Lanes(DD());
  const std::size_t wide = kWide * N;
  std::size_t j = 0;
  for (; j + wide <= columns; j += wide) block(BlockShape<kWide, false>(), j, N, j + 2 * wide <= columns);
  for (; j + N <= columns; j += N) block(BlockShape<1, false>(), j, N, false);
  if (j < columns) block(BlockShape<1, true>(), j, columns - j, false);
}

template <class T>
HWY_INLINE void SoftmaxBackwardColumnsT(const T* y, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                        std::size_t columns, double inv_t) {
  ForColumnBlocks<kVectors>(columns, [&](auto shape, std::size_t j, std::size_t count, bool fetch_next) HWY_ATTR {
    using Shape = decltype(shape);
    SoftmaxBackwardBlock<Shape::kVectors, Shape::kPartial>(y + j, dy + j, dx + j, s, n, count, inv_t, fetch_next);
  });
}

template <class T>
HWY_INLINE void LogSoftmaxBackwardColumnsT(const T* ly, const T* dy, T* dx, const ColumnStrides& s, std::size_t n,
                                           std::size_t columns, double inv_t) {
  ForColumnBlocks<kVectors>(columns, [&](auto shape, std::size_t j, std::size_t count, bool fetch_next) HWY_ATTR {
    using Shape = decltype(shape);
    LogSoftmaxBackwardBlock<Shape::kVectors, Shape::kPartial>(ly + j, dy + j, dx + j, s, n, count, inv_t,
                                                              fetch_next);
  });
}

// Cross-entropy's blocks take two vectors: the write pass holds about ten per-column
// vectors each.
inline constexpr std::size_t kCrossEntropyVectors = 2;

template <std::size_t K, bool kTail, class T>
HWY_INLINE void ColumnStatsBlock(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t count,
                                 const CrossEntropyColumns& out, std::size_t j) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  VD m[K];
  VD nan[K];  // all ones where a NaN was seen (a mask kept as a vector)
  for (std::size_t k = 0; k < K; ++k) {
    m[k] = hn::Set(d, -HUGE_VAL);
    nan[k] = hn::Zero(d);
  }
  for (std::size_t c = 0; c < n; ++c) {
    const T* xc = x + static_cast<std::ptrdiff_t>(c) * stride;
    for (std::size_t k = 0; k < K; ++k) {
      const VD v = LoadLanes<kTail>(d, xc + k * N, count);
      m[k] = hn::Max(m[k], v);
      nan[k] = hn::Or(nan[k], hn::VecFromMask(d, hn::IsNaN(v)));
    }
  }
  for (std::size_t k = 0; k < K; ++k) m[k] = hn::IfThenElse(hn::MaskFromVec(nan[k]), hn::Set(d, NAN), m[k]);
  VD at_max[K];
  LaneSum below[K];
  for (std::size_t k = 0; k < K; ++k) at_max[k] = hn::Zero(d);
  const VD one = hn::Set(d, 1.0);
  SumDownTheAxis(below, n, [&](std::size_t c) HWY_ATTR {
    const T* xc = x + static_cast<std::ptrdiff_t>(c) * stride;
    for (std::size_t k = 0; k < K; ++k) {
      const VD v = LoadLanes<kTail>(d, xc + k * N, count);
      const auto is_max = hn::Eq(v, m[k]);
      const VD e = cs::ExpF64Flush(d, hn::Sub(v, m[k]), hn::Zero(d));
      if (out.exps != nullptr) hn::StoreU(e, d, out.exps + c * out.exps_stride + j + k * N);
      at_max[k] = hn::Add(at_max[k], hn::IfThenElseZero(is_max, one));
      below[k].plain = hn::Add(below[k].plain, hn::IfThenZeroElse(is_max, e));
    }
  });
  // The arrays have room for whole vectors (gradient_columns.hpp).
  for (std::size_t k = 0; k < K; ++k) {
    hn::StoreU(m[k], d, out.m + j + k * N);
    hn::StoreU(at_max[k], d, out.at_max + j + k * N);
    hn::StoreU(below[k].Hi(), d, out.below + j + k * N);
  }
}

template <class T>
HWY_INLINE void ColumnStatsT(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                             const CrossEntropyColumns& out) {
  ForColumnBlocks<kCrossEntropyVectors>(columns, [&](auto shape, std::size_t j, std::size_t count, bool) HWY_ATTR {
    using Shape = decltype(shape);
    ColumnStatsBlock<Shape::kVectors, Shape::kPartial>(x + j, stride, n, count, out, j);
  });
}

#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
// ColumnStatsBlock in float lanes: kFloatVectors float vectors of columns (each two
// double vectors of the per-column arrays). False where a finite max is beyond
// MaxSplit::fits.
inline constexpr std::size_t kFloatVectors = 2;

template <std::size_t K, bool kTail, class T>
HWY_INLINE bool FloatStatsBlock(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t count,
                                const CrossEntropyColumns& out, std::size_t j) {
  using DF = hn::ScalableTag<float>;
  using VF = hn::Vec<DF>;
  const DF df;
  const DD dd;
  const DFD dh;
  const std::size_t N = hn::Lanes(df);
  const std::size_t ND = hn::Lanes(dd);
  const auto load = [&](const T* p) HWY_ATTR {
    if constexpr (kTail) {
      return cs::LoadTailF32(df, p, count, hn::Set(df, -HUGE_VALF));
    } else {
      return cs::LoadF32(df, p);
    }
  };
  VF m[K], nan[K];
  for (std::size_t k = 0; k < K; ++k) {
    m[k] = hn::Set(df, -HUGE_VALF);
    nan[k] = hn::Zero(df);
  }
  for (std::size_t c = 0; c < n; ++c) {
    const T* xc = x + static_cast<std::ptrdiff_t>(c) * stride;
    for (std::size_t k = 0; k < K; ++k) {
      const VF v = load(xc + k * N);
      m[k] = hn::Max(m[k], v);
      nan[k] = hn::Or(nan[k], hn::VecFromMask(df, hn::IsNaN(v)));
    }
  }
  VF split_m[K], split_shift[K], split_delta[K];  // MaxSplitLanes's parts
  for (std::size_t k = 0; k < K; ++k) {
    m[k] = hn::IfThenElse(hn::MaskFromVec(nan[k]), hn::Set(df, NAN), m[k]);
    const auto finite = hn::IsFinite(m[k]);
    if (!hn::AllTrue(df, hn::Or(hn::Not(finite), hn::Le(hn::Abs(m[k]), hn::Set(df, 16384.0f))))) return false;
    const cs::MaxSplitLanes<DF> split = cs::MaxSplitLanes<DF>::Of(df, hn::IfThenElseZero(finite, m[k]));
    split_m[k] = split.m;
    split_shift[k] = split.shift_minus_k;
    split_delta[k] = split.delta;
  }
  // The terms below the max added in float, kFloatTerms classes at a time into a
  // block (each term meets at most five roundings: within 5 * 2^-24 of the block's
  // sum, the terms being never negative, the rows' bound in cpu/simd/sum-inl.h), each
  // block then widened into plain double sums (a widening and a compensated double
  // sum per class took the pass from 1.46 to 2.0 cycles an element: 21 classes of 512
  // columns in L1, AVX3, Intel Xeon model 106).
  constexpr std::size_t kFloatTerms = 6;
  VF at_max[K], block[K];
  VD below[2 * K];
  for (std::size_t k = 0; k < K; ++k) {
    at_max[k] = hn::Zero(df);
    below[2 * k] = below[2 * k + 1] = hn::Zero(dd);
  }
  for (std::size_t first = 0; first < n; first += kFloatTerms) {
    for (std::size_t k = 0; k < K; ++k) block[k] = hn::Zero(df);
    for (std::size_t c = first; c < std::min(n, first + kFloatTerms); ++c) {
      const T* xc = x + static_cast<std::ptrdiff_t>(c) * stride;
      for (std::size_t k = 0; k < K; ++k) {
        VF s;
        const cs::MaxSplitLanes<DF> split(split_m[k], split_shift[k], split_delta[k]);
        const VF e = cs::ExpMinusMax<cs::ExpRange::flush>(df, split, load(xc + k * N), s);
        if (out.float_exps != nullptr) hn::StoreU(e, df, out.float_exps + c * out.exps_stride + j + k * N);
        const auto is_max = hn::Eq(s, hn::Zero(df));  // s = x - m rounded: 0 exactly at the max
        at_max[k] = hn::Add(at_max[k], hn::IfThenElseZero(is_max, hn::Set(df, 1.0f)));
        block[k] = hn::Add(block[k], hn::IfThenZeroElse(is_max, e));
      }
    }
    for (std::size_t k = 0; k < K; ++k) {
      below[2 * k] = hn::Add(below[2 * k], hn::PromoteTo(dd, hn::LowerHalf(dh, block[k])));
      below[2 * k + 1] = hn::Add(below[2 * k + 1], hn::PromoteTo(dd, hn::UpperHalf(dh, block[k])));
    }
  }
  for (std::size_t k = 0; k < K; ++k) {
    for (std::size_t half = 0; half < 2; ++half) {
      const std::size_t to = j + k * N + half * ND;
      const VF mv = m[k];
      const VF av = at_max[k];
      hn::StoreU(hn::PromoteTo(dd, half == 0 ? hn::LowerHalf(dh, mv) : hn::UpperHalf(dh, mv)), dd, out.m + to);
      hn::StoreU(hn::PromoteTo(dd, half == 0 ? hn::LowerHalf(dh, av) : hn::UpperHalf(dh, av)), dd, out.at_max + to);
      hn::StoreU(below[2 * k + half], dd, out.below + to);
    }
  }
  return true;
}

template <class T>
HWY_INLINE bool FloatStatsT(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,
                            const CrossEntropyColumns& out) {
  const std::size_t N = hn::Lanes(hn::ScalableTag<float>());
  const std::size_t wide = kFloatVectors * N;
  std::size_t j = 0;
  for (; j + wide <= columns; j += wide) {
    if (!FloatStatsBlock<kFloatVectors, false>(x + j, stride, n, N, out, j)) return false;
  }
  for (; j + N <= columns; j += N) {
    if (!FloatStatsBlock<1, false>(x + j, stride, n, N, out, j)) return false;
  }
  return j == columns || FloatStatsBlock<1, true>(x + j, stride, n, columns - j, out, j);
}
#else
template <class T>
HWY_INLINE bool FloatStatsT(const T*, std::ptrdiff_t, std::size_t, std::size_t, const CrossEntropyColumns&) {
  return false;
}
#endif

// Where the write pass takes its exps from (CrossEntropyColumns): each its own loop,
// so that the double exp's constants hold registers only where it runs.
enum class ExpsFrom { doubles, floats, computed };

// exp(z) in double, out of line: the float exps' flushed terms, rare, whose inlined
// exp made the pass 1.7-2.3 times slower even where it never ran (its constants kept in
// registers around the loop, the pass's own values spilled).
HWY_NOINLINE VD ExpOutOfLine(VD z) { return cs::ExpF64Flush(DD(), z, hn::Zero(DD())); }

template <ExpsFrom kFrom, std::size_t K, bool kTail, class T>
HWY_INLINE void CrossEntropyColumnsBlock(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, T* log_prob,
                                         std::ptrdiff_t ls, std::size_t n, std::size_t count, const CrossEntropyColumns& t,
                                         std::size_t j) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  VD m[K], inv_d[K], sum_a[K], target[K], target_a[K], log_d[K], nan_lanes[K], zero_lanes[K], near_one[K];
  VD sum_hi[K], sum_lo[K], p_minus_one[K];
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t at = j + k * N;
    m[k] = hn::LoadU(d, t.m + at);
    inv_d[k] = hn::LoadU(d, t.inv_d + at);
    sum_a[k] = hn::LoadU(d, t.sum_a + at);
    target[k] = hn::LoadU(d, t.target + at);
    target_a[k] = hn::LoadU(d, t.target_coefficient + at);
    log_d[k] = hn::LoadU(d, t.log_d + at);
    nan_lanes[k] = hn::VecFromMask(d, hn::Not(hn::IsFinite(m[k])));
    zero_lanes[k] = hn::VecFromMask(d, hn::Ne(hn::LoadU(d, t.ignored + at), hn::Zero(d)));
    // d < 2: the max's p is above 1/2, and S * p - a takes its exact form there.
    near_one[k] = hn::VecFromMask(d, hn::Lt(hn::LoadU(d, t.d + at), hn::Set(d, 2.0)));
    sum_hi[k] = hn::LoadU(d, t.sum_hi + at);
    sum_lo[k] = hn::LoadU(d, t.sum_lo + at);
    p_minus_one[k] = hn::LoadU(d, t.p_minus_one + at);
  }
  const VD scale = hn::Set(d, t.scale);
  const VD nan = hn::Set(d, NAN);
  LaneSum offsets[K];
  const auto gradient = [&](std::size_t c, std::size_t k, VD v, VD z, VD a) HWY_ATTR {
    VD e;
    if constexpr (kFrom == ExpsFrom::doubles) {
      e = hn::LoadU(d, t.exps + c * t.exps_stride + j + k * N);
    } else if constexpr (kFrom == ExpsFrom::floats) {
      e = hn::PromoteTo(d, hn::LoadU(DFD(), t.float_exps + c * t.exps_stride + j + k * N));
      // The float exps' flushed terms (not -inf's): again in double.
      const auto flushed = hn::And(hn::Eq(e, hn::Zero(d)), hn::Gt(z, hn::Set(d, -HUGE_VAL)));
      if (HWY_UNLIKELY(!hn::AllFalse(d, flushed))) e = hn::IfThenElse(flushed, ExpOutOfLine(z), e);
    } else {
      e = cs::ExpF64Flush(d, z, hn::Zero(d));
    }
    const VD p = hn::Mul(e, inv_d[k]);
    VD g = hn::MulSub(sum_a[k], p, a);
    // Without a branch: which vectors hold a column's max is data, and the branch took
    // the pass 1.4 times as long (21 classes, AMD Zen 4).
    const auto exact = hn::And(hn::Eq(v, m[k]), hn::MaskFromVec(near_one[k]));
    const VD rest = hn::Add(hn::Sub(sum_hi[k], a), sum_lo[k]);
    g = hn::IfThenElse(exact, hn::MulAdd(sum_a[k], p_minus_one[k], rest), g);
    g = hn::IfThenElse(hn::MaskFromVec(nan_lanes[k]), nan, hn::Mul(g, scale));
    return hn::IfThenZeroElse(hn::MaskFromVec(zero_lanes[k]), g);
  };
  SumDownTheAxis(offsets, n, [&](std::size_t c) HWY_ATTR {
    const T* xc = x + static_cast<std::ptrdiff_t>(c) * xs;
    const VD class_index = hn::Set(d, static_cast<double>(c));
    const VD spread_a = hn::Set(d, t.class_weight != nullptr ? t.spread * t.class_weight[c] : 0.0);
    for (std::size_t k = 0; k < K; ++k) {
      const VD v = LoadLanes<kTail>(d, xc + k * N, count);
      const VD z = hn::Sub(v, m[k]);
      if (t.class_weight != nullptr) {
        offsets[k].plain = hn::MulAdd(hn::Set(d, t.class_weight[c]), hn::Neg(z), offsets[k].plain);
      }
      if (grad != nullptr) {
        const VD a = hn::Add(spread_a, hn::IfThenElseZero(hn::Eq(target[k], class_index), target_a[k]));
        StoreLanes<kTail>(gradient(c, k, v, z, a), grad + static_cast<std::ptrdiff_t>(c) * gs + k * N, count);
      }
      if (log_prob != nullptr) {
        const VD lp = hn::IfThenElse(hn::MaskFromVec(nan_lanes[k]), nan, hn::Sub(z, log_d[k]));
        StoreLanes<kTail>(lp, log_prob + static_cast<std::ptrdiff_t>(c) * ls + k * N, count);
      }
    }
  });
  if (t.class_weight != nullptr) {
    for (std::size_t k = 0; k < K; ++k) hn::StoreU(offsets[k].Hi(), d, t.spread_offsets + j + k * N);
  }
}

template <class T>
HWY_INLINE void CrossEntropyColumnsT(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, T* log_prob,
                                     std::ptrdiff_t ls, std::size_t n, std::size_t columns, const CrossEntropyColumns& t) {
  const auto run = [&](auto from) HWY_ATTR {
    ForColumnBlocks<kCrossEntropyVectors>(columns, [&](auto shape, std::size_t j, std::size_t count, bool) HWY_ATTR {
      using Shape = decltype(shape);
      CrossEntropyColumnsBlock<decltype(from)::value, Shape::kVectors, Shape::kPartial>(
          x + j, xs, grad != nullptr ? grad + j : nullptr, gs, log_prob != nullptr ? log_prob + j : nullptr, ls, n,
          count, t, j);
    });
  };
  if (t.exps != nullptr) {
    run(std::integral_constant<ExpsFrom, ExpsFrom::doubles>());
  } else if (t.float_exps != nullptr) {
    run(std::integral_constant<ExpsFrom, ExpsFrom::floats>());
  } else {
    run(std::integral_constant<ExpsFrom, ExpsFrom::computed>());
  }
}

#if HWY_TARGET != HWY_SCALAR
// cross_entropy_columns_in_float over a block of K float vectors of columns (2N each,
// as FloatStatsBlock's), or with kTail one vector's first `count`.
template <std::size_t K, bool kTail, class T>
HWY_INLINE void CrossEntropyFloatBlock(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, std::size_t n,
                                       std::size_t count, const CrossEntropyColumns& t, std::size_t j) {
  const DD d;
  const DFW df;
  const DFD dh;
  const std::size_t N = hn::Lanes(d);
  const std::size_t lanes = kTail ? count : K * 2 * N;
  // Per float vector: P = S / d * scale as two floats (the rows' GradientFactors), the
  // lanes whose P does not fit them (not finite, or nonzero below FLT_MIN), and the
  // lanes replaced whole: 0 where ignored, else NaN where the max is not finite.
  VFW p_hi[K], p_lo[K], replacement[K];
  hn::Mask<DFW> unfit[K], replaced[K];
  const VD flt_min = hn::Set(d, static_cast<double>(std::numeric_limits<float>::min()));
  const VD flt_max = hn::Set(d, static_cast<double>(std::numeric_limits<float>::max()));
  const VD one = hn::Set(d, 1.0);
  for (std::size_t f = 0; f < K; ++f) {
    hn::Vec<DFD> parts[5][2];  // P's high and low floats, 1 where unfit, 1 where replaced, the replacement
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t at = j + (2 * f + h) * N;  // within the arrays' padding (gradient_columns.hpp)
      const VD p = hn::Mul(hn::Mul(hn::LoadU(d, t.sum_a + at), hn::LoadU(d, t.inv_d + at)), hn::Set(d, t.scale));
      const VD abs_p = hn::Abs(p);
      const auto fits = hn::And(hn::Le(abs_p, flt_max), hn::Or(hn::Eq(p, hn::Zero(d)), hn::Ge(abs_p, flt_min)));
      const VD fitted = hn::IfThenElseZero(fits, p);
      parts[0][h] = hn::DemoteTo(dh, fitted);
      parts[1][h] = hn::DemoteTo(dh, hn::Sub(fitted, hn::PromoteTo(d, parts[0][h])));
      const auto ignored = hn::Ne(hn::LoadU(d, t.ignored + at), hn::Zero(d));
      const auto whole = hn::Or(ignored, hn::Not(hn::IsFinite(hn::LoadU(d, t.m + at))));
      parts[2][h] = hn::DemoteTo(dh, hn::IfThenZeroElse(hn::Or(fits, whole), one));
      parts[3][h] = hn::DemoteTo(dh, hn::IfThenElseZero(whole, one));
      parts[4][h] = hn::DemoteTo(dh, hn::IfThenZeroElse(ignored, hn::Set(d, NAN)));
    }
    const auto valid = hn::FirstN(df, lanes > 2 * N * f ? lanes - 2 * N * f : 0);
    p_hi[f] = hn::Combine(df, parts[0][1], parts[0][0]);
    p_lo[f] = hn::Combine(df, parts[1][1], parts[1][0]);
    unfit[f] = hn::And(valid, hn::Ne(hn::Combine(df, parts[2][1], parts[2][0]), hn::Zero(df)));
    replaced[f] = hn::Ne(hn::Combine(df, parts[3][1], parts[3][0]), hn::Zero(df));
    replacement[f] = hn::Combine(df, parts[4][1], parts[4][0]);
  }
  const VFW zero = hn::Zero(df);
  const VFW neg_inf = hn::Set(df, -HUGE_VALF);
  for (std::size_t c = 0; c < n; ++c) {
    const T* xc = x + static_cast<std::ptrdiff_t>(c) * xs;
    T* gc = grad + static_cast<std::ptrdiff_t>(c) * gs;
    const float* ec = t.float_exps + c * t.exps_stride + j;
    for (std::size_t f = 0; f < K; ++f) {
      const std::size_t at = 2 * N * f;
      const std::size_t here = kTail ? count : 2 * N;
      const VFW e = hn::LoadU(df, ec + at);
      VFW g = hn::MulAdd(e, p_hi[f], hn::Mul(e, p_lo[f]));
      // Exps flushed to 0 (-inf's exactly 0; the others lost their bits) and unfit
      // lanes take the double pass's value, so that no lane's bits depend on its
      // neighbours.
      const auto flushed = hn::Eq(e, zero);
      if (HWY_UNLIKELY(!hn::AllFalse(df, hn::Or(flushed, unfit[f])))) {
        const VFW vx = LoadColumns(xc + at, here);
        const auto redo = hn::AndNot(replaced[f], hn::Or(unfit[f], hn::And(flushed, hn::Gt(vx, neg_inf))));
        if (!hn::AllFalse(df, hn::And(redo, hn::FirstN(df, here)))) {
          g = BlendDoubleResults<T>(g, hn::Not(redo), here, [&](std::size_t h, std::size_t part) HWY_ATTR {
            const std::size_t arrays = j + at + h * N;
            VD ed = hn::PromoteTo(d, h == 0 ? hn::LowerHalf(dh, e) : hn::UpperHalf(dh, e));
            const VD z = hn::Sub(LoadTailWide(d, xc + at + h * N, part), hn::LoadU(d, t.m + arrays));
            const auto lost = hn::And(hn::Eq(ed, hn::Zero(d)), hn::Gt(z, hn::Set(d, -HUGE_VAL)));
            if (!hn::AllFalse(d, lost)) ed = hn::IfThenElse(lost, ExpOutOfLine(z), ed);
            const VD pd = hn::Mul(ed, hn::LoadU(d, t.inv_d + arrays));
            return hn::Mul(hn::Mul(hn::LoadU(d, t.sum_a + arrays), pd), hn::Set(d, t.scale));
          });
        }
      }
      StoreColumns(hn::IfThenElse(replaced[f], replacement[f], g), gc + at, here);
    }
  }
}

template <class T>
HWY_INLINE void CrossEntropyColumnsInFloatT(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, std::size_t n,
                                            std::size_t columns, const CrossEntropyColumns& t) {
  const std::size_t NF = hn::Lanes(DFW());
  constexpr std::size_t kWide = 2;  // float vectors a block, as FloatStatsT's
  std::size_t j = 0;
  for (; j + kWide * NF <= columns; j += kWide * NF) {
    CrossEntropyFloatBlock<kWide, false>(x + j, xs, grad + j, gs, n, NF, t, j);
  }
  for (; j + NF <= columns; j += NF) CrossEntropyFloatBlock<1, false>(x + j, xs, grad + j, gs, n, NF, t, j);
  if (j < columns) CrossEntropyFloatBlock<1, true>(x + j, xs, grad + j, gs, n, columns - j, t, j);
}
#else
// One lane: the double pass, every class's gradient the target's included.
template <class T>
HWY_INLINE void CrossEntropyColumnsInFloatT(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, std::size_t n,
                                            std::size_t columns, const CrossEntropyColumns& t) {
  CrossEntropyColumnsT(x, xs, grad, gs, static_cast<T*>(nullptr), 0, n, columns, t);
}
#endif

// training::CompensatedSum's add in lanes (Neumaier's, the correction kept only while
// the sum is finite), from a sum `sum` with correction `correction`.
HWY_INLINE void CompensatedAdd(VD& sum, VD& correction, VD v) {
  const VD t = hn::Add(sum, v);
  const VD term = hn::IfThenElse(hn::Ge(hn::Abs(sum), hn::Abs(v)), hn::Add(hn::Sub(sum, t), v),
                                 hn::Add(hn::Sub(v, t), sum));
  correction = hn::IfThenElse(hn::IsFinite(t), hn::Add(correction, term), correction);
  sum = t;
}

// CompensatedSum::hi() of (sum, correction).
HWY_INLINE VD CompensatedHi(VD sum, VD correction) {
  return hn::IfThenElse(hn::IsFinite(sum), hn::Add(sum, correction), sum);
}

// Lanes of ignored samples or non-finite maxes come out as garbage: the write pass and
// the losses replace what they would give.
HWY_INLINE void ColumnTermsT(std::size_t columns, const CrossEntropyColumns& p) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  const VD one = hn::Set(d, 1.0);
  for (std::size_t j = 0; j < columns; j += N) {
    // ExactSum's d.add(at_max), d.add(below): the first add is exact.
    const VD at = hn::LoadU(d, p.at_max + j);
    const VD below = hn::LoadU(d, p.below + j);
    const VD sum = hn::Add(at, below);
    const VD correction = hn::IfThenElse(hn::Ge(hn::Abs(at), hn::Abs(below)), hn::Add(hn::Sub(at, sum), below),
                                         hn::Add(hn::Sub(below, sum), at));
    const VD minus_one = hn::Add(hn::Sub(sum, one), correction);
    const VD dv = hn::Add(sum, correction);
    const VD inv_d = hn::Div(one, dv);
    // log1p's domain is [0, inf): d - 1 >= 0 wherever the max is finite.
    hn::StoreU(hn::Log1p(d, hn::Max(minus_one, hn::Zero(d))), d, p.log_d + j);
    hn::StoreU(dv, d, p.d + j);
    hn::StoreU(inv_d, d, p.inv_d + j);
    hn::StoreU(hn::Neg(hn::Mul(minus_one, inv_d)), d, p.p_minus_one + j);
    // coefficient_sum: (1 - s) w_t, then spread * the class weights' sum.
    const VD target_coefficient = hn::Mul(hn::Set(d, p.keep), hn::LoadU(d, p.target_weight + j));
    VD s = hn::Zero(d);
    VD c = hn::Zero(d);
    CompensatedAdd(s, c, target_coefficient);
    if (p.spread != 0) CompensatedAdd(s, c, hn::Set(d, p.spread_weight_sum));
    const VD hi = CompensatedHi(s, c);
    const VD lo = hn::IfThenElseZero(hn::IsFinite(s), hn::Sub(c, hn::Sub(hi, s)));
    hn::StoreU(hi, d, p.sum_hi + j);
    hn::StoreU(lo, d, p.sum_lo + j);
    hn::StoreU(hn::Add(hi, lo), d, p.sum_a + j);
    hn::StoreU(target_coefficient, d, p.target_coefficient + j);
  }
}

HWY_INLINE void ColumnLossesT(std::size_t columns, const CrossEntropyColumns& p) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  for (std::size_t j = 0; j < columns; j += N) {
    const VD m = hn::LoadU(d, p.m + j);
    // (1 - s) w_t (m - x_t) apart from the smoothing's sum, as finish_vectorised adds them.
    VD s = hn::Zero(d);
    VD c = hn::Zero(d);
    const VD keep_weight = hn::Mul(hn::LoadU(d, p.target_weight + j), hn::Set(d, p.keep));
    CompensatedAdd(s, c, hn::Mul(keep_weight, hn::Sub(m, hn::LoadU(d, p.target_logit + j))));
    if (p.spread != 0) CompensatedAdd(s, c, hn::Mul(hn::Set(d, p.spread), hn::LoadU(d, p.spread_offsets + j)));
    VD loss = hn::MulAdd(hn::LoadU(d, p.sum_a + j), hn::LoadU(d, p.log_d + j), CompensatedHi(s, c));
    loss = hn::IfThenElse(hn::IsFinite(m), loss, hn::Set(d, NAN));
    loss = hn::IfThenZeroElse(hn::Ne(hn::LoadU(d, p.ignored + j), hn::Zero(d)), loss);
    hn::StoreU(loss, d, p.loss + j);
  }
}

// The write pass's gradient (CrossEntropyColumnsBlock) at each sample's target class.
HWY_INLINE void ColumnTargetGradientsT(std::size_t columns, const CrossEntropyColumns& p) {
  const DD d;
  const std::size_t N = hn::Lanes(d);
  for (std::size_t j = 0; j < columns; j += N) {
    const VD m = hn::LoadU(d, p.m + j);
    const VD v = hn::LoadU(d, p.target_logit + j);
    const VD sum_a = hn::LoadU(d, p.sum_a + j);
    // a_t = (1 - s) w_t + spread w_t, rounded as the scalar coefficient() rounds it.
    const VD a = hn::Add(hn::LoadU(d, p.target_coefficient + j),
                         hn::Mul(hn::Set(d, p.spread), hn::LoadU(d, p.target_weight + j)));
    // Flushed below DBL_MIN, where std::exp would give a subnormal p: S p then rounds
    // to 0 in every storage type.
    const VD e = cs::ExpF64Flush(d, hn::Sub(v, m), hn::Zero(d));
    VD g = hn::MulSub(sum_a, hn::Mul(e, hn::LoadU(d, p.inv_d + j)), a);
    const auto exact = hn::And(hn::Eq(v, m), hn::Lt(hn::LoadU(d, p.d + j), hn::Set(d, 2.0)));
    const VD rest = hn::Add(hn::Sub(hn::LoadU(d, p.sum_hi + j), a), hn::LoadU(d, p.sum_lo + j));
    g = hn::IfThenElse(exact, hn::MulAdd(sum_a, hn::LoadU(d, p.p_minus_one + j), rest), g);
    hn::StoreU(hn::Mul(g, hn::Set(d, p.scale)), d, p.target_grad + j);
  }
}

// Plain names per storage type, for HWY_EXPORT.
#define SMAX_COLUMN_KERNELS(Suffix, T)                                                                           \
  void SoftmaxBackwardColumns##Suffix(const T* y, const T* dy, T* dx, ColumnStrides s, std::size_t n,            \
                                      std::size_t columns, double inv_t) {                                       \
    SoftmaxBackwardColumnsT(y, dy, dx, s, n, columns, inv_t);                                                      \
  }                                                                                                              \
  void LogSoftmaxBackwardColumns##Suffix(const T* ly, const T* dy, T* dx, ColumnStrides s, std::size_t n,        \
                                         std::size_t columns, double inv_t) {                                    \
    LogSoftmaxBackwardColumnsT(ly, dy, dx, s, n, columns, inv_t);                                                  \
  }                                                                                                              \
  void ColumnStats##Suffix(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,               \
                           const CrossEntropyColumns& piece) {                                                   \
    ColumnStatsT(x, stride, n, columns, piece);                                                                  \
  }                                                                                                              \
  void CrossEntropyColumns##Suffix(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs, T* log_prob,       \
                                   std::ptrdiff_t ls, std::size_t n, std::size_t columns,                        \
                                   const CrossEntropyColumns& piece) {                                           \
    CrossEntropyColumnsT(x, xs, grad, gs, log_prob, ls, n, columns, piece);                                      \
  }                                                                                                              \
  bool FloatStats##Suffix(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,                \
                          const CrossEntropyColumns& piece) {                                                    \
    return FloatStatsT(x, stride, n, columns, piece);                                                            \
  }                                                                                                              \
  void CrossEntropyColumnsInFloat##Suffix(const T* x, std::ptrdiff_t xs, T* grad, std::ptrdiff_t gs,             \
                                          std::size_t n, std::size_t columns, const CrossEntropyColumns& piece) { \
    CrossEntropyColumnsInFloatT(x, xs, grad, gs, n, columns, piece);                                             \
  }

SMAX_COLUMN_KERNELS(F32, float)
SMAX_COLUMN_KERNELS(F16, half)
SMAX_COLUMN_KERNELS(BF16, bfloat16)
#undef SMAX_COLUMN_KERNELS

void ColumnTerms(std::size_t columns, const CrossEntropyColumns& piece) { ColumnTermsT(columns, piece); }
void ColumnLosses(std::size_t columns, const CrossEntropyColumns& piece) { ColumnLossesT(columns, piece); }
void ColumnTargetGradients(std::size_t columns, const CrossEntropyColumns& piece) {
  ColumnTargetGradientsT(columns, piece);
}

}  // namespace smax::training::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace smax::training::simd {

#define SMAX_EXPORT_COLUMN_KERNELS(Suffix, T)                                                                  \
  HWY_EXPORT(SoftmaxBackwardColumns##Suffix);                                                                  \
  HWY_EXPORT(LogSoftmaxBackwardColumns##Suffix);                                                               \
  void softmax_backward_columns(const T* y, const T* dy, T* dx, ColumnStrides strides, std::size_t n,          \
                                std::size_t columns, double inv_t) {                                           \
    HWY_DYNAMIC_DISPATCH(SoftmaxBackwardColumns##Suffix)(y, dy, dx, strides, n, columns, inv_t);               \
  }                                                                                                            \
  void log_softmax_backward_columns(const T* log_y, const T* dy, T* dx, ColumnStrides strides, std::size_t n,  \
                                    std::size_t columns, double inv_t) {                                       \
    HWY_DYNAMIC_DISPATCH(LogSoftmaxBackwardColumns##Suffix)(log_y, dy, dx, strides, n, columns, inv_t);        \
  }                                                                                                            \
  HWY_EXPORT(ColumnStats##Suffix);                                                                             \
  HWY_EXPORT(CrossEntropyColumns##Suffix);                                                                     \
  void cross_entropy_column_stats(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns,       \
                                  const CrossEntropyColumns& piece) {                                          \
    HWY_DYNAMIC_DISPATCH(ColumnStats##Suffix)(x, stride, n, columns, piece);                                   \
  }                                                                                                            \
  void cross_entropy_columns(const T* x, std::ptrdiff_t x_stride, T* grad, std::ptrdiff_t grad_stride,         \
                             T* log_prob, std::ptrdiff_t log_prob_stride, std::size_t n, std::size_t columns,  \
                             const CrossEntropyColumns& piece) {                                               \
    HWY_DYNAMIC_DISPATCH(CrossEntropyColumns##Suffix)(x, x_stride, grad, grad_stride, log_prob,                \
                                                      log_prob_stride, n, columns, piece);                     \
  }                                                                                                            \
  HWY_EXPORT(FloatStats##Suffix);                                                                              \
  bool cross_entropy_column_stats_in_float(const T* x, std::ptrdiff_t stride, std::size_t n, std::size_t columns, \
                                           const CrossEntropyColumns& piece) {                                 \
    return HWY_DYNAMIC_DISPATCH(FloatStats##Suffix)(x, stride, n, columns, piece);                             \
  }                                                                                                            \
  HWY_EXPORT(CrossEntropyColumnsInFloat##Suffix);                                                              \
  void cross_entropy_columns_in_float(const T* x, std::ptrdiff_t x_stride, T* grad, std::ptrdiff_t grad_stride, \
                                      std::size_t n, std::size_t columns, const CrossEntropyColumns& piece) {  \
    HWY_DYNAMIC_DISPATCH(CrossEntropyColumnsInFloat##Suffix)(x, x_stride, grad, grad_stride, n, columns, piece); \
  }

SMAX_EXPORT_COLUMN_KERNELS(F32, float)
SMAX_EXPORT_COLUMN_KERNELS(F16, half)
SMAX_EXPORT_COLUMN_KERNELS(BF16, bfloat16)
#undef SMAX_EXPORT_COLUMN_KERNELS

HWY_EXPORT(ColumnTerms);
HWY_EXPORT(ColumnLosses);
HWY_EXPORT(ColumnTargetGradients);
void cross_entropy_column_terms(std::size_t columns, const CrossEntropyColumns& piece) {
  HWY_DYNAMIC_DISPATCH(ColumnTerms)(columns, piece);
}
void cross_entropy_column_losses(std::size_t columns, const CrossEntropyColumns& piece) {
  HWY_DYNAMIC_DISPATCH(ColumnLosses)(columns, piece);
}
void cross_entropy_column_target_gradients(std::size_t columns, const CrossEntropyColumns& piece) {
  HWY_DYNAMIC_DISPATCH(ColumnTargetGradients)(columns, piece);
}

}  // namespace smax::training::simd
#endif  // HWY_ONCE
