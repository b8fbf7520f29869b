// The kernels' exp and its coarse form on every Highway target: every 97th float of
// the softmax domain, the low-order argument term, and the flush to 0 below the normal
// range.
#include <random>
#include <string>

#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

class SimdExp : public SeededTest {};

TEST_F(SimdExp, Every97thFloatInTheSoftmaxDomainWithinItsBound) { expect_exp_within_bounds(97); }

TEST_F(SimdExp, TheLowOrderTermIsAddedToTheArgument) {
  // z_lo up to half an ulp of z: exp(z + z_lo) against the double exp of the sum.
  constexpr std::size_t n = 100003;  // not a multiple of any vector length
  std::vector<float> z(n), lo(n), y(n);
  std::uniform_real_distribution<float> value(-87.0f, 0.0f);
  std::uniform_real_distribution<float> fraction(-0.5f, 0.5f);
  for (std::size_t i = 0; i < n; ++i) {
    z[i] = value(rng());
    lo[i] = fraction(rng()) * (std::nextafter(z[i], 0.0f) - z[i]);
  }
  for (std::int64_t t : simd_targets()) {
    with_target(t, [&] { cpu::simd::f32_exp_flush(z.data(), lo.data(), y.data(), n); });
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, ulp_error(y[i], std::exp(static_cast<double>(z[i]) + static_cast<double>(lo[i]))));
    }
    EXPECT_LE(worst, 2.0) << hwy::TargetName(t);
  }
}

TEST_F(SimdExp, BelowTheNormalRangeFlushesToZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> z = {-87.34f, -88.0f, -100.0f, -1e30f, -inf, -inf, -87.3f, 0.0f, -1e-30f};
  const std::vector<float> lo = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, nan, 0.0f, 0.0f, 0.0f};
  for (std::int64_t t : simd_targets()) {
    for (bool coarse : {false, true}) {  // coarse: z_lo unread
      std::vector<float> y(z.size(), -1.0f);
      with_target(t, [&] { cpu::simd::f32_exp_flush(z.data(), lo.data(), y.data(), z.size(), coarse); });
      SCOPED_TRACE(std::string(hwy::TargetName(t)) + (coarse ? ", coarse" : ""));
      for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f) << z[i];
      EXPECT_GE(y[6], std::numeric_limits<float>::min());
      EXPECT_EQ(y[7], 1.0f);
      EXPECT_EQ(y[8], 1.0f);
    }
  }
}

}  // namespace
}  // namespace smax::test
