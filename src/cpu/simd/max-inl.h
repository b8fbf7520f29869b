// The running max of a row with its NaN check (MaxLanes), shared by the row kernels
// (cpu/simd/f32_rows.cpp) and cross-entropy's exp pass (training/simd/gradient_rows.cpp).
// Compiled once per target (the -inl.h convention).

#if defined(SMAX_CPU_SIMD_MAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_MAX_INL_H_
#undef SMAX_CPU_SIMD_MAX_INL_H_
#else
#define SMAX_CPU_SIMD_MAX_INL_H_
#endif

#include <cstddef>
#include <limits>

#include <hwy/highway.h>

#include "cpu/simd/convert-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether any of x[0..n) is NaN.
template <class T>
bool AnyNaN(const T* x, std::size_t n) {
  const hn::ScalableTag<float> d;
  auto nan = hn::IsNaN(hn::Zero(d));  // all false
  Walk<1>(
      d, n, false, [&](std::size_t i) { nan = hn::Or(nan, hn::IsNaN(LoadF32(d, x + i))); },
      [&](std::size_t i) { nan = hn::Or(nan, hn::IsNaN(LoadF32(d, x + i))); },
      [&](std::size_t i, std::size_t count) {
        nan = hn::Or(nan, hn::IsNaN(LoadTailF32(d, x + i, count, hn::Zero(d))));
      });
  return !hn::AllFalse(d, nan);
}

// The running max of a row, and NaN if any element is NaN. Max drops NaNs (x86's max
// returns its second operand when either is NaN), so NaNs are found from a sum kept
// beside it (one add a vector): it is NaN if an element is, and then, or where +inf
// met -inf, AnyNaN decides. kChains independent max chains: four for a pass of its
// own, two beside another pass's steps (VScaleExps). Without kFindsNaN the sum is not
// kept and a NaN may be dropped: for passes whose own result turns NaN with one
// (ExpsFromGuess's sum of exps).
template <class T, std::size_t kChains, bool kFindsNaN = true>
class MaxLanes {
  using DF = hn::ScalableTag<float>;
  using VF = hn::Vec<DF>;

 public:
  MaxLanes() {
    for (VF& m : m_) m = hn::Set(d_, -std::numeric_limits<float>::infinity());
    sums_[0] = sums_[1] = hn::Zero(d_);
  }

  // Adds [p, p + count): four vectors, one vector, or a tail of fewer elements.
  HWY_INLINE void Add(const T* p, std::size_t count) {
    const std::size_t N = hn::Lanes(d_);
    if (count == 4 * N) {
      VF v[4];
      LoadF32x4AnyOrder(d_, p, v);
      for (std::size_t k = 0; k < 4; ++k) m_[k % kChains] = hn::Max(m_[k % kChains], v[k]);
      if constexpr (kFindsNaN) {
        sums_[0] = hn::Add(sums_[0], hn::Add(v[0], v[1]));
        sums_[1] = hn::Add(sums_[1], hn::Add(v[2], v[3]));
      }
    } else if (count == N) {
      const VF v = LoadF32(d_, p);
      m_[0] = hn::Max(m_[0], v);
      if constexpr (kFindsNaN) sums_[0] = hn::Add(sums_[0], v);
    } else {
      const VF v = LoadTailF32(d_, p, count, hn::Zero(d_));
      const VF neg_inf = hn::Set(d_, -std::numeric_limits<float>::infinity());
      m_[kChains - 1] = hn::Max(m_[kChains - 1], hn::IfThenElse(hn::FirstN(d_, count), v, neg_inf));
      if constexpr (kFindsNaN) sums_[1] = hn::Add(sums_[1], v);
    }
  }

  // Adds [p, p + count) for any count.
  HWY_INLINE void AddAny(const T* p, std::size_t count) {
    const std::size_t N = hn::Lanes(d_);
    std::size_t i = 0;
    for (; i + N <= count; i += N) Add(p + i, N);
    if (i < count) Add(p + i, count - i);
  }

  // Adds the part of x[0, n) within [i, i + count): a step of another pass over a
  // range at least as long, beside which this max runs (the next chunk's or block's).
  HWY_INLINE void AddWithin(const T* x, std::size_t n, std::size_t i, std::size_t count) {
    if (i + count <= n) {
      Add(x + i, count);
    } else if (i < n) {
      AddAny(x + i, n - i);
    }
  }

  // The max of the row x[0, n), every element of which was added.
  float Result(const T* x, std::size_t n) const {
    if (kFindsNaN && !hn::AllFalse(d_, hn::IsNaN(hn::Add(sums_[0], sums_[1]))) && AnyNaN(x, n)) {
      return std::numeric_limits<float>::quiet_NaN();
    }
    VF m = m_[0];
    for (std::size_t k = 1; k < kChains; ++k) m = hn::Max(m, m_[k]);
    return hn::GetLane(hn::MaxOfLanes(d_, m));
  }

 private:
  DF d_;
  VF m_[kChains];
  VF sums_[2];
};

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_MAX_INL_H_
