// Element types and the 16-bit float storage types with their conversions.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace smax {

enum class DType : std::uint8_t { f32, f64, f16, bf16 };

std::string_view to_string(DType dtype) noexcept;          // "f32", "f64", "f16", "bf16"
std::optional<DType> parse_dtype(std::string_view name) noexcept;
std::size_t size_of(DType dtype) noexcept;  // bytes per element; 0 for an invalid value

// IEEE 754 binary16, stored as its bits. Arithmetic happens after widening to float.
struct half {
  std::uint16_t bits = 0;
};

// bfloat16 (the upper half of a binary32), stored as its bits.
struct bfloat16 {
  std::uint16_t bits = 0;
};

// Exact widening.
inline float to_float(half h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round to nearest, ties to even; overflow gives inf; NaN stays NaN (quiet).
inline half to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu))};
  if (ax >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24. Scaling by 2^24 is
    // exact, and nearbyint rounds ties to even in the default rounding mode. A result
    // of 1024 is the smallest normal, whose encoding is the same integer.
    const float scaled = std::bit_cast<float>(ax) * 0x1p24f;
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)))};
  }
  std::uint32_t rebiased = ax - 0x38000000u;  // exponent bias 127 -> 15
  rebiased += 0xfffu + ((rebiased >> 13) & 1u);  // ties to even; a carry bumps the exponent
  return {static_cast<std::uint16_t>(sign | (rebiased >> 13))};
}

inline float to_float(bfloat16 b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

// Round to nearest, ties to even; NaN stays NaN (quiet).
inline bfloat16 to_bfloat16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((x >> 16) | 0x0040u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<std::uint16_t>(x >> 16)};
}

// The DType of a C++ element type.
template <class T>
inline constexpr bool is_element_type = false;
template <> inline constexpr bool is_element_type<float> = true;
template <> inline constexpr bool is_element_type<double> = true;
template <> inline constexpr bool is_element_type<half> = true;
template <> inline constexpr bool is_element_type<bfloat16> = true;

template <class T>
  requires is_element_type<T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, half>) return DType::f16;
  else return DType::bf16;
}();

}  // namespace smax
