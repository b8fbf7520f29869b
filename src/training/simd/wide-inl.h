// Storage (f32, f16, bf16) in double lanes, for the training kernels that compute in
// double: each double lane takes one element, loaded and stored through float lanes
// of the same count (cpu/simd/convert-inl.h). Compiled once per target (the -inl.h
// convention: foreach_target.h includes this header again for every target, so its
// guard toggles).

#if defined(SMAX_TRAINING_SIMD_WIDE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_TRAINING_SIMD_WIDE_INL_H_
#undef SMAX_TRAINING_SIMD_WIDE_INL_H_
#else
#define SMAX_TRAINING_SIMD_WIDE_INL_H_
#endif

#include <cstddef>

#include <hwy/highway.h>

#include "cpu/simd/convert-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::training::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;
using DFD = hn::Rebind<float, DD>;

template <class T>
HWY_INLINE VD LoadWide(DD dd, const T* p) {
  return hn::PromoteTo(dd, cpu::simd::HWY_NAMESPACE::LoadF32(DFD(), p));
}

// The tail's other lanes are 0.
template <class T>
HWY_INLINE VD LoadTailWide(DD dd, const T* p, std::size_t count) {
  const DFD df;
  return hn::PromoteTo(dd, cpu::simd::HWY_NAMESPACE::LoadTailF32(df, p, count, hn::Zero(df)));
}

// double to float with IEEE rounding, as static_cast: Highway's emulated targets
// saturate infinities and overflowing values to the largest float instead.
HWY_INLINE hn::Vec<DFD> ToFloat(VD v) {
  const DFD df;
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  constexpr std::size_t kMaxLanes = cpu::simd::HWY_NAMESPACE::kMaxVectorBytes / sizeof(double);
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
  cpu::simd::HWY_NAMESPACE::StoreF32(DFD(), ToFloat(v), p);
}

template <class T>
HWY_INLINE void StoreTailWide(VD v, T* p, std::size_t count) {
  cpu::simd::HWY_NAMESPACE::StoreTailF32(DFD(), ToFloat(v), p, count);
}

}  // namespace smax::training::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_TRAINING_SIMD_WIDE_INL_H_
