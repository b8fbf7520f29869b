// The operations. Every function validates all of its arguments before it writes
// anything, and throws smax::Error naming the bad argument.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"

namespace smax {

// y = softmax(x / T) along options.axis. y has x's shape and dtype, any
// non-self-overlapping strides; y may be x itself (same data and strides).
void softmax(const TensorView& x, const MutableTensorView& y, const Options& options = {});

// y = x / T - logsumexp(x / T) along options.axis. Same rules as softmax.
void log_softmax(const TensorView& x, const MutableTensorView& y, const Options& options = {});

// y = log(sum(exp(x / T))) over options.axis, which is removed from the shape
// (kept as 1 with options.keepdims). An empty axis gives -inf. y must not overlap x.
void logsumexp(const TensorView& x, const MutableTensorView& y, const Options& options = {});

// The shape `op` writes for an input of `shape`: the same, or for logsumexp without
// the axis (or with it as 1 under keepdims). Throws smax::Error for a bad axis.
std::vector<std::int64_t> output_shape(Op op, std::span<const std::int64_t> shape, const Options& options = {});

// One contiguous row (options.axis must be 0 or -1).
void softmax(std::span<const float> x, std::span<float> y, const Options& options = {});
void softmax(std::span<const double> x, std::span<double> y, const Options& options = {});
void softmax(std::span<const half> x, std::span<half> y, const Options& options = {});
void softmax(std::span<const bfloat16> x, std::span<bfloat16> y, const Options& options = {});
void log_softmax(std::span<const float> x, std::span<float> y, const Options& options = {});
void log_softmax(std::span<const double> x, std::span<double> y, const Options& options = {});
void log_softmax(std::span<const half> x, std::span<half> y, const Options& options = {});
void log_softmax(std::span<const bfloat16> x, std::span<bfloat16> y, const Options& options = {});
float logsumexp(std::span<const float> x, const Options& options = {});
double logsumexp(std::span<const double> x, const Options& options = {});
half logsumexp(std::span<const half> x, const Options& options = {});
bfloat16 logsumexp(std::span<const bfloat16> x, const Options& options = {});

}  // namespace smax
