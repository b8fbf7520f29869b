// Shapes at the edges: empty tensors, scalars, length-1 axes, and in-place calls.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();

class EdgeShapes : public SeededTest {};

// Softmax of an empty tensor writes nothing; logsumexp over an empty axis writes
// -inf to every output, and over an empty batch writes nothing.
TEST_F(EdgeShapes, EmptyTensorsOnEveryAxis) {
  const std::vector<std::vector<std::int64_t>> shapes{{0, 10}, {10, 0}, {5, 0, 0}, {2, 0, 4}, {1, 0}, {0}};
  for (const auto& shape : shapes) {
    const int rank = static_cast<int>(shape.size());
    for (int axis = -rank; axis < rank; ++axis) {
      for (DType dtype : kAllDTypes) {
        const TestTensor x(dtype, shape);
        for (Op op : kAllOps) {
          for (bool keepdims : {false, true}) {
            if (keepdims && op != Op::logsumexp) continue;
            for (Algorithm algorithm : kAllAlgorithms) {
              Options options;
              options.axis = axis;
              options.keepdims = keepdims;
              options.algorithm = algorithm;
              SCOPED_TRACE(describe(op, options) + " on " + x.describe());
              TestTensor y = make_output(op, x, options, Layout::contiguous);
              const std::vector<unsigned char> before = y.bytes();
              run_op(op, x.view(), y.mutable_view(), options);
              if (y.numel() == 0) {
                EXPECT_EQ(y.bytes(), before) << "an empty output was written to";
                continue;
              }
              ASSERT_EQ(op, Op::logsumexp);
              for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), -kInf) << "element " << i;
              EXPECT_TRUE(y.untouched_outside_view());
            }
          }
        }
      }
    }
  }
}

// A scalar behaves as a row of one: softmax 1, log_softmax 0, logsumexp x.
TEST_F(EdgeShapes, RankZeroIsARowOfOne) {
  for (DType dtype : kAllDTypes) {
    const TestTensor x = make_tensor(dtype, {}, {-3.25L});
    for (Algorithm algorithm : kAccurateAlgorithms) {
      for (int axis : {0, -1}) {
        Options options;
        options.algorithm = algorithm;
        options.axis = axis;
        SCOPED_TRACE(std::string(to_string(dtype)) + " " + describe(Op::softmax, options));
        TestTensor y(dtype, {});
        softmax(x.view(), y.mutable_view(), options);
        EXPECT_EQ(y.at(0), 1.0L);
        log_softmax(x.view(), y.mutable_view(), options);
        EXPECT_EQ(y.at(0), 0.0L);
        for (bool keepdims : {false, true}) {
          options.keepdims = keepdims;
          logsumexp(x.view(), y.mutable_view(), options);
          EXPECT_EQ(y.at(0), -3.25L);
        }
      }
    }
  }
}

// Along an axis of length 1 every row is a single element.
TEST_F(EdgeShapes, LengthOneAxisIsExact) {
  for (DType dtype : kAllDTypes) {
    TestTensor x(dtype, {3, 1, 4}, Layout::transposed);
    fill_normal(x, rng(), random_distribution(rng()));
    for (Algorithm algorithm : kAccurateAlgorithms) {
      Options options;
      options.algorithm = algorithm;
      options.axis = 1;
      SCOPED_TRACE(std::string(to_string(dtype)) + " " + describe(Op::softmax, options));
      TestTensor y(dtype, {3, 1, 4}, Layout::strided);
      softmax(x.view(), y.mutable_view(), options);
      for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), 1.0L);
      log_softmax(x.view(), y.mutable_view(), options);
      for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), 0.0L);
      TestTensor lse(dtype, {3, 4});
      logsumexp(x.view(), lse.mutable_view(), options);
      for (std::int64_t i = 0; i < lse.numel(); ++i) EXPECT_EQ(lse.at(i), x.at(i)) << "element " << i;
    }
  }
}

// The output view may be the input view itself, strided ones included.
TEST_F(EdgeShapes, InPlaceMatchesTheReference) {
  for (DType dtype : kAllDTypes) {
    for (Layout layout : kOutputLayouts) {
      for (Op op : {Op::softmax, Op::log_softmax}) {
        for (Algorithm algorithm : kAllAlgorithms) {
          for (int axis : {-1, 0}) {
            Options options;
            options.algorithm = algorithm;
            options.axis = axis;
            TestTensor x(dtype, {6, 37}, layout);
            fill_normal(x, rng(), algorithm == Algorithm::naive ? Distribution{0, 1} : random_distribution(rng()));
            SCOPED_TRACE(describe(op, options) + " in place on " + x.describe());
            const Expected expected = reference_nd(op, x, options);
            run_op(op, x.view(), x.mutable_view(), options);
            EXPECT_TRUE(x.untouched_outside_view());
            if (algorithm == Algorithm::naive) {
              for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_TRUE(std::isfinite(x.at(i)));
              continue;
            }
            EXPECT_TRUE(matches_reference(op, x, expected));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace smax::test
