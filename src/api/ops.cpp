// The public operations: validate, plan, execute.
#include "smax/ops.hpp"

#include "core/problem.hpp"
#include "cpu/execute.hpp"
#include "plan/planner.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"

namespace smax {
namespace {

void run(Op op, const TensorView& x, const MutableTensorView& y, const Options& options) {
  const detail::Problem problem = detail::make_problem(op, x, y, options);
  const int inner = detail::column_dim(problem);
  const std::int64_t inner_extent = inner < 0 ? 0 : problem.batch_shape[static_cast<std::size_t>(inner)];
  const detail::Plan plan =
      detail::make_plan(op, problem.dtype, problem.rows, problem.length, inner_extent, options, machine());
  cpu::execute(problem, plan);
}

template <class T>
void run_row(Op op, std::span<const T> x, std::span<T> y, const Options& options) {
  const std::int64_t xn = static_cast<std::int64_t>(x.size());
  const std::int64_t yn = static_cast<std::int64_t>(y.size());
  run(op, TensorView(x.data(), dtype_of<T>, {xn}), MutableTensorView(y.data(), dtype_of<T>, {yn}), options);
}

template <class T>
T logsumexp_row(std::span<const T> x, const Options& options) {
  T result{};
  run(Op::logsumexp, TensorView(x.data(), dtype_of<T>, {static_cast<std::int64_t>(x.size())}),
      MutableTensorView(&result, dtype_of<T>, std::span<const std::int64_t>{}), options);
  return result;
}

}  // namespace

std::vector<std::int64_t> output_shape(Op op, std::span<const std::int64_t> shape, const Options& options) {
  const int axis = detail::normalize_axis(op, options.axis, static_cast<int>(shape.size()));
  return detail::output_shape(op, shape, axis, options.keepdims);
}

void softmax(const TensorView& x, const MutableTensorView& y, const Options& options) { run(Op::softmax, x, y, options); }
void log_softmax(const TensorView& x, const MutableTensorView& y, const Options& options) {
  run(Op::log_softmax, x, y, options);
}
void logsumexp(const TensorView& x, const MutableTensorView& y, const Options& options) {
  run(Op::logsumexp, x, y, options);
}

void softmax(std::span<const float> x, std::span<float> y, const Options& o) { run_row(Op::softmax, x, y, o); }
void softmax(std::span<const double> x, std::span<double> y, const Options& o) { run_row(Op::softmax, x, y, o); }
void softmax(std::span<const half> x, std::span<half> y, const Options& o) { run_row(Op::softmax, x, y, o); }
void softmax(std::span<const bfloat16> x, std::span<bfloat16> y, const Options& o) { run_row(Op::softmax, x, y, o); }
void log_softmax(std::span<const float> x, std::span<float> y, const Options& o) { run_row(Op::log_softmax, x, y, o); }
void log_softmax(std::span<const double> x, std::span<double> y, const Options& o) { run_row(Op::log_softmax, x, y, o); }
void log_softmax(std::span<const half> x, std::span<half> y, const Options& o) { run_row(Op::log_softmax, x, y, o); }
void log_softmax(std::span<const bfloat16> x, std::span<bfloat16> y, const Options& o) {
  run_row(Op::log_softmax, x, y, o);
}
float logsumexp(std::span<const float> x, const Options& o) { return logsumexp_row(x, o); }
double logsumexp(std::span<const double> x, const Options& o) { return logsumexp_row(x, o); }
half logsumexp(std::span<const half> x, const Options& o) { return logsumexp_row(x, o); }
bfloat16 logsumexp(std::span<const bfloat16> x, const Options& o) { return logsumexp_row(x, o); }

}  // namespace smax
