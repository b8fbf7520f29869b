// A validated request, reduced to rows: any axis of any strided tensor becomes
// `rows` independent rows of `length` elements (the non-axis dimensions, collapsed
// where their strides allow, index the rows).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "smax/info.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"

namespace smax::detail {

struct Problem {
  Op op = Op::softmax;
  DType dtype = DType::f32;
  const std::byte* x = nullptr;
  std::byte* y = nullptr;
  std::int64_t length = 1;          // elements along the axis
  std::int64_t x_axis_stride = 0;   // elements
  std::int64_t y_axis_stride = 0;   // elements; unused by logsumexp
  std::int64_t rows = 1;            // product of batch_shape
  int batch_rank = 0;
  std::array<std::int64_t, kMaxRank> batch_shape{};
  std::array<std::int64_t, kMaxRank> x_batch_strides{};  // elements
  std::array<std::int64_t, kMaxRank> y_batch_strides{};  // elements
  int axis = 0;                     // normalised; for messages and plans
  double inv_temperature = 1.0;
  AllMasked all_masked = AllMasked::nan;
};

// The batch dimension whose stride is 1 in both x and y when the axis itself is not
// contiguous (a non-last axis of a contiguous tensor): the problem can run as column
// panels across it (cpu/simd/f32_columns.hpp). -1 if there is none.
int column_dim(const Problem& p);

// Checks every argument (throws smax::Error naming the first bad one) and builds the
// Problem. Writes nothing.
Problem make_problem(Op op, const TensorView& x, const MutableTensorView& y, const Options& options);

// What is wrong with a temperature for rows of `dtype`, or nullopt: finite, from 3e-38
// (1/T finite in float) to 2^126, about 8.5e37, for the float kernels (f32, f16,
// bf16), which multiply by 1/T split into two floats, so that 1/T must be a normal
// float (subnormal or 0 it lost its precision, and gave NaN); f64 rows to 2^1022.
// Shared with the training ops, whose temperature pairs with the forward op's.
std::optional<std::string> temperature_problem(double temperature, DType dtype);

// The checks that depend on options alone, shared with plan().
void validate_options(Op op, DType dtype, const Options& options, std::int64_t length);

// The shape `op` writes for an input of `shape` reduced along the normalised `axis`.
std::vector<std::int64_t> output_shape(Op op, std::span<const std::int64_t> shape, int axis, bool keepdims);

// Normalises `axis` for a tensor of `rank` (rank 0 behaves as rank 1).
int normalize_axis(Op op, int axis, int rank);

// View checks, shared with the training ops (src/training/).
// The byte range [lo, hi) a view can touch.
struct ByteRange {
  std::intptr_t lo = 0;
  std::intptr_t hi = 0;
};
// nullopt if the view's reach does not fit in the address space.
std::optional<ByteRange> reachable_bytes(const TensorView& v);
// The error message for a view whose reach does not fit: "<name> strides [...] with
// shape [...] reach beyond the address space".
std::string beyond_address_space(const char* name, const TensorView& v);
// True if two different indices of the view can address the same element.
bool overlaps_itself(const TensorView& v);
// Same data pointer, shape and strides (strides of extent-1 dimensions ignored).
bool same_layout(const TensorView& a, const TensorView& b);

}  // namespace smax::detail
