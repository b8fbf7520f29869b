// The kernels' 16-bit loads and stores (cpu/simd/convert-inl.h) on every Highway
// target: bit-exact with the scalar conversions of smax/dtype.hpp, for every f16 and
// bf16 value on the way in, and on the way out for every rounding boundary (each
// midpoint between neighbouring 16-bit values, one float either side of it), the
// overflow threshold, subnormals, infinities, NaN, and random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/simd/f32_rows.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"
#include "smax/dtype.hpp"

namespace smax::test {
namespace {

class SimdConvert : public SeededTest {};

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

template <class T>
std::uint16_t bits16(T v) {
  return v.bits;
}

template <class T>
T from_bits(std::uint16_t b) {
  return T{b};
}

template <class T>
T round_scalar(float v) {
  if constexpr (std::is_same_v<T, half>) {
    return to_half(v);
  } else {
    return to_bfloat16(v);
  }
}

// Every 16-bit pattern: load to float and store back.
template <class T>
void check_every_value() {
  std::vector<T> x(65536), y(65536);
  std::vector<float> wide(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) x[i] = from_bits<T>(static_cast<std::uint16_t>(i));
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] { cpu::simd::f32_convert(x.data(), wide.data(), y.data(), x.size()); });
    int failures = 0;
    for (std::uint32_t i = 0; i < 65536 && failures < 5; ++i) {
      const float expected = to_float(x[i]);
      const bool same_load = bits(wide[i]) == bits(expected) || (std::isnan(wide[i]) && std::isnan(expected));
      const T back = round_scalar<T>(expected);
      const bool same_store = bits16(y[i]) == bits16(back);
      if (!same_load || !same_store) {
        ++failures;
        ADD_FAILURE() << "bits 0x" << std::hex << i << ": load " << wide[i] << " (expected " << expected
                      << "), store 0x" << bits16(y[i]) << " (expected 0x" << bits16(back) << ")";
      }
    }
  }
}

// Floats around every rounding boundary, plus specials and random values (not NaN),
// stored through f32_vscale with scale 1 (an exact multiply, then the store's
// rounding: the softmax outputs' store, whose values are never NaN). Every NaN
// pattern is stored in check_every_value.
template <class T>
void check_rounding(Rng& rng) {
  std::vector<float> v;
  for (std::uint32_t i = 0; i < 65535; ++i) {
    const float a = to_float(from_bits<T>(static_cast<std::uint16_t>(i)));
    const float b = to_float(from_bits<T>(static_cast<std::uint16_t>(i + 1)));
    if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) continue;
    const float mid = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2);
    v.push_back(mid);
    v.push_back(std::nextafter(mid, -std::numeric_limits<float>::infinity()));
    v.push_back(std::nextafter(mid, std::numeric_limits<float>::infinity()));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {65504.0f, 65519.99f, 65520.0f, 1e5f, 3.4e38f, inf, std::numeric_limits<float>::denorm_min(),
                  1e-40f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 0.0f, std::numeric_limits<float>::min(),
                  std::bit_cast<float>(0x007FFFFFu), std::bit_cast<float>(0x007F8000u)}) {
    v.push_back(s);
    v.push_back(-s);
  }
  std::uniform_int_distribution<std::uint32_t> any;
  for (std::size_t i = 0; i < 100000;) {
    const float r = std::bit_cast<float>(any(rng));
    if (!std::isnan(r)) v.push_back(r), ++i;
  }
  std::vector<T> y(v.size());
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] { cpu::simd::f32_vscale(v.data(), y.data(), v.size(), 1.0f); });
    int failures = 0;
    for (std::size_t i = 0; i < v.size() && failures < 5; ++i) {
      const T expected = round_scalar<T>(v[i]);
      if (bits16(y[i]) != bits16(expected)) {
        ++failures;
        ADD_FAILURE() << "float 0x" << std::hex << bits(v[i]) << " (" << v[i] << ") stored as 0x" << bits16(y[i])
                      << ", expected 0x" << bits16(expected);
      }
    }
  }
}

TEST_F(SimdConvert, EveryHalfLoadsAndStoresLikeTheScalarCode) { check_every_value<half>(); }
TEST_F(SimdConvert, EveryBfloat16LoadsAndStoresLikeTheScalarCode) { check_every_value<bfloat16>(); }
TEST_F(SimdConvert, HalfStoresRoundToNearestEven) { check_rounding<half>(rng()); }
TEST_F(SimdConvert, Bfloat16StoresRoundToNearestEven) { check_rounding<bfloat16>(rng()); }

}  // namespace
}  // namespace smax::test
