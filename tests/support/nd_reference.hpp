// The expected output of an operation on an N-d strided tensor, in long double.
// Rows are gathered with this file's own index arithmetic (not the library's
// Problem), then each goes through smax::reference::row.
#pragma once

#include <cstdint>
#include <vector>

#include "smax/info.hpp"
#include "smax/options.hpp"
#include "test_tensor.hpp"

namespace smax::test {

struct Expected {
  std::vector<std::int64_t> shape;  // the output's shape
  std::vector<long double> values;  // row-major over `shape`
};

// The axis in [0, max(rank, 1)); rank 0 behaves as a row of one element.
int normalized_axis(int axis, int rank);

// The input's shape, or for logsumexp the input's without the axis (kept as 1 with
// options.keepdims). An out-of-range axis leaves the shape as it is.
std::vector<std::int64_t> output_shape(Op op, const std::vector<std::int64_t>& input_shape, const Options& options);

// Uses options.axis, temperature and all_masked.
Expected reference_nd(Op op, const TestTensor& x, const Options& options);

}  // namespace smax::test
