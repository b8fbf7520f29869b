// softmax(x / T) for temperatures from 1e-3 to 1e3, against the long double
// softmax of x / T, and the temperatures that must be refused.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

class Temperature : public SeededTest, public ::testing::WithParamInterface<DType> {};

TEST_P(Temperature, EveryVariantMatchesTheReferenceOfXOverT) {
  const DType dtype = GetParam();
  for (double temperature : {1e-3, 0.1, 0.5, 1.0, 2.0, 10.0, 1e3}) {
    // Offsets stay small so that logsumexp, about max(x) / T, fits in f16 at T = 1e-3.
    std::uniform_real_distribution<double> offset(-5.0, 5.0);
    TestTensor x(dtype, {4, 50}, Layout::transposed);
    fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
    for (Op op : kAllOps) {
      Options options;
      options.temperature = temperature;
      const Expected expected = reference_nd(op, x, options);
      for (Algorithm algorithm : kAccurateAlgorithms) {
        options.algorithm = algorithm;
        run_and_check(op, x, options, Layout::strided, expected);
      }
    }
  }
}

// Temperatures up to the largest allowed (2^126, where 1/T is still a normal float)
// on inputs of the same size, so that (x - m) / T spans a few units: 1/T carries its
// full precision into the exps.
TEST_P(Temperature, LargeTemperaturesUpToTheLimitMeetTheBar) {
  const DType dtype = GetParam();
  const std::vector<double> temperatures =
      dtype == DType::f16 ? std::vector<double>{1e2, 1e4} : std::vector<double>{1e10, 1e30, 8.5e37};
  for (double temperature : temperatures) {
    std::uniform_real_distribution<double> spread(-1.5, 1.5);
    TestTensor x(dtype, {3, 77});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set_at(i, temperature * spread(rng()));
    for (Op op : kAllOps) {
      Options options;
      options.temperature = temperature;
      SCOPED_TRACE(describe(op, options));
      const Expected expected = reference_nd(op, x, options);
      for (Algorithm algorithm : kAccurateAlgorithms) {
        options.algorithm = algorithm;
        run_and_check(op, x, options, Layout::contiguous, expected);
      }
    }
  }
}

TEST_P(Temperature, TemperaturesOutsideTheirRangeAreRefused) {
  const DType dtype = GetParam();
  const TestTensor x(dtype, {2, 3});
  for (double temperature :
       {0.0, -0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), 1e-40, dtype == DType::f64 ? 1e308 : 1e38, 1e308}) {
    for (Op op : kAllOps) {
      Options options;
      options.temperature = temperature;
      SCOPED_TRACE(describe(op, options));
      TestTensor y = make_output(op, x, options, Layout::contiguous);
      try {
        run_op(op, x.view(), y.mutable_view(), options);
        ADD_FAILURE() << "no smax::Error thrown";
      } catch (const Error& error) {
        EXPECT_EQ(error.code(), Errc::option);
        EXPECT_NE(std::string(error.what()).find("temperature"), std::string::npos) << error.what();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, Temperature, ::testing::ValuesIn(kAllDTypes), dtype_test_name);

}  // namespace
}  // namespace smax::test
