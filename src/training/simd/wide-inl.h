// Storage (f32, f16, bf16) in double lanes, for the training kernels that compute in
// double: each double lane takes one element, loaded and stored through float lanes
// of the same count (cpu/simd/convert-inl.h); and what the kernels that compute in
// float lanes share. Compiled once per target (the -inl.h
// convention: foreach_target.h includes this header again for every target, so its
// guard toggles).

#if defined(SMAX_TRAINING_SIMD_WIDE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_TRAINING_SIMD_WIDE_INL_H_
#undef SMAX_TRAINING_SIMD_WIDE_INL_H_
#else
#define SMAX_TRAINING_SIMD_WIDE_INL_H_
#endif

#include <cstddef>
#include <type_traits>

#include <hwy/highway.h>

#include "cpu/simd/convert-inl.h"
#include "cpu/simd/walk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace smax::training::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;
using DFD = hn::Rebind<float, DD>;

// log_softmax_backward's float-lane writes (gradient_rows.cpp's rows, and 16-bit
// columns in gradient_columns.cpp) share this bound.
// The float lanes' cancellation bound K for outputs of type T: an element stays in
// float lanes where |p S| <= K |dx|. Its float error relative to dx is at most K times
// the exp's (and, for 16-bit outputs, S's rounding to float) plus dx's own roundings.
// For f32 the exp is ExpFlush (1.01 ulp: 6.0e-8 K) and S is carried as two floats
// (p S_hi and p S_lo subtracted by one multiply-add each: three roundings of dx with
// 1/T's, 1.8e-7), and K = 8 keeps that within the 1e-6 bar (6.6e-7). (With S rounded
// to one float, K = 2 had left 5.4e-7; random dy then sent about half the vectors of
// rows of 100 to the double lanes.) A 16-bit output only needs it well within its own unit in the last place
// (at least 2^-8 of dx for bf16, 2^-11 for f16), and takes ExpFlushCoarse (6e-7; 6.6e-7
// K with S's, 5-9% faster for bf16 on AVX-512), where K = 2^10 and 2^6 leave 0.17 and
// 0.09 of that unit (tests/unit/training_backward_test.cpp's NearCancellation checks
// it). The larger K, the fewer vectors the double lanes redo.
template <class T>
inline constexpr float kCancellationBound = std::is_same_v<T, bfloat16> ? 1024.0f : std::is_same_v<T, half> ? 64.0f : 8.0f;

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
