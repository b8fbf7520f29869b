// Loads of f32, f16 and bf16 storage into f32 lanes, and stores back with round to
// nearest, ties to even: the one place the 16-bit formats meet the kernels, so that
// every kernel computes in float whatever it reads and writes. Bit-exact with the
// scalar conversions of smax/dtype.hpp (tests/unit/simd_convert_test.cpp).
//
// Why not Highway's own: in Highway 1.0.3, DemoteTo(bf16) truncates, and the
// emulated f16 conversions (targets without F16C) truncate and do not map inf and
// NaN. x86 AVX2 and AVX-512 convert f16 in hardware (F16C: round to nearest even,
// NaN kept quiet, as to_half does); every other target uses the integer code below.

#if defined(SMAX_CPU_SIMD_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_CONVERT_INL_H_
#undef SMAX_CPU_SIMD_CONVERT_INL_H_
#else
#define SMAX_CPU_SIMD_CONVERT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <hwy/highway.h>

#include "cpu/simd/walk-inl.h"
#include "smax/dtype.hpp"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline constexpr bool kHardwareF16 = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2;

// f16 bits (in u32 lanes) to f32.
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<DU> h) {
  const DU du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exponent = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto mantissa = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du, 112u))), hn::ShiftLeft<13>(mantissa));
  const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mantissa));  // inf, NaN
  const auto subnormal =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mantissa)), hn::Set(df, 0x1p-24f)));
  auto bits = hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal, normal);
  bits = hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x1Fu)), special, bits);
  return hn::BitCast(df, hn::Or(bits, sign));
}

// f32 to f16 bits (in u32 lanes), as to_half does it.
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DU> F32ToF16Bits(DF df, hn::Vec<DF> v) {
  const DU du;
  const hn::RebindToSigned<DF> di;
  const auto x = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  const auto ax = hn::And(x, hn::Set(du, 0x7FFFFFFFu));
  const auto axi = hn::BitCast(di, ax);  // < 2^31: signed compares are safe
  // Normal range: rebias the exponent, round on the 13 dropped bits, ties to even.
  auto rebiased = hn::Sub(ax, hn::Set(du, 0x38000000u));
  rebiased = hn::Add(rebiased, hn::Add(hn::Set(du, 0xFFFu), hn::And(hn::ShiftRight<13>(rebiased), hn::Set(du, 1u))));
  auto bits = hn::ShiftRight<13>(rebiased);
  // Below 2^-14: a multiple of 2^-24; Round rounds ties to even.
  const auto scaled = hn::Round(hn::Mul(hn::BitCast(df, ax), hn::Set(df, 0x1p24f)));
  const auto subnormal = hn::BitCast(du, hn::ConvertTo(di, scaled));
  bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(axi, hn::Set(di, 0x38800000))), subnormal, bits);
  bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(axi, hn::Set(di, 0x477FEFFF))), hn::Set(du, 0x7C00u), bits);
  const auto nan = hn::Or(hn::Set(du, 0x7E00u), hn::And(hn::ShiftRight<13>(ax), hn::Set(du, 0x3FFu)));
  bits = hn::IfThenElse(hn::RebindMask(du, hn::Gt(axi, hn::Set(di, 0x7F800000))), nan, bits);
  return hn::Or(bits, sign);
}

// The bits of a float that is not NaN (u32 lanes) rounded to bf16, nearest even, in
// the upper 16 bits of each lane (HighHalves takes them).
template <class DU>
HWY_INLINE hn::Vec<DU> RoundedBF16Bits(DU du, hn::Vec<DU> x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // x + 0x7FFF, plus 1 where bit 16 (bf16's last) is set: a test into a mask and a
  // masked add, where the shift and the AND took two operations.
  if constexpr (std::is_same_v<hn::Vec<DU>, hn::Vec512<std::uint32_t>>) {
    const __m512i t = _mm512_add_epi32(x.raw, _mm512_set1_epi32(0x7FFF));
    const __mmask16 odd = _mm512_test_epi32_mask(x.raw, _mm512_set1_epi32(0x10000));
    return hn::Vec<DU>{_mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1))};
  }
#endif
  return hn::Add(x, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u))));
}

// f32 to bf16 bits (in the upper 16 bits of u32 lanes), as to_bfloat16 does it.
template <class DF, class DU = hn::RebindToUnsigned<DF>>
HWY_INLINE hn::Vec<DU> F32ToBF16Bits(DF /*df*/, hn::Vec<DF> v) {
  const DU du;
  const auto x = hn::BitCast(du, v);
  const auto quiet_nan = hn::Or(x, hn::Set(du, 0x400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, RoundedBF16Bits(du, x));
}

// u16 lanes of DF's lane count, and their widening/narrowing to u32.
template <class DF>
using D16 = hn::Rebind<std::uint16_t, DF>;

template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Widen(DF /*df*/, hn::Vec<D16<DF>> h) {
  return hn::PromoteTo(hn::RebindToUnsigned<DF>(), h);
}

template <class DF>
HWY_INLINE hn::Vec<D16<DF>> Narrow(DF /*df*/, hn::Vec<hn::RebindToUnsigned<DF>> bits) {
  // Every value is below 2^16, so the signed saturating demotion keeps it.
  return hn::DemoteTo(D16<DF>(), hn::BitCast(hn::RebindToSigned<DF>(), bits));
}

// The upper 16 bits of each u32 lane, as u16 lanes. AVX-512 picks them with one
// permute (vpermt2w) where the shift and the demotion take three operations.
template <class DF>
HWY_INLINE hn::Vec<D16<DF>> HighHalves(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<hn::Vec<DF>, hn::Vec512<float>>) {
    const hn::Repartition<std::uint16_t, DF> d16x2;
    const auto halves = hn::BitCast(d16x2, bits);
    return hn::LowerHalf(hn::ConcatOdd(d16x2, halves, halves));
  }
#endif
  return Narrow(df, hn::ShiftRight<16>(bits));
}

template <class DF>
HWY_INLINE hn::Vec<DF> ToF32(DF df, hn::Vec<D16<DF>> h, const half*) {
  if constexpr (kHardwareF16) {
    return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, DF>(), h));
  } else {
    return F16BitsToF32(df, Widen(df, h));
  }
}

template <class DF>
HWY_INLINE hn::Vec<DF> ToF32(DF df, hn::Vec<D16<DF>> h, const bfloat16*) {
  return hn::BitCast(df, hn::ShiftLeft<16>(Widen(df, h)));
}

template <class DF>
HWY_INLINE hn::Vec<D16<DF>> FromF32(DF df, hn::Vec<DF> v, const half*) {
  if constexpr (kHardwareF16) {
    return hn::BitCast(D16<DF>(), hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
  } else {
    return Narrow(df, F32ToF16Bits(df, v));
  }
}

template <class DF>
HWY_INLINE hn::Vec<D16<DF>> FromF32(DF df, hn::Vec<DF> v, const bfloat16*) {
  return HighHalves(df, F32ToBF16Bits(df, v));
}

inline const std::uint16_t* Bits(const half* p) { return reinterpret_cast<const std::uint16_t*>(p); }
inline const std::uint16_t* Bits(const bfloat16* p) { return reinterpret_cast<const std::uint16_t*>(p); }
inline std::uint16_t* Bits(half* p) { return reinterpret_cast<std::uint16_t*>(p); }
inline std::uint16_t* Bits(bfloat16* p) { return reinterpret_cast<std::uint16_t*>(p); }

// Lanes(df) elements at p, as float.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF, class T>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const T* p) {
  return ToF32(df, hn::LoadU(D16<DF>(), Bits(p)), p);
}

// The 4 * Lanes(df) elements at p as float in four vectors, in an order of their own:
// for the passes whose result does not depend on it (a max, a sum). bf16 loads pairs
// of elements as 32-bit lanes and takes the even ones by a shift and the odd ones by
// a mask, one operation a vector where LoadF32 widens and shifts, two.
template <class DF, class T>
HWY_INLINE void LoadF32x4AnyOrder(DF df, const T* p, hn::Vec<DF> (&v)[4]) {
  if constexpr (std::is_same_v<T, bfloat16> && hn::MaxLanes(DF()) > 1) {
    const hn::RebindToUnsigned<DF> du;
    const std::size_t N = hn::Lanes(df);
    for (std::size_t k = 0; k < 2; ++k) {
      const auto pairs = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(Bits(p + 2 * k * N)));
      v[2 * k] = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
      v[2 * k + 1] = hn::BitCast(df, hn::And(pairs, hn::Set(du, 0xFFFF0000u)));
    }
  } else {
    for (std::size_t k = 0; k < 4; ++k) v[k] = LoadF32(df, p + k * hn::Lanes(df));
  }
}

// The `count` (< Lanes) elements at p as float, the other lanes `fill`.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadTailF32(DF df, const float* p, std::size_t count, hn::Vec<DF> fill) {
  return LoadTail(df, p, count, fill);
}
template <class DF, class T>
HWY_INLINE hn::Vec<DF> LoadTailF32(DF df, const T* p, std::size_t count, hn::Vec<DF> fill) {
  const D16<DF> d16;
  const hn::Vec<DF> v = ToF32(df, LoadTail(d16, Bits(p), count, hn::Zero(d16)), p);
  return hn::IfThenElse(hn::FirstN(df, count), v, fill);
}

// Stores Lanes(df) floats at p, rounded to T.
template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, float* p) {
  hn::StoreU(v, df, p);
}
template <class DF, class T>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, T* p) {
  hn::StoreU(FromF32(df, v, p), D16<DF>(), Bits(p));
}

// StoreF32 for values known not to be NaN (a softmax's outputs): bf16 rounds without
// its NaN case (4 operations a vector fewer); the other types store as StoreF32.
template <class DF, class T>
HWY_INLINE void StoreF32NotNaN(DF df, hn::Vec<DF> v, T* p) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    const hn::RebindToUnsigned<DF> du;
    hn::StoreU(HighHalves(df, RoundedBF16Bits(du, hn::BitCast(du, v))), D16<DF>(), Bits(p));
  } else {
    StoreF32(df, v, p);
  }
}

// StoreF32 (StoreF32NotNaN with kNotNaN) with a streaming store, around the cache: p
// must be aligned to the stored vector (Lanes(df) elements of T). 16-bit vectors of
// less than 16 bytes (SSE4's 4 lanes) store through the cache: x86's narrowest
// streaming store writes 16.
template <bool kNotNaN = false, class DF, class T>
HWY_INLINE void StreamF32(DF df, hn::Vec<DF> v, T* p) {
  if constexpr (std::is_same_v<T, float>) {
    hn::Stream(v, df, p);
  } else if constexpr (hn::MaxLanes(D16<DF>()) * sizeof(T) < 16) {
    if constexpr (kNotNaN) {
      StoreF32NotNaN(df, v, p);
    } else {
      StoreF32(df, v, p);
    }
  } else if constexpr (kNotNaN && std::is_same_v<T, bfloat16>) {
    const hn::RebindToUnsigned<DF> du;
    hn::Stream(HighHalves(df, RoundedBF16Bits(du, hn::BitCast(du, v))), D16<DF>(), Bits(p));
  } else {
    hn::Stream(FromF32(df, v, p), D16<DF>(), Bits(p));
  }
}

// StoreF32NotNaN (StreamF32<true> with kStream) of v0 and then v1 at p. For bf16
// 512-bit vectors one permute (vpermt2w) picks both vectors' upper halves for one
// store of 64 bytes, where two stores take a permute each; f16 512-bit vectors stream
// as one store of 64 bytes, a whole cache line, too. A streaming one needs p aligned
// to 64 bytes (else the two vectors stream apart).
template <bool kStream, class DF, class T>
HWY_INLINE void StoreF32x2NotNaN(DF df, hn::Vec<DF> v0, hn::Vec<DF> v1, T* p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<hn::Vec<DF>, hn::Vec512<float>>) {
    if (!kStream || reinterpret_cast<std::uintptr_t>(p) % 64 == 0) {
      const hn::RebindToUnsigned<DF> du;
      const hn::Repartition<std::uint16_t, DF> d16x2;
      const auto bits0 = hn::BitCast(d16x2, RoundedBF16Bits(du, hn::BitCast(du, v0)));
      const auto bits1 = hn::BitCast(d16x2, RoundedBF16Bits(du, hn::BitCast(du, v1)));
      const auto both = hn::ConcatOdd(d16x2, bits1, bits0);
      if constexpr (kStream) {
        hn::Stream(both, d16x2, Bits(p));
      } else {
        hn::StoreU(both, d16x2, Bits(p));
      }
      return;
    }
  }
  if constexpr (kStream && std::is_same_v<T, half> && std::is_same_v<hn::Vec<DF>, hn::Vec512<float>>) {
    if (reinterpret_cast<std::uintptr_t>(p) % 64 == 0) {
      const hn::Repartition<std::uint16_t, DF> d16x2;
      hn::Stream(hn::Combine(d16x2, FromF32(df, v1, p), FromF32(df, v0, p)), d16x2, Bits(p));
      return;
    }
  }
#endif
  if constexpr (kStream) {
    StreamF32</*kNotNaN=*/true>(df, v0, p);
    StreamF32</*kNotNaN=*/true>(df, v1, p + hn::Lanes(df));
  } else {
    StoreF32NotNaN(df, v0, p);
    StoreF32NotNaN(df, v1, p + hn::Lanes(df));
  }
}

// StreamF32<kNotNaN> where `stream` (p aligned as it needs), else StoreF32 (or
// StoreF32NotNaN with kNotNaN).
template <bool kNotNaN = false, class DF, class T>
HWY_INLINE void StoreOrStreamF32(DF df, hn::Vec<DF> v, T* p, bool stream) {
  if (stream) {
    StreamF32<kNotNaN>(df, v, p);
  } else if constexpr (kNotNaN) {
    StoreF32NotNaN(df, v, p);
  } else {
    StoreF32(df, v, p);
  }
}

// Whether LoadF32x2Paired keeps the elements' order (v0 the first Lanes(df) of them).
template <class DF, class T>
inline constexpr bool kPairsInOrder = !(std::is_same_v<T, bfloat16> && hn::MaxLanes(DF()) > 1);

// The 2 * Lanes(df) elements at p as float in two vectors, in an order of their own
// that StoreF32x2Paired puts back: for passes that work element by element. bf16
// loads pairs of elements as 32-bit lanes, the even ones by a shift and the odd ones
// by a mask: one load and two operations where two LoadF32 take two widening loads
// and two shifts. The other types load in order.
template <class DF, class T>
HWY_INLINE void LoadF32x2Paired(DF df, const T* p, hn::Vec<DF>& v0, hn::Vec<DF>& v1) {
  if constexpr (!kPairsInOrder<DF, T>) {
    const hn::RebindToUnsigned<DF> du;
    const auto pairs = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(Bits(p)));
    v0 = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
    v1 = hn::BitCast(df, hn::And(pairs, hn::Set(du, 0xFFFF0000u)));
  } else {
    v0 = LoadF32(df, p);
    v1 = LoadF32(df, p + hn::Lanes(df));
  }
}

// Stores v0 and v1, in LoadF32x2Paired's order, as the 2 * Lanes(df) elements at p,
// rounded to T (without the NaN case with kNotNaN: StoreF32NotNaN); with `stream`,
// around the cache (p aligned to Lanes(df) elements of T, as StreamF32 needs).
template <bool kNotNaN, class DF, class T>
HWY_INLINE void StoreF32x2Paired(DF df, hn::Vec<DF> v0, hn::Vec<DF> v1, T* p, bool stream) {
  if constexpr (!kPairsInOrder<DF, T>) {
    const hn::RebindToUnsigned<DF> du;
    const auto rounded = [&](hn::Vec<DF> v) {
      if constexpr (kNotNaN) return RoundedBF16Bits(du, hn::BitCast(du, v));
      else return F32ToBF16Bits(df, v);
    };
    const auto pairs = hn::OrAnd(hn::ShiftRight<16>(rounded(v0)), rounded(v1), hn::Set(du, 0xFFFF0000u));
    auto* out = reinterpret_cast<std::uint32_t*>(Bits(p));
    constexpr std::size_t kHalfBytes = hn::MaxLanes(du) * sizeof(std::uint32_t) / 2;
    if (!stream) {
      hn::StoreU(pairs, du, out);
    } else if (reinterpret_cast<std::uintptr_t>(p) % (2 * kHalfBytes) == 0) {
      hn::Stream(pairs, du, out);
#if HWY_TARGET != HWY_SCALAR
    } else if constexpr (kHalfBytes >= 16) {  // x86's narrowest streaming store writes 16
      const hn::Half<decltype(du)> dh;
      hn::Stream(hn::LowerHalf(dh, pairs), dh, out);
      hn::Stream(hn::UpperHalf(dh, pairs), dh, out + hn::Lanes(dh));
#endif
    } else {
      hn::StoreU(pairs, du, out);
    }
  } else if constexpr (kNotNaN) {
    if (stream) StoreF32x2NotNaN<true>(df, v0, v1, p);
    else StoreF32x2NotNaN<false>(df, v0, v1, p);
  } else {
    StoreOrStreamF32(df, v0, p, stream);
    StoreOrStreamF32(df, v1, p + hn::Lanes(df), stream);
  }
}

// Stores the first `count` (< Lanes) lanes of v at p, rounded to T.
template <class DF>
HWY_INLINE void StoreTailF32(DF df, hn::Vec<DF> v, float* p, std::size_t count) {
  StoreTail(df, v, p, count);
}
template <class DF, class T>
HWY_INLINE void StoreTailF32(DF df, hn::Vec<DF> v, T* p, std::size_t count) {
  StoreTail(D16<DF>(), FromF32(df, v, p), Bits(p), count);
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_CONVERT_INL_H_
