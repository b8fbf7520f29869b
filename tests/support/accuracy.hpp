// The accuracy bar every variant but naive must meet, written once.
//
// - f32 softmax: relative error <= 1e-6 where the reference is >= 1e-30, absolute
//   error <= 1e-36 below; f64 the same with 1e-13.
// - f32 log_softmax and logsumexp: absolute error <= 2e-6 * max(1, |reference|);
//   f64 with 1e-13.
// - f16 and bf16, every op: within one unit in the last place of the output type at
//   the reference's magnitude (the subnormal spacing for subnormal results), also
//   for log_softmax's -log(1 + tiny) at a row's max: both the kernels and the
//   reference take log1p of the sum without the max's own term.
// - A non-finite reference must be matched exactly in kind; a reference beyond the
//   output type's range must give the infinity of its sign.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "nd_reference.hpp"
#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "test_tensor.hpp"

namespace smax::test {

// The distance from `reference` allowed for an output of this op and dtype.
long double tolerance(Op op, DType dtype, long double reference);

// The spacing of 16-bit floats (f16 or bf16) at the magnitude of `value`.
long double ulp16(DType dtype, long double value);

// Whether one output meets the bar; on failure `why` says by how much it misses.
bool meets_bar(Op op, DType dtype, long double got, long double reference, std::string* why = nullptr);

// Every element of `output` against `expected` (same shape, row-major); the message
// lists the first few failures with their indices.
::testing::AssertionResult matches_reference(Op op, const TestTensor& output, const Expected& expected);

// Every element equal in bits, NaN to NaN: for results that must not depend on the
// thread count or on which equivalent view was passed.
::testing::AssertionResult bitwise_equal(const TestTensor& a, const TestTensor& b);

}  // namespace smax::test
