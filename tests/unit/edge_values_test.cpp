// Values that break textbook softmax: overflow, huge offsets, infinities, NaN and
// fully masked rows. The special row sits between two ordinary rows, which must not
// be affected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();
constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();

class EdgeValues : public SeededTest {
 protected:
  // A {3, n} tensor: ordinary values, then `row`, then ordinary values.
  TestTensor sandwich(DType dtype, const std::vector<long double>& row) {
    const auto n = static_cast<std::int64_t>(row.size());
    TestTensor x(dtype, {3, n});
    fill_normal(x, rng(), Distribution{0.0, 2.0});
    for (std::int64_t i = 0; i < n; ++i) x.set_at(n + i, row[static_cast<std::size_t>(i)]);
    return x;
  }

  // Every accurate variant on x (a sandwich or one row, reduced over its last axis),
  // against the reference, which matches non-finite results exactly in kind.
  // Returns, per variant, the outputs of the middle row (of the only row for 1-D x)
  // for exact checks.
  std::vector<std::vector<long double>> check_all_variants(Op op, const TestTensor& x, Options options = {}) {
    std::vector<std::vector<long double>> middle_rows;
    const Expected expected = reference_nd(op, x, options);
    const std::int64_t length = x.shape().back();
    const std::int64_t middle_row = x.rank() == 2 ? 1 : 0;
    for (Algorithm algorithm : kAccurateAlgorithms) {
      if (!supports_length(algorithm, length)) continue;
      options.algorithm = algorithm;
      const TestTensor y = run_and_check(op, x, options, Layout::contiguous, expected);
      const std::int64_t width = op == Op::logsumexp ? 1 : length;
      std::vector<long double> row;
      for (std::int64_t i = 0; i < width; ++i) row.push_back(y.at(middle_row * width + i));
      middle_rows.push_back(row);
    }
    return middle_rows;
  }
};

// The tutorial's row: exp(100000) overflows every type, so naive gives NaN, and
// every other variant gives exactly [0, 0, 1].
TEST_F(EdgeValues, TutorialRowOverflowsNaiveOnly) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const TestTensor x = make_tensor(dtype, {3}, {1, 100, 100000});
    for (Algorithm algorithm : kAllAlgorithms) {
      Options options;
      options.algorithm = algorithm;
      SCOPED_TRACE(describe(Op::softmax, options));
      TestTensor y(dtype, {3});
      softmax(x.view(), y.mutable_view(), options);
      TestTensor lse(dtype, {});
      logsumexp(x.view(), lse.mutable_view(), options);
      if (algorithm == Algorithm::naive) {
        EXPECT_TRUE(std::isnan(y.at(2))) << "naive should overflow to inf / inf";
        continue;
      }
      EXPECT_EQ(y.at(0), 0.0L);
      EXPECT_EQ(y.at(1), 0.0L);
      EXPECT_EQ(y.at(2), 1.0L);
      EXPECT_EQ(lse.at(0), 100000.0L);
    }
  }
}

// x + c for large c: the kernels must compute from the stored (rounded) values as
// the reference does, without overflow or loss beyond the bar.
TEST_F(EdgeValues, HugeEqualOffsetsMatchTheReferenceOfTheStoredValues) {
  for (DType dtype : kAllDTypes) {
    for (double offset : {1e4, 1e8, 1e15, 1e30}) {
      if (offset >= (dtype == DType::f16 ? 65504.0 : static_cast<double>(FLT_MAX))) continue;
      SCOPED_TRACE(std::string(to_string(dtype)) + " offset " + std::to_string(offset));
      TestTensor x(dtype, {4, 33});
      fill_normal(x, rng(), Distribution{offset, offset * 1e-6 + 3.0});
      for (Op op : kAllOps) check_all_variants(op, x);
    }
  }
}

// Values near where exp overflows f32 (88.7) and f16 (11.1).
TEST_F(EdgeValues, RowsNearTheExpOverflowOfTheStorageType) {
  for (DType dtype : kAllDTypes) {
    const double offset = dtype == DType::f16 ? 15.0 : 94.0;
    SCOPED_TRACE(std::string(to_string(dtype)));
    TestTensor x(dtype, {5, 64});
    fill_normal(x, rng(), Distribution{offset, 3.0});
    for (Op op : kAllOps) check_all_variants(op, x);
  }
}

TEST_F(EdgeValues, LogSoftmaxOfTheLargestFiniteValue) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const long double big = dtype == DType::f32 ? FLT_MAX : DBL_MAX;
    SCOPED_TRACE(std::string(to_string(dtype)));
    const TestTensor x = sandwich(dtype, {big, 1, 2, 3});
    for (const auto& row : check_all_variants(Op::log_softmax, x)) {
      EXPECT_EQ(row, (std::vector<long double>{0, -big, -big, -big}));
    }
    for (const auto& row : check_all_variants(Op::softmax, x)) EXPECT_EQ(row, (std::vector<long double>{1, 0, 0, 0}));
    for (const auto& row : check_all_variants(Op::logsumexp, x)) EXPECT_EQ(row[0], big);
  }
}

TEST_F(EdgeValues, PositiveInfinityMakesTheRowNaNAndLogSumExpInfinite) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    for (const std::vector<long double>& row :
         {std::vector<long double>{1, kInf, 2}, {kInf, kInf, kInf}, {-kInf, 3, kInf}}) {
      const TestTensor x = sandwich(dtype, row);
      for (Op op : {Op::softmax, Op::log_softmax}) {
        for (const auto& out : check_all_variants(op, x)) {
          for (long double v : out) EXPECT_TRUE(std::isnan(v)) << to_string(op);
        }
      }
      for (const auto& out : check_all_variants(Op::logsumexp, x)) EXPECT_EQ(out[0], kInf);
    }
  }
}

TEST_F(EdgeValues, NegativeInfinityGivesExactZeroAndMinusInfinity) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const TestTensor x = sandwich(dtype, {-kInf, 0.5, -kInf, 2, -kInf});
    for (const auto& out : check_all_variants(Op::softmax, x)) {
      for (std::size_t i : {0u, 2u, 4u}) {
        EXPECT_EQ(out[i], 0.0L) << "at " << i;
        EXPECT_FALSE(std::signbit(out[i])) << "at " << i;
      }
    }
    for (const auto& out : check_all_variants(Op::log_softmax, x)) {
      for (std::size_t i : {0u, 2u, 4u}) EXPECT_EQ(out[i], -kInf) << "at " << i;
    }
    check_all_variants(Op::logsumexp, x);
  }
}

TEST_F(EdgeValues, NaNAnywhereMakesTheWholeRowNaN) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    for (const std::vector<long double>& row :
         {std::vector<long double>{kNaN, 1, 2, 3}, {1, 2, kNaN, 3}, {1, 2, 3, kNaN}, {kNaN, kInf, 1, 2},
          {kInf, 1, kNaN, 2}, {-kInf, kNaN, -kInf, -kInf}, {kNaN, kNaN, kNaN, kNaN}}) {
      const TestTensor x = sandwich(dtype, row);
      for (Op op : kAllOps) {
        for (AllMasked policy : {AllMasked::nan, AllMasked::zero}) {
          Options options;
          options.all_masked = policy;
          for (const auto& out : check_all_variants(op, x, options)) {
            for (long double v : out) EXPECT_TRUE(std::isnan(v)) << to_string(op) << " " << to_string(policy);
          }
        }
      }
    }
  }
}

TEST_F(EdgeValues, AllMaskedRowsFollowThePolicy) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const TestTensor x = sandwich(dtype, {-kInf, -kInf, -kInf});
    Options options;
    options.all_masked = AllMasked::nan;
    for (Op op : {Op::softmax, Op::log_softmax}) {
      for (const auto& out : check_all_variants(op, x, options)) {
        for (long double v : out) EXPECT_TRUE(std::isnan(v));
      }
    }
    for (const auto& out : check_all_variants(Op::logsumexp, x, options)) EXPECT_EQ(out[0], -kInf);

    options.all_masked = AllMasked::zero;
    for (const auto& out : check_all_variants(Op::softmax, x, options)) {
      for (long double v : out) EXPECT_EQ(v, 0.0L);
    }
    for (const auto& out : check_all_variants(Op::log_softmax, x, options)) {
      for (long double v : out) EXPECT_EQ(v, -kInf);
    }
    for (const auto& out : check_all_variants(Op::logsumexp, x, options)) EXPECT_EQ(out[0], -kInf);
  }
}

// logsumexp of n equal values a = -log(n) rounded to the storage type: the result
// m + log(n) nearly cancels, so it is small and its unit in the last place tiny.
// Adding m and log(n) in float loses it (f16 n = 29: 0.00010824 for 0.00010833;
// bf16 n = 163: 0 for 2.0e-7); the sum needs a wider type before the one rounding.
TEST_F(EdgeValues, LogSumExpThatNearlyCancelsIn16Bit) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::int64_t n : {3, 29, 45, 50, 163, 938, 2981, 4617, 16384, 40000}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n));
      const long double a = round_to(dtype, -std::log(static_cast<long double>(n)));
      const TestTensor x = make_tensor(dtype, {n}, std::vector<long double>(static_cast<std::size_t>(n), a));
      check_all_variants(Op::logsumexp, x);
    }
  }
}

// Distinct values whose logsumexp nearly cancels: rows [c, a, b] with c rounded from
// log(1 - e^a - e^b), so that the sum of exps is about 1; of some 90000 (a, b) on a
// grid, the 12 rows nearest zero (|result| about 1e-8 to 1e-6). The float exps leave
// log(d) within about 2^-22, more than a 16-bit unit of such a result (bf16 [-0.6523,
// -0.7734, -4.031] gave -2.75e-9 for -1.605e-8): the rows and the column panels (axis
// 0 of the [3, 12] tensor of the same rows) take it again in long double.
TEST_F(EdgeValues, LogSumExpOfDistinctValuesThatNearlyCancelsIn16Bit) {
  constexpr int kGrid = 300;
  constexpr std::size_t kRows = 12;
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(to_string(dtype));
    std::vector<std::pair<long double, std::vector<long double>>> rows;  // (|result|, row)
    for (int i = 0; i < kGrid; ++i) {
      for (int j = 0; j < kGrid; ++j) {
        const long double a = round_to(dtype, -2.0L + 1.75L * i / kGrid);
        const long double b = round_to(dtype, -8.0L + 6.0L * j / kGrid);
        const long double c = round_to(dtype, std::log1p(-std::exp(a) - std::exp(b)));
        const long double result = std::log(std::exp(a) + std::exp(b) + std::exp(c));
        rows.push_back({std::fabs(result), {c, a, b}});
      }
    }
    std::partial_sort(rows.begin(), rows.begin() + kRows, rows.end(),
                      [](const auto& p, const auto& q) { return p.first < q.first; });
    TestTensor columns(dtype, {3, static_cast<std::int64_t>(kRows)});
    for (std::size_t r = 0; r < kRows; ++r) {
      const std::vector<long double>& row = rows[r].second;
      check_all_variants(Op::logsumexp, make_tensor(dtype, {3}, row));
      for (std::size_t i = 0; i < 3; ++i) columns.set_at(static_cast<std::int64_t>(i * kRows + r), row[i]);
    }
    Options axis0;
    axis0.axis = 0;
    const Expected expected = reference_nd(Op::logsumexp, columns, axis0);
    for (Algorithm algorithm : kAccurateAlgorithms) {
      axis0.algorithm = algorithm;
      run_and_check(Op::logsumexp, columns, axis0, Layout::contiguous, expected);
    }
  }
}

}  // namespace
}  // namespace smax::test
