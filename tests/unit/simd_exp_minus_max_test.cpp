// The row kernels' exp(x - m) for unit temperature (cpu/simd/exp_minus_max-inl.h) on
// every Highway target: x - m is never rounded, however far x lies from m, so the
// result stays within 2.5 ulp of exp(x - m) computed in long double for maxima of any
// size the kernels take it for; exactly 1 at the max; 0 below the normal range (or
// float's subnormals, for bf16 rows); NaN stays NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <random>
#include <vector>

#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

using Form = cpu::simd::ExpMinusMaxForm;
constexpr Form kForms[] = {Form::flush, Form::gradual, Form::times_2_64};

// The factor by which a form's results exceed exp(x - m).
float scale_of(Form form) { return form == Form::times_2_64 ? 0x1p64f : 1.0f; }

class SimdExpMinusMax : public SeededTest {
 public:
  // Maxima of every kind: 0, near +-ln2/2 (the split's delta at its widest), large
  // and at the domain's edge, plus random ones.
  std::vector<float> maxima() {
    std::vector<float> m = {0.0f,     0.3465f,  -0.3466f,    1.0f,   88.7f,   -1000.5f, 12345.678f,
                            16384.0f, -16384.0f, 1e-30f, -3.0e-5f, 5678.9f, 0.69314718f};
    std::uniform_real_distribution<float> wide(-16384.0f, 16384.0f);
    std::uniform_real_distribution<float> narrow(-4.0f, 4.0f);
    for (int i = 0; i < 12; ++i) m.push_back(wide(rng()));
    for (int i = 0; i < 12; ++i) m.push_back(narrow(rng()));
    return m;
  }

  static long double reference(float x, float m) {
    return std::exp(static_cast<long double>(x) - static_cast<long double>(m));
  }

  // Elements below m: uniform gaps to 87.3, the floats just below m, and values near 0
  // (whose ulp is far finer than m's: x - m would round there).
  std::vector<float> row_below(float m) {
    std::vector<float> x;
    std::uniform_real_distribution<float> gap(0.0f, 87.3f);
    for (int i = 0; i < 20011; ++i) x.push_back(m - gap(rng()));
    float below = m;
    for (int i = 0; i < 200; ++i) x.push_back(below = std::nextafter(below, -std::numeric_limits<float>::infinity()));
    std::uniform_real_distribution<float> small(-1e-3f, 1e-3f);
    for (int i = 0; i < 2000; ++i) {
      const float v = small(rng()) * std::pow(10.0f, -static_cast<float>(i % 30));
      if (v <= m) x.push_back(v);
    }
    return x;
  }
};

// The worst ulp error of f32_exp_minus_max over row_below(m) for every m, target and
// form, with or without (`table`) the table of 2^(j / 32); printed per target (the
// gradual form apart: it never takes the table).
double worst_error(SimdExpMinusMax& test, const std::vector<float>& maxima, bool table, double bound,
                   const char* what, bool marks_max = true) {
  std::map<std::string, double> worst_of_target;
  for (float m : maxima) {
    const std::vector<float> x = test.row_below(m);
    std::vector<float> y(x.size());
    for (std::int64_t t : simd_targets()) {
      for (Form form : kForms) {
        bool ran = false;
        with_target(t, [&] {
          ran = cpu::simd::f32_exp_minus_max(x.data(), y.data(), x.size(), m, form, table, marks_max);
        });
        if (!ran) continue;
        double worst = 0;
        std::size_t worst_at = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          const long double r = SimdExpMinusMax::reference(x[i], m);
          if (r < std::numeric_limits<float>::min() * 1.01L) continue;  // the flush, checked below
          const double e = ulp_error(y[i] / scale_of(form), static_cast<double>(r));
          if (e > worst) worst = e, worst_at = i;
        }
        EXPECT_LE(worst, bound) << hwy::TargetName(t) << " m=" << m << " x=" << x[worst_at]
                                << " form=" << static_cast<int>(form) << " table=" << table
                                << " marks_max=" << marks_max;
        double& w = worst_of_target[std::string(hwy::TargetName(t)) + (form == Form::gradual ? " gradual" : "")];
        w = std::max(w, worst);
      }
    }
  }
  double worst = 0;
  for (const auto& [target, ulps] : worst_of_target) {
    std::printf("exp(x - m), %s, %zu maxima, target %s: max error %.3f ulp\n", what, maxima.size(), target.c_str(),
                ulps);
    worst = std::max(worst, ulps);
  }
  return worst;
}

TEST_F(SimdExpMinusMax, Within2Point5UlpOfTheExactDifferenceForMaximaOfAnySize) {
  worst_error(*this, maxima(), true, 2.5, "as the rows run it");
  worst_error(*this, maxima(), false, 2.5, "without the table");
  worst_error(*this, maxima(), true, 2.5, "for passes not marking the max", /*marks_max=*/false);
}

// The table's form (AVX-512, |m| <= 600) for maxima whose k = round(32 m log2(e))
// takes every residue mod 32, up to the domain's edge: within its 1.05 ulp by count.
TEST_F(SimdExpMinusMax, TableFormWithinOneUlpAndAHalfForEveryResidue) {
  std::vector<float> m = {600.0f, -600.0f, 599.99f, -599.99f, 0.0108f, -0.0108f};
  for (int k = -64; k < 64; ++k) m.push_back(static_cast<float>(k) * 0.6931472f / 32);
  std::uniform_real_distribution<float> wide(-600.0f, 600.0f);
  for (int i = 0; i < 40; ++i) m.push_back(wide(rng()));
  EXPECT_GT(worst_error(*this, m, true, 1.5, "table's domain"), 0.0);
  // t taken from x directly (DirectTableExp): |r| up to ln2 / 32, the cubic's error
  // still below 0.2 ulp. Maxima whose m log2(e) lies halfway between multiples of
  // 1/32 (a tie, where the form would not be exact at the max) are among them.
  for (int j = -64; j < 64; ++j) m.push_back(static_cast<float>((j + 0.5) / 32 / 1.44269502162933349609375));
  EXPECT_GT(worst_error(*this, m, true, 1.5, "table's domain, t from x", /*marks_max=*/false), 0.0);
}

// The coarse form that softmax rows stored as f16 or bf16 take (DirectTableExp's
// kCoarse: one float ln2, a quadratic): within 4e-6 of exp(x - m) relative, far below
// half a unit in the last place of f16 (2.4e-4) and bf16 (2e-3), over the table's
// domain and every residue of k mod 32. Only AVX-512 targets have the form (the others
// run the exact ones); there its error must also show that it ran (above 2e-7, where
// the exact forms stay below 1.5 ulp, 9e-8).
TEST_F(SimdExpMinusMax, CoarseFormWithinFourMillionthsRelative) {
  std::vector<float> maxima = {600.0f, -600.0f, 0.0f, 0.0108f, -0.0108f, 88.7f};
  for (int k = -64; k < 64; ++k) maxima.push_back(static_cast<float>(k) * 0.6931472f / 32);
  std::uniform_real_distribution<float> wide(-600.0f, 600.0f);
  for (int i = 0; i < 40; ++i) maxima.push_back(wide(rng()));
  std::map<std::int64_t, double> worst_of_target;
  for (float m : maxima) {
    const std::vector<float> x = row_below(m);
    std::vector<float> y(x.size());
    for (std::int64_t t : simd_targets()) {
      for (Form form : {Form::flush, Form::times_2_64}) {
        bool ran = false;
        with_target(t, [&] {
          ran = cpu::simd::f32_exp_minus_max(x.data(), y.data(), x.size(), m, form, true, false, /*coarse=*/true);
        });
        if (!ran) continue;
        double& worst = worst_of_target[t];
        for (std::size_t i = 0; i < x.size(); ++i) {
          const long double r = SimdExpMinusMax::reference(x[i], m);
          if (r < std::numeric_limits<float>::min() * 1.01L) continue;
          const double e = static_cast<double>(std::abs(static_cast<long double>(y[i] / scale_of(form)) - r) / r);
          ASSERT_LE(e, 4e-6) << hwy::TargetName(t) << " m=" << m << " x=" << x[i] << " form=" << static_cast<int>(form);
          worst = std::max(worst, e);
        }
      }
    }
  }
  for (const auto& [t, worst] : worst_of_target) {
    std::printf("coarse exp(x - m), target %s: max relative error %.3g\n", hwy::TargetName(t), worst);
    if ((t & (HWY_AVX3 | HWY_AVX3_DL)) != 0) {
      EXPECT_GT(worst, 2e-7) << hwy::TargetName(t);
    }
  }
}

TEST_F(SimdExpMinusMax, TheMaxGivesExactlyOne) {
  std::vector<float> m_all = maxima();
  // m log2(e) as near halfway between multiples of 1/32 as floats come: where t from x
  // (DirectTableExp) has the least margin for n = 0 at the max.
  for (int j = -64; j < 64; ++j) m_all.push_back(static_cast<float>((j + 0.5) / 32 / 1.44269502162933349609375));
  for (float m : m_all) {
    const std::vector<float> x(37, m);
    std::vector<float> y(x.size());
    for (std::int64_t t : simd_targets()) {
      for (Form form : kForms) {
        bool ran = false;
        for (bool marks_max : {true, false}) {
          with_target(t, [&] {
            ran = cpu::simd::f32_exp_minus_max(x.data(), y.data(), x.size(), m, form, true, marks_max);
          });
          if (!ran) continue;
          for (float v : y) ASSERT_EQ(v, scale_of(form)) << hwy::TargetName(t) << " m=" << m << " " << marks_max;
        }
      }
    }
  }
}

TEST_F(SimdExpMinusMax, FlushesBelowTheNormalRangeAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float m : {0.0f, 1000.25f, -16384.0f}) {
    const std::vector<float> x = {m - 87.34f, m - 88.0f, m - 150.0f, -1e30f, -3e38f, -inf, nan, m - 87.3f};
    for (std::int64_t t : simd_targets()) {
      std::vector<float> y(x.size(), -1.0f);
      SCOPED_TRACE(hwy::TargetName(t));
      for (bool marks_max : {true, false}) {
        with_target(t, [&] {
          cpu::simd::f32_exp_minus_max(x.data(), y.data(), x.size(), m, Form::flush, true, marks_max);
        });
        for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f) << "m=" << m << " x=" << x[i] << " " << marks_max;
        EXPECT_TRUE(std::isnan(y[6]));
        EXPECT_GE(y[7], std::numeric_limits<float>::min()) << "m=" << m << " " << marks_max;
        // times 2^64: zero below exp(-104) only.
        std::vector<float> y64(x.size(), -1.0f);
        bool ran = false;
        with_target(t, [&] {
          ran = cpu::simd::f32_exp_minus_max(x.data(), y64.data(), x.size(), m, Form::times_2_64, true, marks_max);
        });
        if (!ran) continue;
        EXPECT_GT(y64[1], 0.0f) << "m=" << m;
        for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(y64[i], 0.0f) << "m=" << m << " x=" << x[i];
        EXPECT_TRUE(std::isnan(y64[6]));
      }
    }
  }
}

TEST_F(SimdExpMinusMax, GradualKeepsFloatSubnormals) {
  // exp(x - m) for x - m in [-103, -87.4]: subnormal floats, each within half a
  // subnormal step plus 2.5 ulp of its normal-range computation (one final rounding).
  for (float m : {0.0f, -2.5f, 4321.0f}) {
    std::vector<float> x;
    std::uniform_real_distribution<float> gap(87.4f, 103.0f);
    for (int i = 0; i < 5003; ++i) x.push_back(m - gap(rng()));
    x.push_back(-std::numeric_limits<float>::infinity());
    std::vector<float> y(x.size());
    for (std::int64_t t : simd_targets()) {
      with_target(t, [&] { cpu::simd::f32_exp_minus_max(x.data(), y.data(), x.size(), m, Form::gradual); });
      SCOPED_TRACE(hwy::TargetName(t));
      const long double step = std::numeric_limits<float>::denorm_min();
      for (std::size_t i = 0; i + 1 < x.size(); ++i) {
        const long double r = reference(x[i], m);
        ASSERT_LE(std::abs(static_cast<long double>(y[i]) - r), 0.5L * step + 2.5L * r * 0x1p-23L)
            << "m=" << m << " x=" << x[i];
      }
      EXPECT_EQ(y.back(), 0.0f);
    }
  }
}

}  // namespace
}  // namespace smax::test
