#include "smax/info.hpp"

#include <algorithm>
#include <vector>

#include "core/format.hpp"
#include "core/problem.hpp"
#include "plan/planner.hpp"
#include "smax/error.hpp"
#include "smax/tensor.hpp"
#include "smax/version.hpp"

namespace smax {

std::string_view version() noexcept { return SMAX_VERSION_STRING; }

PlanInfo plan(Op op, std::span<const std::int64_t> shape, DType dtype, const Options& options) {
  const TensorView x(nullptr, dtype, shape);  // checks rank and extents
  if (size_of(dtype) == 0) {
    throw Error(Errc::dtype, std::string(to_string(op)) + ": unsupported dtype (value " +
                                 std::to_string(static_cast<int>(dtype)) + "); use f32, f64, f16 or bf16");
  }
  std::int64_t moved_bytes = 0;  // what the planner counts: the input read, the output written
  if (__builtin_mul_overflow(x.numel(), 2 * static_cast<std::int64_t>(size_of(dtype)), &moved_bytes)) {
    throw Error(Errc::shape, std::string(to_string(op)) + ": shape " + detail::format_list(shape) + " of " +
                                 std::string(to_string(dtype)) + " has more bytes than int64 can count");
  }
  const int axis = detail::normalize_axis(op, options.axis, x.rank());
  const std::int64_t length = x.rank() == 0 ? 1 : shape[static_cast<std::size_t>(axis)];
  detail::validate_options(op, dtype, options, length);
  std::int64_t outer_rows = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != axis) outer_rows *= shape[static_cast<std::size_t>(i)];
  }
  // A contiguous tensor: the dimensions after the axis are one contiguous block, which
  // column panels run across when the axis is not the last (and not of length 1).
  std::int64_t inner_extent = 0;
  if (length > 1) {
    for (int i = axis + 1; i < x.rank(); ++i) inner_extent = std::max<std::int64_t>(inner_extent, 1) * shape[static_cast<std::size_t>(i)];
  }
  if (inner_extent == 1) inner_extent = 0;  // extents of 1 drop out: the axis is contiguous
  const detail::Plan p = detail::make_plan(op, dtype, outer_rows, length, inner_extent, options, machine(), /*explain=*/true);
  return PlanInfo{p.algorithm, p.order,   outer_rows, length, p.block, p.chunk, p.panel_width,
                  p.threads,   p.stores, p.reason};
}

}  // namespace smax
