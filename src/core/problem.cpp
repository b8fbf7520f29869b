#include "core/problem.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "smax/error.hpp"

namespace smax::detail {
namespace {

std::string prefix(Op op) { return std::string(to_string(op)) + ": "; }

[[noreturn]] void fail(Op op, Errc code, const std::string& what) { throw Error(code, prefix(op) + what); }

ByteRange byte_range(Op op, const char* name, const TensorView& v) {
  const std::optional<ByteRange> range = reachable_bytes(v);
  if (!range) {
    fail(op, Errc::strides, beyond_address_space(name, v));
  }
  return *range;
}

}  // namespace

std::string beyond_address_space(const char* name, const TensorView& v) {
  return std::string(name) + " strides " + format_list(v.strides()) + " with shape " + format_list(v.shape()) +
         " reach beyond the address space";
}

std::optional<ByteRange> reachable_bytes(const TensorView& v) {
  const auto size = static_cast<std::int64_t>(size_of(v.dtype()));
  std::int64_t low = 0;
  std::int64_t high = 0;
  for (int i = 0; i < v.rank(); ++i) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(v.shape()[static_cast<std::size_t>(i)] - 1, v.strides()[static_cast<std::size_t>(i)], &reach) ||
        __builtin_mul_overflow(reach, size, &reach) ||
        __builtin_add_overflow(reach < 0 ? low : high, reach, reach < 0 ? &low : &high)) {
      return std::nullopt;
    }
  }
  const auto base = reinterpret_cast<std::intptr_t>(v.data());
  std::intptr_t lo = 0;
  std::intptr_t hi = 0;
  if (__builtin_add_overflow(high, size, &high) || __builtin_add_overflow(base, low, &lo) ||
      __builtin_add_overflow(base, high, &hi)) {
    return std::nullopt;
  }
  return ByteRange{lo, hi};
}

// Sorting the dimensions by |stride|, each stride must step over everything the
// smaller ones reach. This is exact for every layout NumPy and PyTorch produce; a
// view that interleaves dimensions in a non-overlapping but irregular way is also
// rejected.
bool overlaps_itself(const TensorView& v) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, extent)
  for (int i = 0; i < v.rank(); ++i) {
    const std::int64_t extent = v.shape()[static_cast<std::size_t>(i)];
    if (extent > 1) dims.emplace_back(std::abs(v.strides()[static_cast<std::size_t>(i)]), extent);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t reach = 0;  // largest offset the smaller dimensions reach
  for (auto [stride, extent] : dims) {
    if (stride <= reach) return true;
    reach += stride * (extent - 1);
  }
  return false;
}

bool same_layout(const TensorView& a, const TensorView& b) {
  if (a.data() != b.data() || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (a.shape()[k] != b.shape()[k]) return false;
    if (a.shape()[k] > 1 && a.strides()[k] != b.strides()[k]) return false;
  }
  return true;
}

std::vector<std::int64_t> output_shape(Op op, std::span<const std::int64_t> shape, int axis, bool keepdims) {
  std::vector<std::int64_t> result(shape.begin(), shape.end());
  if (op == Op::logsumexp && !result.empty()) {
    if (keepdims) result[static_cast<std::size_t>(axis)] = 1;
    else result.erase(result.begin() + axis);
  }
  return result;
}

int normalize_axis(Op op, int axis, int rank) {
  const int r = std::max(rank, 1);  // a scalar softmax behaves as a row of one
  if (axis < -r || axis >= r) {
    fail(op, Errc::axis, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
                             std::to_string(rank) + " (valid: " + std::to_string(-r) + " to " +
                             std::to_string(r - 1) + ")");
  }
  return axis < 0 ? axis + r : axis;
}

std::optional<std::string> temperature_problem(double t, DType dtype) {
  if (!std::isfinite(t) || t <= 0) return "temperature must be finite and > 0, got " + format_double(t);
  if (t < 3e-38) return "temperature " + format_double(t) + " is too small: 1/T overflows float32 (use T >= 3e-38)";
  if (dtype != DType::f64 && t > 0x1p126) {
    return "temperature " + format_double(t) + " is too large for " + std::string(to_string(dtype)) +
           ": 1/T is below float32's normal range (use T <= 8.5e37)";
  }
  if (t > 0x1p1022) return "temperature " + format_double(t) + " is too large: 1/T is below float64's normal range";
  return std::nullopt;
}

void validate_options(Op op, DType dtype, const Options& o, std::int64_t length) {
  if (const std::optional<std::string> problem = temperature_problem(o.temperature, dtype)) {
    fail(op, Errc::option, *problem);
  }
  if (o.threads < 0) fail(op, Errc::option, "threads must be >= 0 (0 = all cores), got " + std::to_string(o.threads));
  const std::string_view algorithm = to_string(o.algorithm);
  if (algorithm == "invalid") {
    fail(op, Errc::option, "unknown algorithm (value " + std::to_string(static_cast<int>(o.algorithm)) + ")");
  }
  if (to_string(o.pass_order) == "invalid") {
    fail(op, Errc::option, "unknown pass order (value " + std::to_string(static_cast<int>(o.pass_order)) + ")");
  }
  if (to_string(o.all_masked) == "invalid") {
    fail(op, Errc::option, "unknown all-masked policy (value " + std::to_string(static_cast<int>(o.all_masked)) + ")");
  }
  if (o.algorithm == Algorithm::fused && length > kFusedMaxLength) {
    fail(op, Errc::option, "algorithm fused holds rows of at most " + std::to_string(kFusedMaxLength) +
                               " elements; the axis has length " + std::to_string(length) +
                               " (use auto, safe, tiled or online)");
  }
}

Problem make_problem(Op op, const TensorView& x, const MutableTensorView& y, const Options& options) {
  for (auto [view, name] : {std::pair<const TensorView*, const char*>{&x, "input"}, {&y, "output"}}) {
    if (size_of(view->dtype()) == 0) {
      fail(op, Errc::dtype, std::string("unsupported ") + name + " dtype (value " +
                                std::to_string(static_cast<int>(view->dtype())) + "); use f32, f64, f16 or bf16");
    }
  }
  if (y.dtype() != x.dtype()) {
    fail(op, Errc::dtype, "output dtype " + std::string(to_string(y.dtype())) + " does not match input dtype " +
                              std::string(to_string(x.dtype())));
  }
  const int axis = normalize_axis(op, options.axis, x.rank());
  const std::int64_t length = x.rank() == 0 ? 1 : x.shape()[static_cast<std::size_t>(axis)];
  validate_options(op, x.dtype(), options, length);

  const std::vector<std::int64_t> expected = output_shape(op, x.shape(), axis, options.keepdims);
  if (!std::equal(expected.begin(), expected.end(), y.shape().begin(), y.shape().end())) {
    fail(op, Errc::shape, "output shape " + format_list(y.shape()) + " does not match the expected " +
                              format_list(expected) + " for input shape " + format_list(x.shape()) +
                              (op == Op::logsumexp ? " reduced over axis " + std::to_string(axis) +
                                                         (options.keepdims ? " with keepdims" : "")
                                                   : std::string()));
  }

  const std::int64_t x_count = x.numel();
  const std::int64_t y_count = y.numel();
  if (x_count > 0 && x.data() == nullptr) {
    fail(op, Errc::null_data, "input data is null but its shape " + format_list(x.shape()) + " is not empty");
  }
  if (y_count > 0 && y.data() == nullptr) {
    fail(op, Errc::null_data, "output data is null but its shape " + format_list(y.shape()) + " is not empty");
  }
  if (y_count > 0) {
    // The reach first: overlaps_itself adds up the same reach unchecked.
    const ByteRange xr = x_count > 0 ? byte_range(op, "input", x) : ByteRange{};
    const ByteRange yr = byte_range(op, "output", y);
    if (overlaps_itself(y)) {
      fail(op, Errc::strides, "output strides " + format_list(y.strides()) + " make elements of shape " +
                                  format_list(y.shape()) + " overlap each other");
    }
    const bool intersect = x_count > 0 && xr.lo < yr.hi && yr.lo < xr.hi;
    if (intersect && (op == Op::logsumexp || !same_layout(x, y))) {
      // Conservative: byte ranges that intersect count, even if the elements interleave.
      fail(op, Errc::overlap,
           "output (data " + format_pointer(y.data()) + ", strides " + format_list(y.strides()) +
               ") overlaps the input (data " + format_pointer(x.data()) + ", strides " + format_list(x.strides()) +
               ", " + std::to_string(xr.hi - xr.lo) + " bytes)" +
               (op == Op::logsumexp ? std::string("; logsumexp needs a separate output")
                                    : std::string("; in place needs the same data pointer, shape and strides")));
    }
  }

  Problem p;
  p.op = op;
  p.dtype = x.dtype();
  p.x = static_cast<const std::byte*>(x.data());
  p.y = static_cast<std::byte*>(y.data());
  p.axis = axis;
  p.inv_temperature = 1.0 / options.temperature;
  p.all_masked = options.all_masked;
  p.length = length;
  if (x.rank() > 0) {
    p.x_axis_stride = x.strides()[static_cast<std::size_t>(axis)];
    if (op != Op::logsumexp) p.y_axis_stride = y.strides()[static_cast<std::size_t>(axis)];
  }

  // The other dimensions index the rows. Extents of 1 drop out; neighbours whose
  // strides line up in both views merge into one.
  p.rows = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (i == axis) continue;
    const auto k = static_cast<std::size_t>(i);
    const std::int64_t extent = x.shape()[k];
    p.rows *= extent;
    if (extent == 1) continue;
    const std::size_t yk = (op == Op::logsumexp && !options.keepdims && i > axis) ? k - 1 : k;
    const std::int64_t xs = x.strides()[k];
    const std::int64_t ys = y.strides()[yk];
    const int last = p.batch_rank - 1;
    if (last >= 0 && p.x_batch_strides[static_cast<std::size_t>(last)] == xs * extent &&
        p.y_batch_strides[static_cast<std::size_t>(last)] == ys * extent) {
      p.batch_shape[static_cast<std::size_t>(last)] *= extent;
      p.x_batch_strides[static_cast<std::size_t>(last)] = xs;
      p.y_batch_strides[static_cast<std::size_t>(last)] = ys;
    } else {
      const auto b = static_cast<std::size_t>(p.batch_rank++);
      p.batch_shape[b] = extent;
      p.x_batch_strides[b] = xs;
      p.y_batch_strides[b] = ys;
    }
  }
  return p;
}

int column_dim(const Problem& p) {
  // A contiguous axis is a row: the row kernels read it in order.
  if (p.length > 1 && (p.x_axis_stride == 1 || p.x_axis_stride == -1)) return -1;
  for (int d = 0; d < p.batch_rank; ++d) {
    const auto k = static_cast<std::size_t>(d);
    if (p.x_batch_strides[k] == 1 && p.y_batch_strides[k] == 1) return d;
  }
  return -1;
}

}  // namespace smax::detail
