#include "op_runner.hpp"

#include <sstream>

#include "accuracy.hpp"

namespace smax::test {

bool supports_length(Algorithm algorithm, std::int64_t length) {
  return algorithm != Algorithm::fused || length <= kFusedMaxLength;
}

void run_op(Op op, const TensorView& x, const MutableTensorView& y, const Options& options) {
  switch (op) {
    case Op::softmax: return softmax(x, y, options);
    case Op::log_softmax: return log_softmax(x, y, options);
    case Op::logsumexp: return logsumexp(x, y, options);
  }
}

void run_backward(bool log, const TensorView& y, const TensorView& dy, const MutableTensorView& dx,
                  const BackwardOptions& options) {
  if (log) log_softmax_backward(y, dy, dx, options);
  else softmax_backward(y, dy, dx, options);
}

std::string dtype_test_name(const ::testing::TestParamInfo<DType>& param_info) {
  return std::string(to_string(param_info.param));
}

std::string describe(Op op, const Options& options) {
  std::ostringstream out;
  out << to_string(op) << " algorithm=" << to_string(options.algorithm) << " axis=" << options.axis
      << " T=" << options.temperature << " order=" << to_string(options.pass_order)
      << " threads=" << options.threads << " all_masked=" << to_string(options.all_masked)
      << (options.keepdims ? " keepdims" : "");
  return out.str();
}

TestTensor make_output(Op op, const TestTensor& x, const Options& options, Layout layout) {
  return TestTensor(x.dtype(), output_shape(op, x.shape(), options), layout);
}

TestTensor run_and_check(Op op, const TestTensor& x, const Options& options, Layout output_layout,
                         const Expected& expected) {
  SCOPED_TRACE(describe(op, options) + " input " + x.describe() + " output layout " + to_string(output_layout));
  TestTensor y = make_output(op, x, options, output_layout);
  run_op(op, x.view(), y.mutable_view(), options);
  EXPECT_TRUE(matches_reference(op, y, expected));
  EXPECT_TRUE(y.untouched_outside_view()) << "the call wrote outside the output view";
  return y;
}

}  // namespace smax::test
