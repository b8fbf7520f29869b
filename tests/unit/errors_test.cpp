// Every invalid call throws smax::Error with the right code and a message naming
// the bad argument and its value, before anything is written.
#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class Errors : public SeededTest {
 protected:
  Errors() { fill_normal(x_, rng(), Distribution{0, 1}); }

  // Runs `call`, which must throw smax::Error with `code` and a message containing
  // every one of `fragments`, and must leave `untouched`'s buffer as it was.
  template <class Call>
  void expect_error(Call&& call, Errc code, std::initializer_list<std::string> fragments,
                    const TestTensor& untouched) {
    const std::vector<unsigned char> before = untouched.bytes();
    const std::vector<unsigned char> input_before = x_.bytes();
    try {
      call();
      ADD_FAILURE() << "no smax::Error thrown";
    } catch (const Error& error) {
      EXPECT_EQ(to_string(error.code()), to_string(code)) << error.what();
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
            << "message \"" << error.what() << "\" lacks \"" << fragment << "\"";
      }
    } catch (const std::exception& other) {
      ADD_FAILURE() << "threw something other than smax::Error: " << other.what();
    }
    EXPECT_EQ(untouched.bytes(), before) << "the output buffer changed";
    EXPECT_EQ(x_.bytes(), input_before) << "the input buffer changed";
  }

  // Expects every op (softmax, log_softmax, logsumexp with a right-shaped output) to
  // refuse `options` on x_.
  void expect_options_refused(const Options& options, Errc code, std::initializer_list<std::string> fragments) {
    for (Op op : kAllOps) {
      SCOPED_TRACE(describe(op, options));
      TestTensor y = make_output(op, x_, options, Layout::contiguous);
      expect_error([&] { run_op(op, x_.view(), y.mutable_view(), options); }, code, fragments, y);
    }
  }

  TestTensor x_{DType::f32, {3, 4}};
};

TEST_F(Errors, OutputShapeMismatch) {
  TestTensor y(DType::f32, {3, 5});
  for (Op op : {Op::softmax, Op::log_softmax}) {
    expect_error([&] { run_op(op, x_.view(), y.mutable_view(), {}); }, Errc::shape,
                 {"output shape [3, 5]", "[3, 4]"}, y);
  }
}

TEST_F(Errors, LogSumExpOutputShapeWrong) {
  TestTensor full(DType::f32, {3, 4});
  expect_error([&] { logsumexp(x_.view(), full.mutable_view(), {}); }, Errc::shape, {"output shape [3, 4]", "[3]"},
               full);
  Options keepdims;
  keepdims.keepdims = true;
  TestTensor reduced(DType::f32, {3});
  expect_error([&] { logsumexp(x_.view(), reduced.mutable_view(), keepdims); }, Errc::shape,
               {"output shape [3]", "[3, 1]", "keepdims"}, reduced);
  Options axis0;
  axis0.axis = 0;
  expect_error([&] { logsumexp(x_.view(), reduced.mutable_view(), axis0); }, Errc::shape,
               {"output shape [3]", "[4]"}, reduced);
}

TEST_F(Errors, AxisOutOfRange) {
  for (int axis : {2, 7, -3, -9}) {
    Options options;
    options.axis = axis;
    expect_options_refused(options, Errc::axis, {"axis " + std::to_string(axis)});
  }
}

TEST_F(Errors, DTypeMismatch) {
  TestTensor y(DType::f64, {3, 4});
  expect_error([&] { softmax(x_.view(), y.mutable_view(), {}); }, Errc::dtype, {"output dtype f64", "f32"}, y);
}

TEST_F(Errors, InvalidDTypeValue) {
  const auto invalid = static_cast<DType>(9);
  TestTensor y(DType::f32, {3, 4});
  const TensorView bad_input(x_.data(), invalid, {3, 4});
  expect_error([&] { softmax(bad_input, y.mutable_view(), {}); }, Errc::dtype, {"input dtype", "9"}, y);
  const MutableTensorView bad_output(y.data(), invalid, {3, 4});
  expect_error([&] { softmax(x_.view(), bad_output, {}); }, Errc::dtype, {"output dtype", "9"}, y);
}

TEST_F(Errors, NullData) {
  TestTensor y(DType::f32, {3, 4});
  const TensorView null_input(nullptr, DType::f32, {3, 4});
  expect_error([&] { softmax(null_input, y.mutable_view(), {}); }, Errc::null_data, {"input data is null", "[3, 4]"},
               y);
  const MutableTensorView null_output(nullptr, DType::f32, {3, 4});
  expect_error([&] { log_softmax(x_.view(), null_output, {}); }, Errc::null_data,
               {"output data is null", "[3, 4]"}, y);
}

TEST_F(Errors, NullDataIsFineForAnEmptyShape) {
  const TensorView x(nullptr, DType::f32, {0, 4});
  const MutableTensorView y(nullptr, DType::f32, {0, 4});
  EXPECT_NO_THROW(softmax(x, y, {}));
  const MutableTensorView lse(nullptr, DType::f32, {0});
  EXPECT_NO_THROW(logsumexp(x, lse, {}));
}

TEST_F(Errors, OutputOverlappingItself) {
  TestTensor y(DType::f32, {3, 4});
  const std::array<std::int64_t, 2> shape{3, 4};
  for (const std::array<std::int64_t, 2>& strides :
       {std::array<std::int64_t, 2>{4, 0}, {0, 1}, {2, 1}, {1, 1}, {-1, 1}}) {
    const MutableTensorView aliased(y.data(), DType::f32, shape, strides);
    std::ostringstream text;
    text << "output strides [" << strides[0] << ", " << strides[1] << "]";
    for (Op op : {Op::softmax, Op::log_softmax}) {
      expect_error([&] { run_op(op, x_.view(), aliased, {}); }, Errc::strides, {text.str()}, y);
    }
  }
  const MutableTensorView aliased_lse(y.data(), DType::f32, {3}, {0});
  expect_error([&] { logsumexp(x_.view(), aliased_lse, {}); }, Errc::strides, {"output strides [0]"}, y);
}

TEST_F(Errors, OutputPartiallyOverlappingTheInput) {
  // Input and output in one buffer of 13 floats, the output one element further on.
  TestTensor buffer(DType::f32, {13});
  fill_normal(buffer, rng(), Distribution{0, 1});
  const TensorView x(buffer.data(), DType::f32, {3, 4});
  const MutableTensorView shifted(static_cast<float*>(buffer.data()) + 1, DType::f32, {3, 4});
  for (Op op : {Op::softmax, Op::log_softmax}) {
    expect_error([&] { run_op(op, x, shifted, {}); }, Errc::overlap,
                 {"overlaps the input", "strides [4, 1]", "in place needs"}, buffer);
  }
  // The same data pointer with other strides is not in place either.
  TestTensor square(DType::f32, {3, 3});
  fill_normal(square, rng(), Distribution{0, 1});
  const MutableTensorView transposed(square.data(), DType::f32, {3, 3}, {1, 3});
  expect_error([&] { softmax(square.view(), transposed, {}); }, Errc::overlap,
               {"output (data", "strides [1, 3]) overlaps the input", "strides [3, 1]"}, square);
}

TEST_F(Errors, LogSumExpOutputOverlappingTheInput) {
  const MutableTensorView inside(x_.data(), DType::f32, {3});
  expect_error([&] { logsumexp(x_.view(), inside, {}); }, Errc::overlap,
               {"overlaps the input", "logsumexp needs a separate output"}, x_);
}

TEST_F(Errors, BadTemperature) {
  const std::pair<double, std::string> cases[] = {{0.0, "0"}, {-1.0, "-1"}, {kNaN, "nan"}, {kInf, "inf"},
                                                  {1e-40, "1e-40"}};
  for (const auto& [temperature, text] : cases) {
    Options options;
    options.temperature = temperature;
    expect_options_refused(options, Errc::option, {"temperature", text});
  }
}

TEST_F(Errors, NegativeThreads) {
  Options options;
  options.threads = -2;
  expect_options_refused(options, Errc::option, {"threads", "-2"});
}

TEST_F(Errors, FusedRowTooLong) {
  const std::int64_t length = kFusedMaxLength + 1;
  x_ = TestTensor(DType::f32, {2, length});
  fill_normal(x_, rng(), Distribution{0, 1});
  Options options;
  options.algorithm = Algorithm::fused;
  expect_options_refused(options, Errc::option, {"fused", std::to_string(length)});
}

TEST_F(Errors, InvalidEnumValues) {
  Options algorithm;
  algorithm.algorithm = static_cast<Algorithm>(17);
  expect_options_refused(algorithm, Errc::option, {"algorithm", "17"});
  Options order;
  order.pass_order = static_cast<PassOrder>(5);
  expect_options_refused(order, Errc::option, {"pass order", "5"});
  Options masked;
  masked.all_masked = static_cast<AllMasked>(6);
  expect_options_refused(masked, Errc::option, {"all-masked", "6"});
}

TEST_F(Errors, ViewsRefuseRankNineAndNegativeExtents) {
  const std::vector<std::int64_t> rank9(9, 1);
  try {
    const TensorView v(x_.data(), DType::f32, rank9);
    ADD_FAILURE() << "rank 9 accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::shape);
    EXPECT_NE(std::string(error.what()).find("rank 9"), std::string::npos) << error.what();
  }
  try {
    const MutableTensorView v(x_.data(), DType::f32, {3, -1});
    ADD_FAILURE() << "a negative extent accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::shape);
    EXPECT_NE(std::string(error.what()).find("[3, -1]"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("negative"), std::string::npos) << error.what();
  }
  try {
    const TensorView v(x_.data(), DType::f32, {3, 4}, {4});
    ADD_FAILURE() << "strides of the wrong rank accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::shape);
  }
}

// A zero extent empties a view, but the other extents still multiply into row counts
// and strides: their product must fit int64 too.
TEST_F(Errors, ViewsRefuseExtentsWhoseProductOverflowsBesideAZeroExtent) {
  const std::int64_t big = std::int64_t{1} << 40;
  auto expect_overflow = [](auto&& make, const std::string& view) {
    try {
      make();
      ADD_FAILURE() << "extents of 2^80 elements accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), Errc::shape);
      EXPECT_NE(std::string(error.what()).find(view + ": shape [1099511627776, 1099511627776, 0]"), std::string::npos)
          << error.what();
      EXPECT_NE(std::string(error.what()).find("more elements than int64 can count"), std::string::npos)
          << error.what();
    }
  };
  expect_overflow([&] { const TensorView v(nullptr, DType::f32, {big, big, 0}); }, "tensor view");
  expect_overflow([&] { const TensorView v(nullptr, DType::f32, {big, big, 0}, {1, 1, 1}); }, "tensor view");
  const std::array<std::int64_t, 3> shape{big, big, 0};
  expect_overflow([&] { const IndexView v(static_cast<const std::int64_t*>(nullptr), shape); }, "index view");
  // Within int64 beside the zero: an empty view, and an empty call.
  const TensorView empty(nullptr, DType::f32, {big, 0, 4});
  EXPECT_EQ(empty.numel(), 0);
  softmax(empty, MutableTensorView(nullptr, DType::f32, {big, 0, 4}));
}

// Strides that reach beyond the address space are refused before any other check of
// the layout adds them up (in place too, where no range would otherwise be taken).
TEST_F(Errors, StridesBeyondTheAddressSpaceAreRefusedInPlaceToo) {
  const std::int64_t far = std::numeric_limits<std::int64_t>::min();
  TestTensor y(DType::f32, {3, 4});
  const MutableTensorView out(y.data(), DType::f32, {3, 4}, {far, 1});
  expect_error([&] { softmax(x_.view(), out); }, Errc::strides, {"output strides", "reach beyond the address space"},
               y);
  const MutableTensorView in_place(y.data(), DType::f32, {2, 4}, {std::numeric_limits<std::int64_t>::max() / 2, 1});
  expect_error([&] { softmax_backward(in_place, in_place, in_place); }, Errc::strides,
               {"dx strides", "reach beyond the address space"}, y);
}

TEST_F(Errors, SpanSizeMismatch) {
  std::vector<float> in(4, 1.0f);
  std::vector<float> out(3, -7.0f);
  const std::vector<float> out_before = out;
  try {
    softmax(std::span<const float>(in), std::span<float>(out));
    ADD_FAILURE() << "no smax::Error thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::shape);
    EXPECT_NE(std::string(error.what()).find("output shape [3]"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("[4]"), std::string::npos) << error.what();
  }
  EXPECT_EQ(out, out_before);
  std::vector<double> in64(5, 0.0);
  std::vector<double> out64(6, 0.0);
  EXPECT_THROW(log_softmax(std::span<const double>(in64), std::span<double>(out64)), Error);
}

// smax::plan refuses what the operations refuse, with the same codes.
TEST_F(Errors, PlanValidatesLikeTheOperations) {
  const std::array<std::int64_t, 2> shape{3, 4};
  auto expect_plan_error = [](auto&& call, Errc code, const std::string& fragment) {
    try {
      call();
      ADD_FAILURE() << "plan accepted a bad request";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), code) << error.what();
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  Options axis;
  axis.axis = -3;
  expect_plan_error([&] { plan(Op::softmax, shape, DType::f32, axis); }, Errc::axis, "axis -3");
  expect_plan_error([&] { plan(Op::softmax, shape, static_cast<DType>(9), {}); }, Errc::dtype, "9");
  Options temperature;
  temperature.temperature = -1;
  expect_plan_error([&] { plan(Op::logsumexp, shape, DType::f32, temperature); }, Errc::option, "temperature");
  Options threads;
  threads.threads = -1;
  expect_plan_error([&] { plan(Op::softmax, shape, DType::f16, threads); }, Errc::option, "threads");
  Options fused;
  fused.algorithm = Algorithm::fused;
  const std::array<std::int64_t, 1> long_row{kFusedMaxLength + 1};
  expect_plan_error([&] { plan(Op::softmax, long_row, DType::f32, fused); }, Errc::option, "fused");
  Options algorithm;
  algorithm.algorithm = static_cast<Algorithm>(17);
  expect_plan_error([&] { plan(Op::softmax, shape, DType::f32, algorithm); }, Errc::option, "17");
  const std::vector<std::int64_t> rank9(9, 2);
  expect_plan_error([&] { plan(Op::softmax, rank9, DType::f32, {}); }, Errc::shape, "rank 9");
  const std::array<std::int64_t, 2> negative{3, -2};
  expect_plan_error([&] { plan(Op::softmax, negative, DType::f32, {}); }, Errc::shape, "negative");
  // 2^62 elements: int64 counts them, not their bytes.
  const std::array<std::int64_t, 2> huge{std::int64_t{1} << 61, 2};
  expect_plan_error([&] { plan(Op::softmax, huge, DType::f32, {}); }, Errc::shape, "more bytes than int64 can count");
}

// An exception inside a parallel region (here std::bad_alloc: a broadcast row of
// 2^50 elements gathered into a buffer of its own) reaches the caller; it would end
// the program (std::terminate) if it left an OpenMP thread.
TEST_F(Errors, FailedAllocationsOnWorkerThreadsReachTheCaller) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan ends the program where operator new fails";
#else
  const TensorView broadcast(x_.data(), DType::f32, {2, std::int64_t{1} << 50}, {0, 0});
  TestTensor lse(DType::f32, {2});
  Options options;
  options.threads = 2;
  EXPECT_THROW(logsumexp(broadcast, lse.mutable_view(), options), std::bad_alloc);
#endif
}

}  // namespace
}  // namespace smax::test
