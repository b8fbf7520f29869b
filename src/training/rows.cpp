#include "training/rows.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/format.hpp"
#include "core/problem.hpp"

namespace smax::training {

using detail::format_list;
using detail::format_pointer;

void Checker::fail(Errc code, const std::string& what) const { throw Error(code, op_ + ": " + what); }

void Checker::supported_dtype(const TensorView& v, const char* name) const {
  if (size_of(v.dtype()) == 0) {
    fail(Errc::dtype, std::string("unsupported ") + name + " dtype (value " +
                          std::to_string(static_cast<int>(v.dtype())) + "); use f32, f64, f16 or bf16");
  }
}

void Checker::same_dtype(const TensorView& v, const char* name, DType expected, const char* expected_name) const {
  supported_dtype(v, name);
  if (v.dtype() != expected) {
    fail(Errc::dtype, std::string(name) + " dtype " + std::string(to_string(v.dtype())) + " does not match " +
                          expected_name + " dtype " + std::string(to_string(expected)));
  }
}

void Checker::shape_is(std::span<const std::int64_t> shape, const char* name, std::span<const std::int64_t> expected,
                       const std::string& why) const {
  if (!std::equal(shape.begin(), shape.end(), expected.begin(), expected.end())) {
    fail(Errc::shape, std::string(name) + " shape " + format_list(shape) + " does not match the expected " +
                          format_list(expected) + " (" + why + ")");
  }
}

void Checker::data_present(const void* data, std::span<const std::int64_t> shape, const char* name) const {
  const bool empty = std::any_of(shape.begin(), shape.end(), [](std::int64_t e) { return e == 0; });
  if (data == nullptr && !empty) {
    fail(Errc::null_data, std::string(name) + " data is null but its shape " + format_list(shape) + " is not empty");
  }
}

detail::ByteRange Checker::reach(const TensorView& v, const char* name) const {
  const std::optional<detail::ByteRange> r = detail::reachable_bytes(v);
  if (!r) fail(Errc::strides, detail::beyond_address_space(name, v));
  return *r;
}

void Checker::writable(const TensorView& out, const char* name) const {
  if (out.numel() == 0) return;
  reach(out, name);  // first: overlaps_itself adds up the same reach unchecked
  if (detail::overlaps_itself(out)) {
    fail(Errc::strides, std::string(name) + " strides " + format_list(out.strides()) + " make elements of shape " +
                            format_list(out.shape()) + " overlap each other");
  }
}

void Checker::no_overlap(const TensorView& out, const char* out_name, const TensorView& in, const char* in_name,
                         bool in_place_ok) const {
  if (out.numel() == 0 || in.numel() == 0) return;
  if (in_place_ok && detail::same_layout(out, in)) return;
  const detail::ByteRange a = reach(out, out_name);
  const detail::ByteRange b = reach(in, in_name);
  if (a.lo < b.hi && b.lo < a.hi) {
    // Conservative: byte ranges that intersect count, even if the elements interleave.
    fail(Errc::overlap, std::string(out_name) + " (data " + format_pointer(out.data()) + ", strides " +
                            format_list(out.strides()) + ") overlaps " + in_name + " (data " +
                            format_pointer(in.data()) + ", strides " + format_list(in.strides()) + ")" +
                            (in_place_ok ? "; in place needs the same data pointer, shape and strides"
                                         : "; they must not share memory"));
  }
}

void Checker::threads(int threads) const {
  if (threads < 0) fail(Errc::option, "threads must be >= 0 (0 = all cores), got " + std::to_string(threads));
}

int Checker::axis(int axis, int rank, bool scalar_ok) const {
  if (rank == 0 && !scalar_ok) fail(Errc::axis, "the logits have rank 0; they need a class axis");
  const int r = std::max(rank, 1);
  if (axis < -r || axis >= r) {
    fail(Errc::axis, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank) +
                         " (valid: " + std::to_string(-r) + " to " + std::to_string(r - 1) + ")");
  }
  return axis < 0 ? axis + r : axis;
}

Strides batch_strides(std::span<const std::int64_t> strides, int axis) {
  Strides out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < strides.size(); ++i) {
    if (static_cast<int>(i) != axis) out[k++] = strides[i];
  }
  return out;
}

RowFold fold_rows(std::span<const std::int64_t> batch_shape, std::span<const Strides> strides) {
  RowFold f;
  for (std::size_t i = 0; i < batch_shape.size(); ++i) {
    const std::int64_t extent = batch_shape[i];
    f.rows *= extent;
    if (extent == 1) continue;
    const int last = f.rank - 1;
    bool merges = last >= 0;
    for (std::size_t v = 0; v < strides.size() && merges; ++v) {
      merges = f.strides[v][static_cast<std::size_t>(last)] == strides[v][i] * extent;
    }
    if (merges) {
      const auto l = static_cast<std::size_t>(last);
      f.shape[l] *= extent;
      for (std::size_t v = 0; v < strides.size(); ++v) f.strides[v][l] = strides[v][i];
    } else {
      const auto b = static_cast<std::size_t>(f.rank++);
      f.shape[b] = extent;
      for (std::size_t v = 0; v < strides.size(); ++v) f.strides[v][b] = strides[v][i];
    }
  }
  return f;
}

RowCursor::RowCursor(const RowFold& fold, std::int64_t begin) : fold_(fold) {
  std::int64_t rest = begin;
  for (int d = fold.rank - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    index_[k] = rest % fold.shape[k];
    rest /= fold.shape[k];
    for (std::size_t v = 0; v < static_cast<std::size_t>(kMaxViews); ++v) offset_[v] += index_[k] * fold.strides[v][k];
  }
}

void RowCursor::next() {
  for (int d = fold_.rank - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    for (std::size_t v = 0; v < static_cast<std::size_t>(kMaxViews); ++v) offset_[v] += fold_.strides[v][k];
    if (++index_[k] < fold_.shape[k]) return;
    for (std::size_t v = 0; v < static_cast<std::size_t>(kMaxViews); ++v) offset_[v] -= index_[k] * fold_.strides[v][k];
    index_[k] = 0;
  }
}

std::int64_t lane_columns(const RowFold& fold, std::span<const int> views) {
  if (fold.rank == 0) return 0;
  const auto inner = static_cast<std::size_t>(fold.rank - 1);
  for (int v : views) {
    if (fold.strides[static_cast<std::size_t>(v)][inner] != 1) return 0;
  }
  return fold.shape[inner] >= 2 ? fold.shape[inner] : 0;
}

int thread_count(int requested, std::int64_t rows, std::int64_t length) {
  // Below this many elements a parallel region costs more than the work.
  constexpr std::int64_t kMinParallelElements = 1 << 15;
  if (rows <= 1 || rows * std::max<std::int64_t>(length, 1) < kMinParallelElements) return 1;
  const int all = requested > 0 ? requested : omp_get_max_threads();
  return static_cast<int>(std::min<std::int64_t>(all, rows));
}

}  // namespace smax::training
