// The check shared by the fast and the exhaustive exp tests: every `step`-th float in
// [-87.3, -0] through the kernels' exp (cpu/simd/f32_rows.hpp) on every Highway target
// this machine supports, against double std::exp, in ulps of the float-rounded
// reference.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cpu/simd/f32_rows.hpp"

namespace smax::test {

// hwy::SupportedAndGeneratedTargets() of the library would list the test's own
// HWY_TARGETS; the library is compiled for the same default set.
inline std::vector<std::int64_t> simd_targets() { return hwy::SupportedAndGeneratedTargets(); }

// Runs f with only `target` enabled, then restores the normal dispatch.
template <class F>
void with_target(std::int64_t target, F&& f) {
  hwy::SetSupportedTargetsForTest(target);
  f();
  hwy::SetSupportedTargetsForTest(0);
}

inline double ulp_error(float got, double reference) {
  const float r = static_cast<float>(reference);
  const float ulp = std::nextafter(r, std::numeric_limits<float>::infinity()) - r;
  return std::abs(static_cast<double>(got) - reference) / static_cast<double>(ulp);
}

// Max ulp error per target name over every `step`-th float of [-87.3, -0].
inline std::map<std::string, double> exp_max_ulp(std::uint32_t step) {
  const std::uint32_t first = std::bit_cast<std::uint32_t>(-0.0f);
  const std::uint32_t last = std::bit_cast<std::uint32_t>(-87.3f);
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<float> z(kChunk), zero(kChunk, 0.0f), y(kChunk);
  std::vector<double> reference(kChunk);
  const std::vector<std::int64_t> targets = simd_targets();
  std::map<std::string, double> worst;
  for (std::int64_t t : targets) worst[hwy::TargetName(t)] = 0;
  std::uint64_t bits = first;
  while (bits <= last) {
    std::size_t n = 0;
    for (; n < kChunk && bits <= last; ++n, bits += step) {
      z[n] = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      reference[n] = std::exp(static_cast<double>(z[n]));
    }
    for (std::int64_t t : targets) {
      with_target(t, [&] { cpu::simd::f32_exp_flush(z.data(), zero.data(), y.data(), n); });
      double& w = worst[hwy::TargetName(t)];
      for (std::size_t i = 0; i < n; ++i) w = std::max(w, ulp_error(y[i], reference[i]));
    }
  }
  return worst;
}

inline void expect_exp_within_2_ulp(std::uint32_t step) {
  const auto worst = exp_max_ulp(step);
  EXPECT_FALSE(worst.empty());
  for (const auto& [target, ulps] : worst) {
    std::printf("exp on [-87.3, 0], every %u-th float, target %s: max error %.3f ulp\n", step, target.c_str(),
                ulps);
    EXPECT_LE(ulps, 2.0) << target;
  }
}

}  // namespace smax::test
