// smax::bfloat16 conversions: exhaustive round trip, and rounding to nearest even
// against an independent reference that measures both candidates in double.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "seed.hpp"
#include "smax/dtype.hpp"

namespace smax::test {
namespace {

bool is_nan_bits(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0; }

// The bfloat16 nearest to f, ties to the even pattern, for non-NaN f: the candidates
// are f truncated to 16 bits and the next pattern away from zero (0x7f80, infinity,
// past the largest finite value, which counts as 2^128 for the distance).
std::uint16_t reference_bfloat16_bits(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const auto below = static_cast<std::uint16_t>((bits & 0x7fffffffu) >> 16);
  const auto above = static_cast<std::uint16_t>(below + 1);
  auto magnitude = [](std::uint16_t b) {
    return b == 0x7f80u ? std::ldexp(1.0, 128) : static_cast<double>(std::bit_cast<float>(std::uint32_t{b} << 16));
  };
  const double v = std::fabs(static_cast<double>(f));
  const double to_below = v - magnitude(below);
  const double to_above = magnitude(above) - v;
  std::uint16_t pick = below;
  if (to_above < to_below || (to_above == to_below && (below & 1u) != 0)) pick = above;
  if (std::isinf(f)) pick = 0x7f80u;
  return static_cast<std::uint16_t>(sign | pick);
}

class Bfloat16Conversion : public SeededTest {};

TEST_F(Bfloat16Conversion, EveryPatternSurvivesARoundTrip) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const bfloat16 b{static_cast<std::uint16_t>(bits)};
    const float f = to_float(b);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f), bits << 16);
    const bfloat16 back = to_bfloat16(f);
    if (is_nan_bits(b.bits)) {
      EXPECT_TRUE(is_nan_bits(back.bits)) << std::hex << bits;
      EXPECT_EQ(back.bits & 0x8000u, b.bits & 0x8000u) << "NaN sign lost for " << std::hex << bits;
    } else {
      EXPECT_EQ(back.bits, b.bits) << std::hex << bits;
    }
  }
}

TEST_F(Bfloat16Conversion, ReferenceSelfCheck) {
  EXPECT_EQ(reference_bfloat16_bits(1.0f), 0x3f80u);
  EXPECT_EQ(reference_bfloat16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie, even below
  EXPECT_EQ(reference_bfloat16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie, even above
  EXPECT_EQ(reference_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_EQ(reference_bfloat16_bits(-std::numeric_limits<float>::infinity()), 0xff80u);
}

// For every bfloat16 pattern: the float just below, at and above the midpoint to the
// next pattern, and the pattern itself.
TEST_F(Bfloat16Conversion, RoundingToNearestEvenAtEveryMidpoint) {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    if (is_nan_bits(static_cast<std::uint16_t>(bits)) || (bits & 0x7fffu) == 0x7f80u) continue;
    for (std::uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float f = std::bit_cast<float>((bits << 16) | low);
      if (std::isnan(f)) continue;
      if (to_bfloat16(f).bits != reference_bfloat16_bits(f) && ++mismatches <= 10) {
        ADD_FAILURE() << "to_bfloat16(" << std::hexfloat << f << ") = 0x" << std::hex << to_bfloat16(f).bits
                      << ", expected 0x" << reference_bfloat16_bits(f);
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Bfloat16Conversion, RoundingToNearestEvenOnRandomFloats) {
  std::uniform_int_distribution<std::uint32_t> any_bits;
  int mismatches = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng()));
    if (std::isnan(f)) {
      EXPECT_TRUE(is_nan_bits(to_bfloat16(f).bits)) << std::hexfloat << f;
      continue;
    }
    if (to_bfloat16(f).bits != reference_bfloat16_bits(f) && ++mismatches <= 10) {
      ADD_FAILURE() << "to_bfloat16(" << std::hexfloat << f << ") = 0x" << std::hex << to_bfloat16(f).bits
                    << ", expected 0x" << reference_bfloat16_bits(f);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Bfloat16Conversion, NaNStaysNaNWhateverItsPayload) {
  // Payloads only in the low 16 bits would truncate to infinity without the quiet bit.
  for (std::uint32_t bits : {0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0xffffffffu}) {
    const bfloat16 b = to_bfloat16(std::bit_cast<float>(bits));
    EXPECT_TRUE(is_nan_bits(b.bits)) << std::hex << bits << " -> " << b.bits;
    EXPECT_EQ(b.bits & 0x8000u, (bits >> 16) & 0x8000u);
  }
}

}  // namespace
}  // namespace smax::test
