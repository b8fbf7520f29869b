// The vectorised f64 path (cpu/simd/f64_rows.hpp) on every Highway target this
// machine supports: the exp's error in ulps against long double expl, the exactness
// of the compensated sum and of d - 1, and through the public API the accuracy bar
// and the non-finite semantics for every variant and pass order, at lengths around
// every vector width, misaligned, in place, with temperatures and huge offsets.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "core/stats.hpp"
#include "cpu/simd/f64_rows.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// DBL_MIN: the kernels' exp flushes results below it to 0.
constexpr double kSmallestNormal = std::numeric_limits<double>::min();

// Around 1, 2, 4 and 8 lanes, their unrolls by 2 and 4, and several tiled and online
// blocks; 16384 is the longest row fused takes.
constexpr std::int64_t kLengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 129, 1000, 4097, 16384, 20011};
constexpr Algorithm kAlgorithms[] = {Algorithm::safe, Algorithm::fused, Algorithm::tiled, Algorithm::online};
constexpr PassOrder kOrders[] = {PassOrder::reverse, PassOrder::forward};

// |got - reference| in units of the spacing of normal doubles in the reference's
// binade.
long double ulps(double got, long double reference) {
  const long double ulp = std::ldexp(1.0L, std::ilogb(reference) - 52);
  return std::abs(static_cast<long double>(got) - reference) / ulp;
}

class SimdF64 : public SeededTest {
 protected:
  // Every op, algorithm and pass order on x against the reference, on every target.
  void check_everywhere(const TestTensor& x, double temperature, Layout output_layout = Layout::contiguous) {
    for (std::int64_t target : simd_targets()) {
      SCOPED_TRACE(hwy::TargetName(target));
      with_target(target, [&] {
        for (Op op : kAllOps) {
          Options options;
          options.temperature = temperature;
          const Expected expected = reference_nd(op, x, options);
          for (Algorithm algorithm : kAlgorithms) {
            if (!supports_length(algorithm, x.shape().back())) continue;
            for (PassOrder order : kOrders) {
              options.algorithm = algorithm;
              options.pass_order = order;
              run_and_check(op, x, options, output_layout, expected);
            }
          }
        }
      });
    }
  }
};

// exp(z + z_lo) for random z in [-745, 0] and z_lo of a few bits below z's last bit
// (so that z + z_lo is exact in long double and expl sees the same argument), plus
// the ends of the range. Below DBL_MIN the result must be exactly 0.
TEST_F(SimdF64, ExpIsWithinOneUlpOnTheWholeRange) {
  constexpr std::size_t kCount = std::size_t{1} << 19;
  std::uniform_real_distribution<double> z_of(-745.0, 0.0);
  std::uniform_int_distribution<int> low_bits(-127, 127);
  std::vector<double> z(kCount), z_lo(kCount), y(kCount);
  std::vector<long double> reference(kCount);
  const double cutoff = std::log(kSmallestNormal);
  const double ends[] = {0.0, -0.0, -1e-300, -0x1p-30, -0.3465, -0.3466, -1.0, -708.0, cutoff, std::nextafter(cutoff, 0.0),
                         std::nextafter(cutoff, -kInf), -709.0, -744.0, -745.0};
  for (std::size_t i = 0; i < kCount; ++i) {
    z[i] = i < std::size(ends) ? ends[i] : z_of(rng());
    const double ulp_z = std::nextafter(std::abs(z[i]), kInf) - std::abs(z[i]);
    z_lo[i] = i < std::size(ends) || i % 2 == 0 ? 0.0 : std::ldexp(ulp_z * low_bits(rng()), -8);
    reference[i] = std::exp(static_cast<long double>(z[i]) + static_cast<long double>(z_lo[i]));
  }
  for (std::int64_t target : simd_targets()) {
    with_target(target, [&] { cpu::simd::f64_exp_flush(z.data(), z_lo.data(), y.data(), kCount); });
    long double worst = 0;
    std::size_t worst_at = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      if (reference[i] < kSmallestNormal) {
        ASSERT_EQ(y[i], 0.0) << hwy::TargetName(target) << " exp(" << z[i] << ") should flush to 0";
        continue;
      }
      const long double e = ulps(y[i], reference[i]);
      if (e > worst) {
        worst = e;
        worst_at = i;
      }
    }
    std::printf("f64 exp on [-745, 0], %zu arguments, target %s: max error %.3Lf ulp (at z = %.17g)\n", kCount,
                hwy::TargetName(target), worst, z[worst_at]);
    EXPECT_LE(worst, 1.0L) << hwy::TargetName(target) << " at z = " << z[worst_at] << " + " << z_lo[worst_at];
    EXPECT_EQ(y[0], 1.0) << hwy::TargetName(target);
    EXPECT_GE(y[9], kSmallestNormal) << hwy::TargetName(target) << ": just above the cutoff must stay normal";
  }
}

// The sum pass over 2^21 terms: a plain double sum per lane would be off by hundreds
// of ulps at this length; the compensated one must stay within a few.
TEST_F(SimdF64, SumOfMillionsOfTermsIsExactToAFewUlp) {
  constexpr std::size_t kCount = std::size_t{1} << 21;
  std::uniform_real_distribution<double> value(-3.0, 0.0);
  std::vector<double> x(kCount);
  for (double& v : x) v = value(rng());
  x[kCount / 3] = 0.0;  // the max
  for (double inv_t : {1.0, 1.0 / 0.7}) {
    long double sum = 0;
    for (double v : x) sum += std::exp(static_cast<long double>(v) * inv_t);
    for (std::int64_t target : simd_targets()) {
      for (bool backward : {false, true}) {
        smax::detail::ExactSum d;
        with_target(target, [&] { cpu::simd::f64_add_sum_exp_minus_max(x.data(), kCount, 0.0, inv_t, backward, d); });
        EXPECT_LE(ulps(d.value(), sum), 4.0L) << hwy::TargetName(target) << " inv_t=" << inv_t << " backward=" << backward;
      }
    }
  }
}

// One element dominates: d - 1 is the sum of the others, ~1e-15 here, which rounding
// 1 + others would lose entirely. minus_one() must keep it to a few ulp of itself.
TEST_F(SimdF64, DMinusOneIsExactWhenOneElementDominates) {
  std::uniform_real_distribution<double> below(-48.0, -36.0);
  for (std::size_t n : {2u, 9u, 33u, 1000u, 4099u}) {
    std::vector<double> x(n);
    for (double& v : x) v = 5.0 + below(rng());
    const std::size_t at_max = n / 2;
    x[at_max] = 5.0;
    long double others = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i != at_max) others += std::exp(static_cast<long double>(x[i]) - 5.0L);
    }
    for (std::int64_t target : simd_targets()) {
      smax::detail::ExactSum d;
      with_target(target, [&] { cpu::simd::f64_add_sum_exp_minus_max(x.data(), n, 5.0, 1.0, false, d); });
      EXPECT_LE(ulps(d.minus_one(), others), 4.0L) << hwy::TargetName(target) << " n=" << n;
    }
  }
}

// The same through the public API: log_softmax at the max is -log1p(others) and
// logsumexp of a row whose max is 0 is log1p(others), both tiny, and must be right
// relative to themselves (the general log_softmax bar is absolute and would not see
// d - 1 rounded away).
TEST_F(SimdF64, LogSoftmaxAtADominatingMaxIsMinusTheSumOfTheOthers) {
  std::uniform_real_distribution<double> below(-45.0, -37.0);
  for (std::int64_t n : {2, 17, 1000, 4099}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    for (double top : {0.0, 7.25}) {
      TestTensor x(DType::f64, {n});
      for (std::int64_t i = 0; i < n; ++i) x.set_at(i, top + below(rng()));
      const std::int64_t at_max = n / 3;
      x.set_at(at_max, top);
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        with_target(target, [&] {
          for (Algorithm algorithm : kAlgorithms) {
            Options options;
            options.algorithm = algorithm;
            const Expected log_softmax = reference_nd(Op::log_softmax, x, options);
            TestTensor y = run_and_check(Op::log_softmax, x, options, Layout::contiguous, log_softmax);
            const long double want = log_softmax.values[static_cast<std::size_t>(at_max)];
            EXPECT_LE(std::abs(y.at(at_max) - want), 1e-13L * std::abs(want)) << to_string(algorithm);
            if (top == 0.0) {
              const Expected lse = reference_nd(Op::logsumexp, x, options);
              TestTensor s = run_and_check(Op::logsumexp, x, options, Layout::contiguous, lse);
              EXPECT_LE(std::abs(s.at(0) - lse.values[0]), 1e-13L * std::abs(lse.values[0])) << to_string(algorithm);
            }
          }
        });
      }
    }
  }
}

TEST_F(SimdF64, RandomRowsAtEveryLengthMeetTheBar) {
  std::uniform_real_distribution<double> offset(-50.0, 50.0);
  for (std::int64_t n : kLengths) {
    SCOPED_TRACE("n=" + std::to_string(n));
    for (double temperature : {1.0, 0.01, 100.0, 0.7}) {
      TestTensor x(DType::f64, {2, n});
      fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
      check_everywhere(x, temperature);
    }
  }
}

// The bar holds outputs below 1e-30 to 1e-36 absolute only, but the kernels claim
// more (f64_rows.hpp): every normal softmax output is within 1e-13 relative, however
// deep its argument. The error of z = (x - m) / T goes straight into exp(z): here
// (T = 0.1, so 1/T = 10 with an error of 5.6e-17 relative that no kernel can undo,
// and z in [-708, -600]) rounding x - m and the product by 10 would add up to 7e-14
// and 6e-14 to the 4e-14 of 1/T. The rounding errors must be carried.
TEST_F(SimdF64, DeepArgumentsKeepTheirDigits) {
  constexpr double kMax = 30.3;
  std::uniform_real_distribution<double> deep(-40.5, -30.0);
  for (std::int64_t n : {65, 4097}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    TestTensor x(DType::f64, {2, n});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set_at(i, deep(rng()));
    x.set_at(n / 2, kMax);
    x.set_at(n + n - 1, kMax);
    check_everywhere(x, 0.1);
    Options options;
    options.temperature = 0.1;
    const Expected expected = reference_nd(Op::softmax, x, options);
    for (std::int64_t target : simd_targets()) {
      with_target(target, [&] {
        for (Algorithm algorithm : kAlgorithms) {
          options.algorithm = algorithm;
          TestTensor y = make_output(Op::softmax, x, options, Layout::contiguous);
          run_op(Op::softmax, x.view(), y.mutable_view(), options);
          long double worst = 0;
          for (std::int64_t i = 0; i < y.numel(); ++i) {
            const long double reference = expected.values[static_cast<std::size_t>(i)];
            if (reference >= kSmallestNormal) worst = std::max(worst, std::abs(y.at(i) - reference) / reference);
          }
          EXPECT_LE(worst, 1e-13L) << hwy::TargetName(target) << " " << to_string(algorithm);
        }
      });
    }
  }
  // And arguments spread over the whole range and beyond (to -2000) at T = 0.01.
  TestTensor x(DType::f64, {3, 1000});
  fill_normal(x, rng(), Distribution{-1.0, 3.0});
  check_everywhere(x, 0.01);
}

TEST_F(SimdF64, HugeOffsetsAndTemperatures) {
  struct Case {
    double offset, scale, temperature;
  };
  for (const Case& c : {Case{1e15, 5.0, 1.0}, Case{-3e9, 30.0, 0.5}, Case{1e300, 1e284, 1e284},
                        Case{0.0, 1e-36, 1e-36}, Case{0.0, 1e5, 1e4}}) {
    SCOPED_TRACE("offset=" + std::to_string(c.offset));
    for (std::int64_t n : {7, 129, 3001}) {
      TestTensor x(DType::f64, {2, n});
      fill_normal(x, rng(), Distribution{c.offset, c.scale});
      check_everywhere(x, c.temperature);
    }
  }
}

TEST_F(SimdF64, NonFiniteRowsKeepTheirSemantics) {
  for (std::int64_t n : {1, 4, 7, 16, 17, 33, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // Rows: a NaN, a +inf, some -inf, all -inf, a NaN in the tail, +inf and -inf.
    TestTensor x(DType::f64, {6, n});
    fill_normal(x, rng(), Distribution{3.0, 2.0});
    x.set_at(0 * n + n / 2, kNaN);
    x.set_at(1 * n + n / 3, kInf);
    for (std::int64_t i = 0; i < n; i += 2) x.set_at(2 * n + i, -kInf);
    for (std::int64_t i = 0; i < n; ++i) x.set_at(3 * n + i, -kInf);
    x.set_at(4 * n + n - 1, kNaN);
    x.set_at(5 * n, -kInf);
    x.set_at(5 * n + n - 1, kInf);
    check_everywhere(x, 1.0);
    check_everywhere(x, 0.01);
  }
}

TEST_F(SimdF64, MisalignedAndStridedRowsWork) {
  for (std::int64_t n : {3, 17, 129, 4097}) {
    TestTensor x(DType::f64, {3, n}, Layout::misaligned);
    fill_normal(x, rng(), Distribution{-7.0, 4.0});
    check_everywhere(x, 1.0, Layout::misaligned);
    check_everywhere(x, 0.3, Layout::strided);
  }
}

TEST_F(SimdF64, InPlaceWorks) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (Op op : {Op::softmax, Op::log_softmax}) {
        for (Algorithm algorithm : kAlgorithms) {
          Options options;
          options.algorithm = algorithm;
          options.temperature = 0.6;
          TestTensor x(DType::f64, {2, 1001});
          fill_normal(x, rng(), Distribution{1.0, 3.0});
          const Expected expected = reference_nd(op, x, options);
          run_op(op, x.view(), x.mutable_view(), options);
          EXPECT_TRUE(matches_reference(op, x, expected)) << to_string(algorithm);
        }
      }
    });
  }
}

TEST_F(SimdF64, TargetsAgreeWithinTheBar) {
  const std::vector<std::int64_t> targets = simd_targets();
  TestTensor x(DType::f64, {4, 4099});
  fill_normal(x, rng(), Distribution{10.0, 5.0});
  for (Op op : kAllOps) {
    for (double temperature : {1.0, 0.05}) {
      Options options;
      options.temperature = temperature;
      options.algorithm = Algorithm::safe;
      std::vector<TestTensor> outputs;
      for (std::int64_t target : targets) {
        outputs.push_back(make_output(op, x, options, Layout::contiguous));
        with_target(target, [&] { run_op(op, x.view(), outputs.back().mutable_view(), options); });
      }
      for (std::size_t t = 1; t < outputs.size(); ++t) {
        for (std::int64_t i = 0; i < outputs[0].numel(); ++i) {
          const long double a = outputs[0].at(i);
          const long double b = outputs[t].at(i);
          ASSERT_LE(std::abs(a - b), 2 * tolerance(op, DType::f64, a))
              << hwy::TargetName(targets[0]) << " vs " << hwy::TargetName(targets[t]) << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace smax::test
