// The std::span overloads and the smax::view helpers, for every element type.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

template <class T>
class SpansAndViews : public SeededTest {
 protected:
  static constexpr DType kDType = dtype_of<T>;

  // A random row, as the element type and as a TestTensor holding the same values.
  std::pair<std::vector<T>, TestTensor> random_row(std::int64_t n) {
    TestTensor tensor(kDType, {n});
    fill_normal(tensor, rng(), random_distribution(rng()));
    std::vector<T> row(static_cast<std::size_t>(n));
    std::memcpy(row.data(), tensor.data(), row.size() * sizeof(T));
    return {row, std::move(tensor)};
  }

  static std::vector<T> contents(const TestTensor& t) {
    std::vector<T> values(static_cast<std::size_t>(t.numel()));
    std::memcpy(values.data(), t.data(), values.size() * sizeof(T));
    return values;
  }

  static bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  }
};

using ElementTypes = ::testing::Types<float, double, half, bfloat16>;
TYPED_TEST_SUITE(SpansAndViews, ElementTypes);

TYPED_TEST(SpansAndViews, SpanOverloadsMatchTheTensorCalls) {
  using T = TypeParam;
  auto [row, tensor] = this->random_row(301);
  for (Algorithm algorithm : kAccurateAlgorithms) {
    Options options;
    options.algorithm = algorithm;
    SCOPED_TRACE(std::string(to_string(this->kDType)) + " " + describe(Op::softmax, options));

    std::vector<T> out(row.size());
    TestTensor expected(this->kDType, {301});
    softmax(std::span<const T>(row), std::span<T>(out), options);
    softmax(tensor.view(), expected.mutable_view(), options);
    EXPECT_TRUE(this->same_bits(out, this->contents(expected)));
    EXPECT_TRUE(matches_reference(Op::softmax, expected, reference_nd(Op::softmax, tensor, options)));

    log_softmax(std::span<const T>(row), std::span<T>(out), options);
    log_softmax(tensor.view(), expected.mutable_view(), options);
    EXPECT_TRUE(this->same_bits(out, this->contents(expected)));

    const T lse = logsumexp(std::span<const T>(row), options);
    TestTensor lse_expected(this->kDType, {});
    logsumexp(tensor.view(), lse_expected.mutable_view(), options);
    EXPECT_TRUE(this->same_bits({lse}, this->contents(lse_expected)));
  }
}

TYPED_TEST(SpansAndViews, SpanAxisMustBeTheRow) {
  using T = TypeParam;
  auto [row, tensor] = this->random_row(5);
  std::vector<T> out(row.size());
  for (int axis : {0, -1}) {
    Options options;
    options.axis = axis;
    EXPECT_NO_THROW(softmax(std::span<const T>(row), std::span<T>(out), options));
  }
  Options bad;
  bad.axis = 1;
  try {
    softmax(std::span<const T>(row), std::span<T>(out), bad);
    ADD_FAILURE() << "axis 1 accepted for a span";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::axis);
  }
  EXPECT_THROW((void)logsumexp(std::span<const T>(row), bad), Error);
}

TYPED_TEST(SpansAndViews, EmptySpans) {
  using T = TypeParam;
  std::vector<T> empty;
  EXPECT_NO_THROW(softmax(std::span<const T>(empty), std::span<T>(empty)));
  const T lse = logsumexp(std::span<const T>(empty));
  EXPECT_EQ(load_element(this->kDType, &lse), -std::numeric_limits<long double>::infinity());
}

TYPED_TEST(SpansAndViews, ViewHelpersDeduceTheDTypeAndStrides) {
  using T = TypeParam;
  std::vector<T> buffer(24);
  const T* const_data = buffer.data();
  T* data = buffer.data();

  static_assert(std::is_same_v<decltype(view(const_data, {2, 3})), TensorView>);
  static_assert(std::is_same_v<decltype(view(data, {2, 3})), MutableTensorView>);
  static_assert(std::is_same_v<decltype(view(const_data, {2, 3}, {1, 2})), TensorView>);
  static_assert(std::is_same_v<decltype(view(data, {2, 3}, {1, 2})), MutableTensorView>);

  const TensorView dense = view(const_data, {2, 3, 4});
  EXPECT_EQ(dense.dtype(), this->kDType);
  EXPECT_EQ(dense.data(), static_cast<const void*>(const_data));
  EXPECT_EQ(dense.rank(), 3);
  EXPECT_EQ(std::vector<std::int64_t>(dense.strides().begin(), dense.strides().end()),
            (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(dense.numel(), 24);

  const MutableTensorView strided = view(data, {3, 4}, {1, 6});
  EXPECT_EQ(strided.data(), static_cast<void*>(data));
  EXPECT_EQ(std::vector<std::int64_t>(strided.strides().begin(), strided.strides().end()),
            (std::vector<std::int64_t>{1, 6}));
}

// The helpers in an actual call: a column-major 3 x 4 input, softmax over its rows
// into a row-major output.
TYPED_TEST(SpansAndViews, ViewHelpersWorkInACall) {
  using T = TypeParam;
  TestTensor x(this->kDType, {3, 4}, Layout::transposed);
  fill_normal(x, this->rng(), random_distribution(this->rng()));
  std::vector<T> in(12);
  std::memcpy(in.data(), x.data(), in.size() * sizeof(T));
  std::vector<T> out(12);
  softmax(view(static_cast<const T*>(in.data()), {3, 4}, {1, 3}), view(out.data(), {3, 4}));
  TestTensor y(this->kDType, {3, 4});
  std::memcpy(y.data(), out.data(), out.size() * sizeof(T));
  EXPECT_TRUE(matches_reference(Op::softmax, y, reference_nd(Op::softmax, x, {})));
}

// The library's own answer (tests/support has an independent one for the references).
TEST(OutputShape, IsTheInputsOrTheReducedOne) {
  const std::vector<std::int64_t> shape = {2, 3, 4};
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(smax::output_shape(Op::softmax, shape, {.axis = 1}), shape);
  EXPECT_EQ(smax::output_shape(Op::log_softmax, shape, {.axis = -1}), shape);
  EXPECT_EQ(smax::output_shape(Op::logsumexp, shape, {.axis = 1}), (V{2, 4}));
  EXPECT_EQ(smax::output_shape(Op::logsumexp, shape, {.axis = -1, .keepdims = true}), (V{2, 3, 1}));
  EXPECT_EQ(smax::output_shape(Op::logsumexp, std::span<const std::int64_t>{}, {}), V{});
  EXPECT_THROW(smax::output_shape(Op::logsumexp, shape, {.axis = 3}), Error);
}

}  // namespace
}  // namespace smax::test
