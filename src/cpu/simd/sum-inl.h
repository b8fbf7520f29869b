// Sums of exps in float lanes accumulated into double lanes (SumLanes), shared by
// the row kernels (cpu/simd/f32_rows.cpp) and cross-entropy's stored exps
// (training/simd/gradient_rows.cpp). Compiled once per target (the -inl.h convention).

#if defined(SMAX_CPU_SIMD_SUM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_SUM_INL_H_
#undef SMAX_CPU_SIMD_SUM_INL_H_
#else
#define SMAX_CPU_SIMD_SUM_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

#include "cpu/simd/f32_rows.hpp"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The double lanes that a vector of floats widens into.
#if HWY_TARGET == HWY_SCALAR
using SumWideD = hn::Rebind<double, hn::ScalableTag<float>>;
#else
using SumWideD = hn::Rebind<double, hn::Half<hn::ScalableTag<float>>>;
#endif

// lo, hi += v's lanes widened to double.
HWY_INLINE void AddWide(SumWideD dd, hn::Vec<SumWideD>& lo, hn::Vec<SumWideD>& hi,
                        hn::Vec<hn::ScalableTag<float>> v) {
#if HWY_TARGET == HWY_SCALAR
  (void)hi;
  lo = hn::Add(lo, hn::PromoteTo(dd, v));
#else
  const hn::Half<hn::ScalableTag<float>> dh;
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
#endif
}

// The running ExpSum of a pass. Terms come in fours, added in float by a tree of
// depth two, and kBlockFours such sums are added in float one after the other before
// they widen into double accumulators: a term meets at most five float roundings
// (within 5 * 2^-24 of the block's sum, since the terms are never negative; d stays
// within three float ulps, the accuracy bar allows sixteen), and the widening, whose
// conversions and lane moves cost more than the adds, comes once per sixteen
// vectors. Pairs and single terms (a row's last vectors) widen at once. With
// kSplitAtMax, terms at the max (z == z_at_max, exp exactly 1; z below it elsewhere) are
// counted in integer lanes instead, so that d - 1 stays exact for log_softmax and
// logsumexp (ExpSum); the lanes move into a 64-bit count every kBlocksPerCountFold
// blocks, before they can wrap (a safe row of 2^35 equal f32 elements counts 2^31 in
// each of 16 lanes). A row holds its max in few places, so four vectors are split
// only where the max of their z is z_at_max: four operations a vector (compare, mask to
// lanes, count, zero) became one and a quarter, and the sums keep their bits (rows of
// 1000 to 8192 floats in cache, log_softmax: 1.07-1.09x, one thread).
template <bool kSplitAtMax>
class SumLanes {
  using DF = hn::ScalableTag<float>;
  using VF = hn::Vec<DF>;
  using DI = hn::RebindToSigned<DF>;
  using DD = SumWideD;

 public:
  // z_at_max: the z of the terms at the max (0 where z is x - m; the max itself where
  // z is x: DirectTableExp), above every other z.
  explicit SumLanes(float z_at_max = 0)
      : a0_(hn::Zero(dd_)), a1_(a0_), block_(hn::Zero(d_)), count_(hn::Zero(di_)), z_at_max_(hn::Set(d_, z_at_max)) {}

  HWY_INLINE void Add(VF e0, VF z0, VF e1, VF z1, VF e2, VF z2, VF e3, VF z3) {
    if (HWY_UNLIKELY(AnyAtMax(hn::Max(hn::Max(z0, z1), hn::Max(z2, z3))))) {
      e0 = Term(e0, z0);
      e1 = Term(e1, z1);
      e2 = Term(e2, z2);
      e3 = Term(e3, z3);
    }
    block_ = hn::Add(block_, hn::Add(hn::Add(e0, e1), hn::Add(e2, e3)));
    if (++block_fours_ == kBlockFours) {
      AddWide(dd_, a0_, a1_, block_);
      block_ = hn::Zero(d_);
      block_fours_ = 0;
      if constexpr (kSplitAtMax) {
        if (++blocks_since_fold_ == kBlocksPerCountFold) FoldCounts();
      }
    }
  }
  HWY_INLINE void Add(VF e0, VF z0, VF e1, VF z1) {
    if (HWY_UNLIKELY(AnyAtMax(hn::Max(z0, z1)))) {
      e0 = Term(e0, z0);
      e1 = Term(e1, z1);
    }
    AddWide(dd_, a0_, a1_, hn::Add(e0, e1));
  }
  HWY_INLINE void Add(VF e, VF z) {
    if (HWY_UNLIKELY(AnyAtMax(z))) e = Term(e, z);
    AddWide(dd_, a0_, a1_, e);
  }

  ExpSum Result() const {
    ExpSum r;
    hn::Vec<DD> a0 = a0_, a1 = a1_;
    AddWide(dd_, a0, a1, block_);
    r.below_max = hn::GetLane(hn::SumOfLanes(dd_, hn::Add(a0, a1)));
    if constexpr (kSplitAtMax) r.at_max = folded_count_ + LaneTotal(count_);
    return r;
  }

 private:
  // Whether a lane of z_max (the max of some vectors' z) is at the row's max.
  HWY_INLINE bool AnyAtMax(VF z_max) const {
    if constexpr (kSplitAtMax) {
      return !hn::AllFalse(d_, hn::Eq(z_max, z_at_max_));
    } else {
      return false;
    }
  }

  HWY_INLINE VF Term(VF e, VF z) {
    const auto at_max = hn::Eq(z, z_at_max_);
    count_ = hn::Sub(count_, hn::VecFromMask(di_, hn::RebindMask(di_, at_max)));  // a true lane is -1
    return hn::IfThenZeroElse(at_max, e);
  }

  // The lanes hold at most 2^16 each between folds (kBlocksPerCountFold), so their
  // total fits the 32-bit lane sum.
  HWY_INLINE std::int64_t LaneTotal(hn::Vec<DI> counts) const { return hn::GetLane(hn::SumOfLanes(di_, counts)); }

  HWY_INLINE void FoldCounts() {
    folded_count_ += LaneTotal(count_);
    count_ = hn::Zero(di_);
    blocks_since_fold_ = 0;
  }

  static constexpr int kBlockFours = 4;
  // A block adds at most 16 to a lane: 2^16 at most before a fold. Short enough that
  // rows of 2^20 elements and more (the long-row tests) fold.
  static constexpr int kBlocksPerCountFold = 1 << 12;

  DF d_;
  DD dd_;
  DI di_;
  hn::Vec<DD> a0_, a1_;
  VF block_;  // the float sum of the current block's fours
  int block_fours_ = 0;
  hn::Vec<DI> count_;
  VF z_at_max_;
  int blocks_since_fold_ = 0;
  std::int64_t folded_count_ = 0;
};

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_SUM_INL_H_
