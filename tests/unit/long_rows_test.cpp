// Rows of 2^20 elements and more (label "long"): sums of millions of terms, rows far
// beyond every cache, and one row of 2^25.
#include <gtest/gtest.h>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

bool has_pass_order(Algorithm algorithm) { return algorithm == Algorithm::tiled || algorithm == Algorithm::online; }

// Every op and long-row variant (both pass orders) on x, against one reference per op.
void check_long_row(const TestTensor& x, std::initializer_list<Op> ops,
                    std::initializer_list<Algorithm> algorithms) {
  for (Op op : ops) {
    Options options;
    const Expected expected = reference_nd(op, x, options);
    for (Algorithm algorithm : algorithms) {
      options.algorithm = algorithm;
      for (PassOrder order : {PassOrder::reverse, PassOrder::forward}) {
        if (order == PassOrder::forward && !has_pass_order(algorithm)) continue;
        options.pass_order = order;
        run_and_check(op, x, options, Layout::contiguous, expected);
      }
    }
  }
}

class LongRows : public SeededTest, public ::testing::WithParamInterface<DType> {};

TEST_P(LongRows, MillionsOfElements) {
  const DType dtype = GetParam();
  for (std::int64_t length : {(std::int64_t{1} << 20) + 1, (std::int64_t{1} << 21) - 1, std::int64_t{1} << 22}) {
    SCOPED_TRACE("length " + std::to_string(length));
    TestTensor x(dtype, {length});
    fill_normal(x, rng(), random_distribution(rng()));
    check_long_row(x, {Op::softmax, Op::log_softmax, Op::logsumexp},
                   {Algorithm::automatic, Algorithm::safe, Algorithm::tiled, Algorithm::online});
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, LongRows, ::testing::ValuesIn(kAllDTypes), dtype_test_name);

class HugeRow : public SeededTest {};

TEST_F(HugeRow, TwoToTheTwentyFiveF32Softmax) {
  TestTensor x(DType::f32, {std::int64_t{1} << 25});
  fill_normal(x, rng(), random_distribution(rng()));
  check_long_row(x, {Op::softmax}, {Algorithm::automatic, Algorithm::safe, Algorithm::tiled, Algorithm::online});
  check_long_row(x, {Op::log_softmax}, {Algorithm::online});
}

TEST_F(HugeRow, TwoToTheTwentyFiveF64Online) {
  TestTensor x(DType::f64, {std::int64_t{1} << 25});
  fill_normal(x, rng(), random_distribution(rng()));
  check_long_row(x, {Op::softmax}, {Algorithm::online});
}

// Ramps of 2^24 tiny steps: online rescales its sum each time the maximum moves far
// enough, and the rounding of those rescalings must not pile up.
TEST_F(HugeRow, RampsOfTwoToTheTwentyFourInF64) {
  for (bool ascending : {true, false}) {
    SCOPED_TRACE(ascending ? "ascending" : "descending");
    check_long_row(linspace_ramp(std::int64_t{1} << 24, ascending), {Op::softmax, Op::log_softmax, Op::logsumexp},
                   {Algorithm::safe, Algorithm::tiled, Algorithm::online});
  }
}

}  // namespace
}  // namespace smax::test
