// What the training ops share: argument checks that name the op, several views
// walked together row by row (the axis is the row; the other dimensions, merged where
// every view's strides line up, index the rows), and the row loop over threads.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "smax/dtype.hpp"
#include "smax/error.hpp"
#include "smax/tensor.hpp"

namespace smax::training {

// Errors prefixed with the op's name, as the forward ops do ("softmax_backward: ...").
class Checker {
 public:
  explicit Checker(std::string op) : op_(std::move(op)) {}
  [[noreturn]] void fail(Errc code, const std::string& what) const;

  void supported_dtype(const TensorView& v, const char* name) const;
  void same_dtype(const TensorView& v, const char* name, DType expected, const char* expected_name) const;
  void shape_is(std::span<const std::int64_t> shape, const char* name, std::span<const std::int64_t> expected,
                const std::string& why) const;
  void data_present(const void* data, std::span<const std::int64_t> shape, const char* name) const;
  // An output: no two of its elements share memory.
  void writable(const TensorView& out, const char* name) const;
  // `out` may be `in` itself (same data, shape and strides) when `in_place_ok`;
  // otherwise their bytes must not intersect.
  void no_overlap(const TensorView& out, const char* out_name, const TensorView& in, const char* in_name,
                  bool in_place_ok) const;
  void threads(int threads) const;
  // Normalises `axis` for a tensor of `rank` (rank 0 behaves as a row of one when
  // `scalar_ok`).
  int axis(int axis, int rank, bool scalar_ok) const;

 private:
  // The bytes v reaches; fails where they do not fit the address space.
  detail::ByteRange reach(const TensorView& v, const char* name) const;

  std::string op_;
};

// Up to this many views walked together (cross-entropy: logits, target, loss, grad, log_prob).
inline constexpr int kMaxViews = 5;

using Strides = std::array<std::int64_t, kMaxRank>;

// The rows of a set of views with the same batch shape.
struct RowFold {
  int rank = 0;  // batch dimensions left after merging
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<Strides, kMaxViews> strides{};  // [view][dimension], in elements
  std::int64_t rows = 1;
};

// `batch_shape`: the extents that index the rows; `strides[v]`: view v's strides of
// those dimensions. Extents of 1 drop out; neighbours merge when every view allows.
RowFold fold_rows(std::span<const std::int64_t> batch_shape, std::span<const Strides> strides);

// A view's strides without the entry of `axis` (axis < 0: all of them).
Strides batch_strides(std::span<const std::int64_t> strides, int axis);

// How many rows lie side by side in the fold's innermost dimension where every view
// in `views` has unit stride there: the rows the vector lanes can take one each
// (training/simd/gradient_columns.hpp); 0 where a view does not, or where fewer than
// two would.
std::int64_t lane_columns(const RowFold& fold, std::span<const int> views);

// Element offsets of every view for rows begin, begin + 1, ...: an odometer.
class RowCursor {
 public:
  RowCursor(const RowFold& fold, std::int64_t begin);
  std::int64_t offset(int view) const { return offset_[static_cast<std::size_t>(view)]; }
  void next();

 private:
  const RowFold& fold_;
  std::array<std::int64_t, kMaxRank> index_{};
  std::array<std::int64_t, kMaxViews> offset_{};
};

// Threads to use for `rows` rows of `length` elements: the request (0 = all cores),
// no more than there are rows, and one for small work, where starting threads costs
// more than it saves.
int thread_count(int requested, std::int64_t rows, std::int64_t length);

// Calls body(begin, end) on a fixed contiguous share of [0, rows) per thread
// (detail::for_each_share): results do not depend on `threads`.
template <class Body>
void for_rows(std::int64_t rows, int threads, Body&& body) {
  if (rows <= 0) return;  // (a zero extent would also stop RowCursor's odometer)
  detail::for_each_share(rows, threads, [&](detail::Share share) { body(share.begin, share.end); });
}

// Neumaier's compensated sum in the compute type A, for sums whose terms may have
// either sign (the backward passes). hi() + lo() is the sum to about twice A's
// precision.
template <class A>
class CompensatedSum {
 public:
  void add(A v) {
    const A t = sum_ + v;
    // Once the sum is infinite or NaN, plain IEEE addition decides it (the
    // correction would turn inf into NaN).
    if (std::isfinite(t)) correction_ += std::fabs(sum_) >= std::fabs(v) ? (sum_ - t) + v : (v - t) + sum_;
    sum_ = t;
  }
  A hi() const { return std::isfinite(sum_) ? sum_ + correction_ : sum_; }
  A lo() const { return std::isfinite(sum_) ? correction_ - (hi() - sum_) : A(0); }

 private:
  A sum_ = 0;
  A correction_ = 0;
};

}  // namespace smax::training
