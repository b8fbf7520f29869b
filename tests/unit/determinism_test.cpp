// Each row stays on one thread, so the thread count must not change a single bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "plan/planner.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

class ThreadCounts : public SeededTest, public ::testing::WithParamInterface<DType> {};

// op on x on 1, 2, 3 and 8 threads: the same bits each time, and the reference met.
void expect_the_same_bits_on_1_2_3_and_8_threads(Op op, const TestTensor& x, Options options) {
  std::vector<TestTensor> outputs;
  for (int threads : {1, 2, 3, 8}) {
    options.threads = threads;
    outputs.push_back(make_output(op, x, options, Layout::contiguous));
    run_op(op, x.view(), outputs.back().mutable_view(), options);
  }
  for (std::size_t i = 1; i < outputs.size(); ++i) EXPECT_TRUE(bitwise_equal(outputs[0], outputs[i])) << "run " << i;
  EXPECT_TRUE(matches_reference(op, outputs[0], reference_nd(op, x, options)));
}

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

// Short rows go a block of 16 (or 8) rows at a time, a row to a lane, where the
// target allows (rows_across_lanes-inl.h); a thread's share starts a block wherever
// the share starts, which must change no bit. Row counts that are not multiples of 16,
// with a NaN row and a +inf row (which that form leaves to the general path); softmax
// and log_softmax.
TEST_P(ThreadCounts, ShortRowsGiveIdenticalBitsOnAnyThreadCount) {
  const DType dtype = GetParam();
  for (std::int64_t n : {7, 16, 24, 40}) {
    const std::vector<std::int64_t> shape{120000 / n + 3, n};
    TestTensor x(dtype, shape);
    fill_normal(x, rng(), random_distribution(rng()));
    x.set_at(5 * n + 1, std::numeric_limits<double>::quiet_NaN());
    x.set_at(shape[0] / 2 * n, std::numeric_limits<double>::infinity());
    for (Op op : {Op::softmax, Op::log_softmax}) {
      Options options;
      options.threads = 3;
      SCOPED_TRACE(describe(op, options) + " shape " + x.describe());
      ASSERT_EQ(plan(op, shape, dtype, options).threads, 3) << "the shape is too small to use three threads";
      expect_the_same_bits_on_1_2_3_and_8_threads(op, x, options);
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
      expect_the_same_bits_on_1_2_3_and_8_threads(op, x, options);
    }
  }
}

// f32 softmax rows longer than fused's buffer that fit in cache run fused over chunks:
// each chunk's exps are stored in the output and scaled once the row's (max, sum) is
// known. Chunks that are all -inf store nothing and must come out as 0; a huge
// offset and a temperature exercise the per-chunk rescaling.
class FusedOverChunks : public SeededTest {};

TEST_F(FusedOverChunks, GiveIdenticalBitsOnAnyThreadCountAndMeetTheBar) {
  const std::pair<DType, std::int64_t> cases[] = {
      {DType::f32, 40001}, {DType::f32, 100003}, {DType::bf16, 40001}, {DType::f16, 40001}};
  for (const auto& [dtype, n] : cases) {
    const std::vector<std::int64_t> shape{3, n};
    TestTensor x(dtype, shape);
    fill_normal(x, rng(), Distribution{1e4, 5.0});
    for (std::int64_t i = n + 20000; i < n + 40000; ++i) x.set_at(i, -INFINITY);  // row 1: a whole chunk
    x.set_at(2 * n + 5, 1e4 + 60.0);                                                // row 2: one dominant element
    for (double temperature : {1.0, 3.5}) {
      Options options;
      options.temperature = temperature;
      options.threads = 8;
      SCOPED_TRACE(std::string(to_string(dtype)) + " n=" + std::to_string(n) + " T=" + std::to_string(temperature));
      const PlanInfo p = plan(Op::softmax, shape, dtype, options);
      if (p.algorithm != Algorithm::fused || p.chunk_length == 0) GTEST_SKIP() << "not fused over chunks here: " << p.reason;
      std::vector<TestTensor> outputs;
      for (int threads : {1, 2, 3, 8}) {
        options.threads = threads;
        outputs.push_back(make_output(Op::softmax, x, options, Layout::contiguous));
        run_op(Op::softmax, x.view(), outputs.back().mutable_view(), options);
      }
      for (std::size_t i = 1; i < outputs.size(); ++i) EXPECT_TRUE(bitwise_equal(outputs[0], outputs[i])) << "run " << i;
      EXPECT_TRUE(matches_reference(Op::softmax, outputs[0], reference_nd(Op::softmax, x, options)));
    }
  }
}

// Each chunk's exp pass takes its exps against the max of the chunk's first 256
// elements and finds the chunk's max beside them (f32_rstore_exp_from_guess), on
// every target. Rows
// whose max lies later and higher: within the headroom (exps up to e^64 stored) and
// beyond it, with a temperature that moves the bound, and rows with a NaN or +inf
// after the first stretch, or a first stretch of -inf, which take the max pass, and
// a row whose scale factor would be subnormal without the headroom.
TEST_F(FusedOverChunks, MaxesFoundBesideTheExpsMeetTheBar) {
  // Fused over chunks (the 16-bit rows' exps in a float buffer, which lets a guess
  // stand in place too), and rows beyond the cache online over chunks (their sum
  // passes find the max the same way).
  // Over two kChunkLength: four equal chunks.
  constexpr std::int64_t kPastTwoChunks = 2 * detail::kChunkLength + 7233;
  const std::pair<DType, std::int64_t> cases[] = {{DType::f32, kPastTwoChunks}, {DType::bf16, kPastTwoChunks},
                                                  {DType::f16, kPastTwoChunks}, {DType::f32, 300007},
                                                  {DType::bf16, 300007},        {DType::f16, 300007}};
  int split = 0;
  for (const auto& [dtype, n] : cases) {
    SCOPED_TRACE(std::string(to_string(dtype)) + " n=" + std::to_string(n));
    // C: where the second chunk starts.
    const std::int64_t C = detail::chunk_length(n);
    // Rises of the max above the guess (0 in both chunks below): the headrooms' edges
    // (40 for bf16's sums, 64), the float range's, and far beyond.
    const double rises[] = {0.0, 10.0, 39.5, 40.5, 50.0, 63.5, 64.5, 80.0, 86.0, 100.0, 1000.0};
    const std::int64_t rows = std::size(rises) + 5;
    const std::vector<std::int64_t> shape{rows, n};
    TestTensor x(dtype, shape);
    fill_normal(x, rng(), Distribution{-6.0, 1.0});
    for (std::size_t r = 0; r < std::size(rises); ++r) {
      const std::int64_t row = static_cast<std::int64_t>(r) * n;
      x.set_at(row, 0.0);
      x.set_at(row + C, 0.0);
      // Beyond the first 256 elements of the first chunk, and in the second chunk.
      x.set_at(row + 300, rises[r]);
      x.set_at(row + C + 9000, rises[r] - 0.5);
    }
    const std::int64_t last = static_cast<std::int64_t>(std::size(rises));
    x.set_at(last * n + 17000, NAN);
    x.set_at((last + 1) * n + 500, INFINITY);
    for (std::int64_t i = 0; i < 256; ++i) x.set_at((last + 2) * n + i, -INFINITY);
    // 15000 elements 82.5 above the guess: every block of their exps fits in float, but
    // the chunk's scale factor 1 / sum of them (1e-40) would be subnormal, four bits
    // short, where the headroom sends the row to the max pass.
    for (std::int64_t i = 0; i < 256; ++i) x.set_at((last + 3) * n + i, 0.0);
    for (std::int64_t i = 1000; i < 16000; ++i) x.set_at((last + 3) * n + i, 82.5);
    // The row's max (0) in the first chunk; the second chunk's guess 100 below it and
    // its max 60 above its guess: the stored exps up to e^60 meet a scale factor
    // e^-100 / d, below float's normal range (0 came out before split_row scaled such
    // chunks in two steps).
    for (std::int64_t i = C; i < 2 * C && i < n; ++i) x.set_at((last + 4) * n + i, -106.0);
    x.set_at((last + 4) * n, 0.0);
    x.set_at((last + 4) * n + C, -100.0);
    x.set_at((last + 4) * n + C + 5000, -40.0);
    for (double temperature : {1.0, 0.5}) {
      Options options;
      options.temperature = temperature;
      SCOPED_TRACE("T=" + std::to_string(temperature));
      options.threads = 1;
      const PlanInfo p = plan(Op::softmax, shape, dtype, options);
      if (p.chunk_length == 0) continue;  // not split into chunks with this machine's caches
      ++split;
      const Expected reference = reference_nd(Op::softmax, x, options);
      // Every target (their exps build 2^n in different ways), then the best one on
      // more threads.
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        TestTensor y = make_output(Op::softmax, x, options, Layout::contiguous);
        with_target(target, [&] { run_op(Op::softmax, x.view(), y.mutable_view(), options); });
        EXPECT_TRUE(matches_reference(Op::softmax, y, reference));
        // In place, where a chunk whose guess fails has already overwritten its input
        // with exps before its max pass (the max pass read them back: NaN).
        TestTensor in_place = x;
        with_target(target, [&] { run_op(Op::softmax, in_place.view(), in_place.mutable_view(), options); });
        EXPECT_TRUE(matches_reference(Op::softmax, in_place, reference)) << "in place";
      }
      std::vector<TestTensor> outputs;
      for (int threads : {1, 2, 3}) {
        options.threads = threads;
        outputs.push_back(make_output(Op::softmax, x, options, Layout::contiguous));
        run_op(Op::softmax, x.view(), outputs.back().mutable_view(), options);
      }
      for (std::size_t i = 1; i < outputs.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(outputs[0], outputs[i])) << "run " << i;
      }
    }
  }
  EXPECT_GT(split, 0) << "no case was split into chunks";
}

// A non-last axis runs as column panels (execute.cpp), split over threads by
// (outer index, panel); a panel's bits do not depend on the thread that runs it.
// [7, 300, 60] along axis 1: one panel per outer index; [40, 30000] along axis 0: one
// outer index, its 30000 columns cut into panels (at least three for every dtype and op
// where L2 is 2 MiB).
TEST_P(ThreadCounts, NonLastAxesGiveIdenticalBitsOnAnyThreadCount) {
  const DType dtype = GetParam();
  for (const auto& [shape, axis] : {std::pair{std::vector<std::int64_t>{7, 300, 60}, 1},
                                    std::pair{std::vector<std::int64_t>{40, 30000}, 0}}) {
    TestTensor x(dtype, shape);
    fill_normal(x, rng(), random_distribution(rng()));
    for (Op op : kAllOps) {
      for (Algorithm algorithm : {Algorithm::automatic, Algorithm::online}) {
        Options options;
        options.axis = axis;
        options.algorithm = algorithm;
        options.threads = 3;
        SCOPED_TRACE(describe(op, options) + " shape " + x.describe());
        ASSERT_EQ(plan(op, shape, dtype, options).threads, 3) << "the shape is too small to use three threads";
        expect_the_same_bits_on_1_2_3_and_8_threads(op, x, options);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, ThreadCounts, ::testing::ValuesIn(kAllDTypes), dtype_test_name);

}  // namespace
}  // namespace smax::test
