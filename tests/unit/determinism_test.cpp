// Each row stays on one thread, so the thread count must not change a single bit.
#include <gtest/gtest.h>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

class ThreadCounts : public SeededTest, public ::testing::WithParamInterface<DType> {};

TEST_P(ThreadCounts, OneTwoAndThreeThreadsGiveIdenticalBits) {
  const DType dtype = GetParam();
  // 67 rows (not a multiple of 2 or 3) of 1500: about 100k elements, enough for the
  // planner to use three threads.
  const std::vector<std::int64_t> shape{67, 1500};
  TestTensor x(dtype, shape, Layout::strided);
  fill_normal(x, rng(), random_distribution(rng()));
  for (Op op : kAllOps) {
    for (Algorithm algorithm : kAllAlgorithms) {
      Options options;
      options.algorithm = algorithm;
      SCOPED_TRACE(describe(op, options));
      options.threads = 3;
      ASSERT_EQ(plan(op, shape, dtype, options).threads, 3) << "the shape is too small to use three threads";

      std::vector<TestTensor> outputs;
      for (int threads : {1, 2, 3}) {
        options.threads = threads;
        outputs.push_back(make_output(op, x, options, Layout::contiguous));
        run_op(op, x.view(), outputs.back().mutable_view(), options);
      }
      EXPECT_TRUE(bitwise_equal(outputs[0], outputs[1])) << "1 vs 2 threads";
      EXPECT_TRUE(bitwise_equal(outputs[0], outputs[2])) << "1 vs 3 threads";
      if (algorithm != Algorithm::naive) {
        EXPECT_TRUE(matches_reference(op, outputs[2], reference_nd(op, x, options)));
      }
    }
  }
}

// One long row under auto is split into chunks that the threads share; the chunks and
// the order their (max, sum) pairs merge in are fixed, so the bits are too.
TEST_P(ThreadCounts, ASplitRowGivesIdenticalBitsOnAnyThreadCount) {
  const DType dtype = GetParam();
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{1, 200003}, std::vector<std::int64_t>{3, 70001}}) {
    TestTensor x(dtype, shape);
    fill_normal(x, rng(), random_distribution(rng()));
    for (Op op : kAllOps) {
      Options options;
      options.threads = 8;
      SCOPED_TRACE(describe(op, options) + " shape " + x.describe());
      ASSERT_GT(plan(op, shape, dtype, options).chunk_length, 0) << "the row should be split";
      std::vector<TestTensor> outputs;
      for (int threads : {1, 2, 3, 8}) {
        options.threads = threads;
        outputs.push_back(make_output(op, x, options, Layout::contiguous));
        run_op(op, x.view(), outputs.back().mutable_view(), options);
      }
      for (std::size_t i = 1; i < outputs.size(); ++i) EXPECT_TRUE(bitwise_equal(outputs[0], outputs[i])) << "run " << i;
      EXPECT_TRUE(matches_reference(op, outputs[0], reference_nd(op, x, options)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, ThreadCounts, ::testing::ValuesIn(kAllDTypes), dtype_test_name);

}  // namespace
}  // namespace smax::test
