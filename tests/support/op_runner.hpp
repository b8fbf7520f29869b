// Calling the library the same way from every test: one entry point per Op, the
// lists of variants and dtypes to sweep, and a checked run against the reference.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "nd_reference.hpp"
#include "smax/smax.hpp"
#include "smax/training.hpp"
#include "test_tensor.hpp"

namespace smax::test {

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
inline constexpr Op kAllOps[] = {Op::softmax, Op::log_softmax, Op::logsumexp};
// The variants held to the accuracy bar (naive overflows on purpose).
inline constexpr Algorithm kAccurateAlgorithms[] = {Algorithm::automatic, Algorithm::safe, Algorithm::fused,
                                                    Algorithm::tiled, Algorithm::online};
inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::automatic, Algorithm::naive, Algorithm::safe,
                                               Algorithm::fused, Algorithm::tiled, Algorithm::online};

// Whether the variant accepts a row of this length (fused has a maximum).
bool supports_length(Algorithm algorithm, std::int64_t length);

// smax::softmax, smax::log_softmax or smax::logsumexp.
void run_op(Op op, const TensorView& x, const MutableTensorView& y, const Options& options);

// smax::log_softmax_backward (log) or smax::softmax_backward.
void run_backward(bool log, const TensorView& y, const TensorView& dy, const MutableTensorView& dx,
                  const BackwardOptions& options);

// Names parameterised tests by their dtype: "f32", "bf16", ...
std::string dtype_test_name(const ::testing::TestParamInfo<DType>& param_info);

// "softmax algorithm=tiled axis=-1 T=1 ..." for traces.
std::string describe(Op op, const Options& options);

// An output for `op` on `x` (the logsumexp shape where needed), poisoned.
TestTensor make_output(Op op, const TestTensor& x, const Options& options, Layout layout);

// Runs op on x into a fresh output of `layout`; expects the reference to be met and
// nothing outside the output view to be written. Returns the output.
TestTensor run_and_check(Op op, const TestTensor& x, const Options& options, Layout output_layout,
                         const Expected& expected);

}  // namespace smax::test
