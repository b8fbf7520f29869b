// Values known independently of the reference (mpmath, via SciPy's tests), and
// long ramps that would expose rounding piling up across online's rescalings.
#include <gtest/gtest.h>

#include <cmath>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

class Anchors : public SeededTest {};

TEST_F(Anchors, SoftmaxOfArangeFourMatchesMpmath) {
  const long double expected[] = {0.03205860328008499L, 0.08714431874203256L, 0.23688281808991013L,
                                  0.6439142598879722L};
  const TestTensor x = make_tensor(DType::f64, {4}, {0, 1, 2, 3});
  for (Algorithm algorithm : kAccurateAlgorithms) {
    Options options;
    options.algorithm = algorithm;
    SCOPED_TRACE(describe(Op::softmax, options));
    TestTensor y(DType::f64, {4});
    softmax(x.view(), y.mutable_view(), options);
    for (std::int64_t i = 0; i < 4; ++i) {
      EXPECT_LE(std::fabs(y.at(i) - expected[i]), 1e-13L * expected[i]) << "element " << i;
    }
    log_softmax(x.view(), y.mutable_view(), options);
    EXPECT_LE(std::fabs(y.at(0) - -3.4401896985611953L), 1e-13L * 3.4401896985611953L);
  }
}

TEST_F(Anchors, ADominantElementGivesExactlyOneAndZeros) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const TestTensor x = make_tensor(dtype, {4}, {1000, 0, 0, 0});
    for (Algorithm algorithm : kAccurateAlgorithms) {
      Options options;
      options.algorithm = algorithm;
      SCOPED_TRACE(std::string(to_string(dtype)) + " " + describe(Op::softmax, options));
      TestTensor y(dtype, {4});
      softmax(x.view(), y.mutable_view(), options);
      EXPECT_EQ(y.at(0), 1.0L);
      for (std::int64_t i = 1; i < 4; ++i) EXPECT_EQ(y.at(i), 0.0L) << "element " << i;
    }
  }
}

TEST_F(Anchors, RampsOfTwoToTheTwentyInF64) {
  constexpr std::int64_t kLength = std::int64_t{1} << 20;
  for (bool ascending : {true, false}) {
    SCOPED_TRACE(ascending ? "ascending" : "descending");
    const TestTensor x = linspace_ramp(kLength, ascending);
    for (Op op : kAllOps) {
      Options options;
      const Expected expected = reference_nd(op, x, options);
      for (Algorithm algorithm : kAccurateAlgorithms) {
        if (!supports_length(algorithm, kLength)) continue;
        options.algorithm = algorithm;
        for (PassOrder order : {PassOrder::reverse, PassOrder::forward}) {
          options.pass_order = order;
          run_and_check(op, x, options, Layout::contiguous, expected);
        }
      }
    }
  }
}

}  // namespace
}  // namespace smax::test
