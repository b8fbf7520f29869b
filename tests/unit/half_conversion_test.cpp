// smax::half conversions: exhaustive over the 65536 bit patterns, and rounding of
// floats to nearest even checked against the compiler's half type where it has one
// (_Float16; __fp16 on 64-bit Arm, where GCC 12's C++ has no _Float16).
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

bool is_nan_bits(std::uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0; }

class HalfConversion : public SeededTest {};

TEST_F(HalfConversion, EveryPatternSurvivesARoundTrip) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const half h{static_cast<std::uint16_t>(bits)};
    const float f = to_float(h);
    const half back = to_half(f);
    if (is_nan_bits(h.bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(is_nan_bits(back.bits)) << std::hex << bits;
      EXPECT_EQ(back.bits & 0x8000u, h.bits & 0x8000u) << "NaN sign lost for " << std::hex << bits;
    } else {
      EXPECT_EQ(back.bits, h.bits) << std::hex << bits << " -> " << f;
    }
  }
}

TEST_F(HalfConversion, KnownValues) {
  EXPECT_EQ(to_float(half{0x3c00}), 1.0f);
  EXPECT_EQ(to_float(half{0xc000}), -2.0f);
  EXPECT_EQ(to_float(half{0x7bff}), 65504.0f);
  EXPECT_EQ(to_float(half{0x0001}), 0x1p-24f);
  EXPECT_EQ(to_float(half{0x0400}), 0x1p-14f);
  EXPECT_EQ(to_float(half{0x7c00}), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(to_float(half{0x8000})));
  // The overflow boundary: 65520 is halfway between 65504 and 65536 and rounds to
  // even, which is infinity; anything below it rounds to 65504.
  EXPECT_EQ(to_half(65519.996f).bits, 0x7bffu);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7c00u);
  EXPECT_EQ(to_half(-65520.0f).bits, 0xfc00u);
  EXPECT_EQ(to_half(1e30f).bits, 0x7c00u);
  // Subnormals: half of the smallest subnormal rounds to even (zero); a bit more
  // rounds up.
  EXPECT_EQ(to_half(0x1p-25f).bits, 0x0000u);
  EXPECT_EQ(to_half(std::nextafter(0x1p-25f, 1.0f)).bits, 0x0001u);
  EXPECT_EQ(to_half(0x1.8p-24f).bits, 0x0002u);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(to_half(-0.0f).bits, 0x8000u);
  EXPECT_TRUE(is_nan_bits(to_half(std::numeric_limits<float>::quiet_NaN()).bits));
  EXPECT_TRUE(is_nan_bits(to_half(-std::numeric_limits<float>::quiet_NaN()).bits));
}

#if defined(__aarch64__)
using CompilerHalf = __fp16;
#define SMAX_HAS_COMPILER_HALF 1
#elif defined(__FLT16_MAX__)
using CompilerHalf = _Float16;
#define SMAX_HAS_COMPILER_HALF 1
#endif

#ifdef SMAX_HAS_COMPILER_HALF

std::uint16_t compiler_half_bits(float f) { return std::bit_cast<std::uint16_t>(static_cast<CompilerHalf>(f)); }

// The floats where rounding is decided: for every finite half, the midpoint to the
// next one up and its two float neighbours; every float multiple of 2^-26 below the
// smallest normal half; the overflow boundary.
std::vector<float> deciding_floats() {
  std::vector<float> values;
  for (std::uint32_t bits = 0; bits < 0x7c00u; ++bits) {
    const float here = to_float(half{static_cast<std::uint16_t>(bits)});
    const float next = bits + 1 == 0x7c00u ? 65536.0f : to_float(half{static_cast<std::uint16_t>(bits + 1)});
    const float midpoint = here + (next - here) / 2;  // exact: halves have 11 bits
    for (float v : {here, midpoint, std::nextafter(midpoint, 0.0f), std::nextafter(midpoint, 1e9f)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  for (int k = 0; k <= (1 << 12); ++k) values.push_back(std::ldexp(static_cast<float>(k), -26));
  for (float v : {65504.0f, 65519.0f, 65520.0f, std::nextafter(65520.0f, 0.0f), 65536.0f, 1e38f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    values.push_back(v);
    values.push_back(-v);
  }
  return values;
}

TEST_F(HalfConversion, WideningMatchesTheCompiler) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const half h{static_cast<std::uint16_t>(bits)};
    if (is_nan_bits(h.bits)) continue;
    const float expected = static_cast<float>(std::bit_cast<CompilerHalf>(h.bits));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(to_float(h)), std::bit_cast<std::uint32_t>(expected)) << std::hex << bits;
  }
}

TEST_F(HalfConversion, RoundingMatchesTheCompilerAtEveryDecidingPoint) {
  int mismatches = 0;
  for (float f : deciding_floats()) {
    if (to_half(f).bits != compiler_half_bits(f) && ++mismatches <= 10) {
      ADD_FAILURE() << "to_half(" << std::hexfloat << f << ") = 0x" << std::hex << to_half(f).bits
                    << ", the compiler gives 0x" << compiler_half_bits(f);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(HalfConversion, RoundingMatchesTheCompilerOnRandomFloats) {
  std::uniform_int_distribution<std::uint32_t> any_bits;
  // Exponents near the half range, where the interesting rounding happens.
  std::uniform_real_distribution<float> near_range(-20.0f, 17.0f);
  int mismatches = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    float f = std::bit_cast<float>(any_bits(rng()));
    if (i % 2 == 1) f = std::copysign(std::exp2(near_range(rng())), f);
    if (std::isnan(f)) {
      EXPECT_TRUE(is_nan_bits(to_half(f).bits));
      continue;
    }
    if (to_half(f).bits != compiler_half_bits(f) && ++mismatches <= 10) {
      ADD_FAILURE() << "to_half(" << std::hexfloat << f << ") = 0x" << std::hex << to_half(f).bits
                    << ", the compiler gives 0x" << compiler_half_bits(f);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

#else

TEST_F(HalfConversion, RoundingMatchesTheCompiler) { GTEST_SKIP() << "this compiler has no half type"; }

#endif

}  // namespace
}  // namespace smax::test
