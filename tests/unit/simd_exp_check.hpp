// The check shared by the fast and the exhaustive exp tests: every `step`-th float in
// [-87.3, -0] through the kernels' exp and its coarse form (cpu/simd/f32_rows.hpp) on
// every Highway target this machine supports, against double std::exp: the exp in
// ulps of the float-rounded reference, the coarse form relative to the reference.
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

// The largest errors of one target.
struct ExpErrors {
  double ulps = 0;             // the kernels' exp, in ulps
  double coarse_relative = 0;  // its coarse form (ExpFlushCoarse), relative
};

// The largest errors per target name over every `step`-th float of [-87.3, -0].
inline std::map<std::string, ExpErrors> exp_errors(std::uint32_t step) {
  const std::uint32_t first = std::bit_cast<std::uint32_t>(-0.0f);
  const std::uint32_t last = std::bit_cast<std::uint32_t>(-87.3f);
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<float> z(kChunk), zero(kChunk, 0.0f), y(kChunk);
  std::vector<double> reference(kChunk);
  const std::vector<std::int64_t> targets = simd_targets();
  std::map<std::string, ExpErrors> worst;
  for (std::int64_t t : targets) worst[hwy::TargetName(t)] = {};
  std::uint64_t bits = first;
  while (bits <= last) {
    std::size_t n = 0;
    for (; n < kChunk && bits <= last; ++n, bits += step) {
      z[n] = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      reference[n] = std::exp(static_cast<double>(z[n]));
    }
    for (std::int64_t t : targets) {
      ExpErrors& w = worst[hwy::TargetName(t)];
      with_target(t, [&] { cpu::simd::f32_exp_flush(z.data(), zero.data(), y.data(), n); });
      for (std::size_t i = 0; i < n; ++i) w.ulps = std::max(w.ulps, ulp_error(y[i], reference[i]));
      with_target(t, [&] { cpu::simd::f32_exp_flush(z.data(), zero.data(), y.data(), n, /*coarse=*/true); });
      for (std::size_t i = 0; i < n; ++i) {
        const double relative = std::abs(static_cast<double>(y[i]) - reference[i]) / reference[i];
        w.coarse_relative = std::max(w.coarse_relative, relative);
      }
    }
  }
  return worst;
}

inline void expect_exp_within_bounds(std::uint32_t step) {
  const auto worst = exp_errors(step);
  EXPECT_FALSE(worst.empty());
  for (const auto& [target, e] : worst) {
    std::printf("exp on [-87.3, 0], every %u-th float, target %s: max error %.3f ulp, coarse form %.3g\n", step,
                target.c_str(), e.ulps, e.coarse_relative);
    EXPECT_LE(e.ulps, 2.0) << target;
    EXPECT_LE(e.coarse_relative, 6e-7) << target;
  }
}

}  // namespace smax::test
