#include "nd_reference.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "reference/reference.hpp"

namespace smax::test {

int normalized_axis(int axis, int rank) {
  const int effective_rank = std::max(rank, 1);
  return axis < 0 ? axis + effective_rank : axis;
}

std::vector<std::int64_t> output_shape(Op op, const std::vector<std::int64_t>& input_shape, const Options& options) {
  std::vector<std::int64_t> shape = input_shape;
  if (op != Op::logsumexp || shape.empty()) return shape;
  const int axis_index = normalized_axis(options.axis, static_cast<int>(shape.size()));
  // An axis out of range has no output shape; keep the input's for the call to refuse.
  if (axis_index < 0 || axis_index >= static_cast<int>(shape.size())) return shape;
  const auto axis = static_cast<std::size_t>(axis_index);
  if (options.keepdims) shape[axis] = 1;
  else shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  return shape;
}

Expected reference_nd(Op op, const TestTensor& x, const Options& options) {
  Expected expected;
  expected.shape = output_shape(op, x.shape(), options);
  const std::int64_t out_count =
      std::accumulate(expected.shape.begin(), expected.shape.end(), std::int64_t{1}, std::multiplies<>());
  expected.values.assign(static_cast<std::size_t>(out_count), 0.0L);
  const auto temperature = static_cast<long double>(options.temperature);

  if (x.rank() == 0) {  // a row of one
    const std::vector<long double> row{x.get({})};
    reference::row(op, row, expected.values, temperature, options.all_masked);
    return expected;
  }

  const auto rank = static_cast<std::size_t>(x.rank());
  const auto axis = static_cast<std::size_t>(normalized_axis(options.axis, x.rank()));
  const std::vector<std::int64_t>& shape = x.shape();
  const std::int64_t length = shape[axis];
  const std::int64_t rows = length == 0 ? out_count : x.numel() / length;

  // Row-major strides of the input's shape: where a softmax output element goes.
  std::vector<std::int64_t> dense_strides(rank);
  for (std::size_t i = rank, step = 1; i-- > 0;) {
    dense_strides[i] = static_cast<std::int64_t>(step);
    step *= static_cast<std::size_t>(shape[i]);
  }

  std::vector<std::int64_t> index(rank, 0);
  std::vector<long double> row(static_cast<std::size_t>(length));
  std::vector<long double> out(op == Op::logsumexp ? 1 : static_cast<std::size_t>(length));
  for (std::int64_t r = 0; r < rows; ++r) {
    // Row r's index over the non-axis dimensions, row-major; the axis entry is 0.
    std::int64_t rest = r;
    for (std::size_t i = rank; i-- > 0;) {
      if (i == axis) continue;
      index[i] = rest % shape[i];
      rest /= shape[i];
    }
    for (std::int64_t k = 0; k < length; ++k) {
      index[axis] = k;
      row[static_cast<std::size_t>(k)] = x.get(index);
    }
    index[axis] = 0;
    reference::row(op, row, out, temperature, options.all_masked);
    if (op == Op::logsumexp) {
      expected.values[static_cast<std::size_t>(r)] = out[0];
      continue;
    }
    std::int64_t first = 0;
    for (std::size_t i = 0; i < rank; ++i) first += index[i] * dense_strides[i];
    for (std::int64_t k = 0; k < length; ++k) {
      expected.values[static_cast<std::size_t>(first + k * dense_strides[axis])] = out[static_cast<std::size_t>(k)];
    }
  }
  return expected;
}

}  // namespace smax::test
