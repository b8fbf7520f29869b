// Every variant, dtype and op over every axis of small random tensors of rank 0 to
// 5, for every input layout paired with every output layout.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

// The largest extent per rank, so that a tensor stays at a few hundred elements.
std::int64_t max_extent(int rank) {
  constexpr std::int64_t kByRank[] = {1, 40, 12, 6, 4, 3};
  return kByRank[rank];
}

// softmax, log_softmax, logsumexp, and logsumexp with keepdims.
struct OpCase {
  Op op;
  bool keepdims;
};
constexpr OpCase kOpCases[] = {
    {Op::softmax, false}, {Op::log_softmax, false}, {Op::logsumexp, false}, {Op::logsumexp, true}};

class ViewSweep : public SeededTest, public ::testing::WithParamInterface<std::tuple<int, DType>> {};

TEST_P(ViewSweep, EveryAxisLayoutAndVariantMeetsTheBar) {
  const auto [rank, dtype] = GetParam();
  const int axes = std::max(rank, 1);
  for (int axis = -axes; axis < axes; ++axis) {
    const std::vector<std::int64_t> shape = random_shape(rng(), rank, max_extent(rank));
    for (Layout input_layout : kAllLayouts) {
      TestTensor x(dtype, shape, input_layout);
      fill_normal(x, rng(), random_distribution(rng()));
      for (OpCase c : kOpCases) {
        Options options;
        options.axis = axis;
        options.keepdims = c.keepdims;
        const Expected expected = reference_nd(c.op, x, options);
        for (Layout output_layout : kOutputLayouts) {
          for (Algorithm algorithm : kAccurateAlgorithms) {
            options.algorithm = algorithm;
            run_and_check(c.op, x, options, output_layout, expected);
          }
        }
      }
    }
  }
}

// Naive is not held to the bar, but on tame inputs it must still write exactly the
// output view, every element of it, with a finite value.
TEST_P(ViewSweep, NaiveWritesEveryOutputElementAndNothingElse) {
  const auto [rank, dtype] = GetParam();
  const int axes = std::max(rank, 1);
  for (int axis = -axes; axis < axes; ++axis) {
    const std::vector<std::int64_t> shape = random_shape(rng(), rank, max_extent(rank));
    for (Layout input_layout : kAllLayouts) {
      TestTensor x(dtype, shape, input_layout);
      fill_normal(x, rng(), Distribution{0.0, 1.0});
      for (OpCase c : kOpCases) {
        for (Layout output_layout : kOutputLayouts) {
          Options options;
          options.axis = axis;
          options.keepdims = c.keepdims;
          options.algorithm = Algorithm::naive;
          SCOPED_TRACE(describe(c.op, options) + " input " + x.describe() + " output " + to_string(output_layout));
          TestTensor y = make_output(c.op, x, options, output_layout);
          run_op(c.op, x.view(), y.mutable_view(), options);
          for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.at(i))) << "element " << i;
          EXPECT_TRUE(y.untouched_outside_view());
        }
      }
    }
  }
}

std::string sweep_name(const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
  return "rank" + std::to_string(std::get<0>(info.param)) + "_" + std::string(to_string(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(RanksAndDTypes, ViewSweep,
                         ::testing::Combine(::testing::Range(0, 6), ::testing::ValuesIn(kAllDTypes)), sweep_name);

}  // namespace
}  // namespace smax::test
