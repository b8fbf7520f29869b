// softmax_backward and log_softmax_backward: per row, one pass reduces (sum(y * dy)
// or sum(dy)), one pass writes dx. Nothing is stored in between.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <hwy/cache_control.h>

#include "core/cache_line.hpp"
#include "core/problem.hpp"
#include "cpu/element.hpp"
#include "plan/planner.hpp"
#include "smax/info.hpp"
#include "smax/training.hpp"
#include "training/rows.hpp"
#include "training/simd/gradient_columns.hpp"
#include "training/simd/gradient_rows.hpp"

namespace smax {
namespace {

using training::Checker;
using training::CompensatedSum;
using training::RowCursor;
using training::RowFold;

// The arithmetic type: double for f32, f16 and bf16 (the products y * dy of two
// floats are exact in it); long double for f64, so that dy - s, which cancels where
// the gradient passes through zero, keeps 11 bits beyond the output's precision.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, double>, long double, double>;

template <class T>
Compute<T> load(const T* p) {
  return cpu::Element<T>::template load<Compute<T>>(*p);
}

template <class T>
void store(T* p, Compute<T> v) {
  if constexpr (std::is_same_v<T, double>) {
    *p = static_cast<double>(v);
  } else {
    *p = cpu::Element<T>::template store<double>(static_cast<double>(v));
  }
}

enum class Kind { softmax, log_softmax };

struct Request {
  Kind kind;
  DType dtype;
  const std::byte* y;
  const std::byte* dy;
  std::byte* dx;
  std::int64_t length;
  std::int64_t y_stride, dy_stride, dx_stride;  // along the axis, in elements
  RowFold fold;                                 // views: 0 y, 1 dy, 2 dx
  double inv_t;
  int threads;
  bool stream;  // dx's whole vectors around the cache (the vectorised rows)
  // > 0: the rows lie across the vector lanes (training/simd/gradient_columns.hpp),
  // this many side by side: the fold's innermost dimension, of unit stride in y, dy
  // and dx, where the axis itself is not.
  std::int64_t columns;
};

// BackwardOptions::stores: automatic streams by the bytes the call moves (two reads
// and a write), beyond detail::kBackwardStreamingLlcDivisor's share of the L3, in rows of at
// least detail::kShortestStreamedDxRowBytes.
bool streams_dx(Stores stores, DType dtype, std::int64_t elements, std::int64_t length) {
  const auto bytes = static_cast<std::int64_t>(size_of(dtype));
  return detail::training_output_streams(stores, 3 * elements * bytes,
                                         detail::backward_streaming_threshold_bytes(machine()), length * bytes,
                                         detail::kShortestStreamedDxRowBytes);
}

Request validate(Kind kind, const TensorView& y, const TensorView& dy, const MutableTensorView& dx,
                 const BackwardOptions& o) {
  const char* y_name = kind == Kind::softmax ? "y" : "log_y";
  const Checker check(kind == Kind::softmax ? "softmax_backward" : "log_softmax_backward");
  check.supported_dtype(y, y_name);
  check.same_dtype(dy, "dy", y.dtype(), y_name);
  check.same_dtype(dx, "dx", y.dtype(), y_name);
  const int axis = check.axis(o.axis, y.rank(), true);
  check.shape_is(dy.shape(), "dy", y.shape(), std::string("the shape of ") + y_name);
  check.shape_is(dx.shape(), "dx", y.shape(), std::string("the shape of ") + y_name);
  if (const std::optional<std::string> problem = detail::temperature_problem(o.temperature, y.dtype())) {
    check.fail(Errc::option, *problem);
  }
  check.threads(o.threads);
  check.data_present(y.data(), y.shape(), y_name);
  check.data_present(dy.data(), dy.shape(), "dy");
  check.data_present(dx.data(), dx.shape(), "dx");
  check.writable(dx, "dx");
  // dx[i] is written after y[i] and dy[i] are read, and the reduction has read the
  // whole row before: in place over either input is safe.
  check.no_overlap(dx, "dx", y, y_name, true);
  check.no_overlap(dx, "dx", dy, "dy", true);

  Request r{};
  r.kind = kind;
  r.dtype = y.dtype();
  r.y = static_cast<const std::byte*>(y.data());
  r.dy = static_cast<const std::byte*>(dy.data());
  r.dx = static_cast<std::byte*>(dx.data());
  r.inv_t = 1.0 / o.temperature;
  r.length = 1;
  const std::size_t rank = static_cast<std::size_t>(y.rank());
  std::vector<std::int64_t> batch;
  if (rank > 0) {
    const auto a = static_cast<std::size_t>(axis);
    r.length = y.shape()[a];
    r.y_stride = y.strides()[a];
    r.dy_stride = dy.strides()[a];
    r.dx_stride = dx.strides()[a];
    for (std::size_t i = 0; i < rank; ++i) {
      if (i != a) batch.push_back(y.shape()[i]);
    }
  }
  const training::Strides strides[] = {training::batch_strides(y.strides(), axis),
                                       training::batch_strides(dy.strides(), axis),
                                       training::batch_strides(dx.strides(), axis)};
  r.fold = training::fold_rows(batch, strides);
  r.threads = training::thread_count(o.threads, r.fold.rows, r.length);
  r.stream = streams_dx(o.stores, r.dtype, r.fold.rows * r.length, r.length);
  const bool axis_contiguous = r.y_stride == 1 && r.dy_stride == 1 && r.dx_stride == 1;
  constexpr int kViews[] = {0, 1, 2};  // y, dy, dx
  r.columns = r.dtype != DType::f64 && !axis_contiguous ? training::lane_columns(r.fold, kViews) : 0;
  return r;
}

// dx = y * (dy - s) / T with s = sum(y * dy). s is kept as hi + lo: where dy is
// close to s, dy - hi is exact (Sterbenz) and subtracting lo keeps the result exact
// to the compute type's precision.
template <class T>
void softmax_backward_row(const T* y, std::ptrdiff_t ys, const T* dy, std::ptrdiff_t dys, T* dx, std::ptrdiff_t dxs,
                          std::int64_t n, Compute<T> inv_t) {
  CompensatedSum<Compute<T>> s;
  for (std::int64_t i = 0; i < n; ++i) s.add(load(y + i * ys) * load(dy + i * dys));
  const Compute<T> hi = s.hi();
  const Compute<T> lo = s.lo();
  for (std::int64_t i = 0; i < n; ++i) {
    Compute<T> v = load(y + i * ys) * ((load(dy + i * dys) - hi) - lo);
    if (inv_t != 1) v *= inv_t;
    store(dx + i * dxs, v);
  }
}

template <class C>
C exp_of(C v) {
  if constexpr (std::is_same_v<C, long double>) return expl(v);
  else return std::exp(v);
}

// dx = (dy - exp(log_y) * S) / T with S = sum(dy).
template <class T>
void log_softmax_backward_row(const T* ly, std::ptrdiff_t lys, const T* dy, std::ptrdiff_t dys, T* dx,
                              std::ptrdiff_t dxs, std::int64_t n, Compute<T> inv_t) {
  CompensatedSum<Compute<T>> s;
  for (std::int64_t i = 0; i < n; ++i) s.add(load(dy + i * dys));
  const Compute<T> sum = s.hi();
  for (std::int64_t i = 0; i < n; ++i) {
    Compute<T> v = load(dy + i * dys) - exp_of(load(ly + i * lys)) * sum;
    if (inv_t != 1) v *= inv_t;
    store(dx + i * dxs, v);
  }
}

// Contiguous rows of f32, f16 and bf16 go to the vectorised kernels
// (training/simd/gradient_rows.hpp): the sums in double lanes, the writes in float
// lanes where that provably meets the same bars (double lanes elsewhere); rows along
// a strided axis with a contiguous dimension beside it lie across the lanes
// (training/simd/gradient_columns.hpp); f64 (long double arithmetic) and other
// strided rows stay here.
template <class T>
inline constexpr bool kSimdRows = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Where the call streams (its tensors lie far beyond the cache), the sum pass fetches
// the first quarter of the next row and the write pass the rest (where `next` names
// one: log_softmax_backward's rows; next_row_prefetch_bytes): about their shares
// of the row's time, so that the memory system reads throughout (bf16 4096 x 32000 on
// two threads: 8% faster than the write pass alone fetching). In cache the sum pass's
// prefetches only cost (3%).
template <class T>
void simd_row(Kind kind, const T* y, const T* dy, T* dx, std::int64_t n, double inv_t,
              const training::simd::NextRow& next, bool stream) {
  const auto length = static_cast<std::size_t>(n);
  constexpr std::size_t kLine = detail::kCacheLineBytes;
  training::simd::NextRow sum_share{}, write_share = next;
  if (stream) {
    sum_share = next;
    sum_share.end = write_share.begin = next.bytes / 4 / kLine * kLine;
  }
  if (kind == Kind::softmax) {
    training::simd::softmax_backward_write(y, dy, dx, length, training::simd::sum_of_products(y, dy, length, sum_share),
                                           inv_t, write_share, stream);
  } else {
    training::simd::log_softmax_backward_write(y, dy, dx, length, training::simd::sum_of(dy, length, sum_share).hi,
                                               inv_t, write_share, stream);
  }
}

// How many bytes of the next row's inputs (of each) a row's write pass should pull
// into L2: its reduction pass then reads cache instead of memory, while this write
// pass keeps the memory busy. The whole row where both rows' inputs and this row's
// output fit in L2 together; otherwise the head that fits beside this row's three
// (more would evict this row's inputs before they are read); 0 where none fits.
// softmax_backward fetches nothing: its write pass has too little arithmetic to hide
// the fetches, which then slowed its rows from DRAM (f32 rows of 32 KB to 256 KB on
// one thread 1.15-1.32x faster without them on AMD Zen 4, bf16 rows of 64 KB to 256
// KB on two threads 1.04-1.18x; docs/PERFORMANCE.md, thirty-second and fortieth
// sessions), while log_softmax_backward's exps hide them (0.79-0.81x
// without). Its kernels keep their fetching loops (sum_of_products,
// softmax_backward_write): this is the one place that would turn them back on.
template <class T>
std::size_t next_row_prefetch_bytes(Kind kind, std::int64_t length) {
  if (kind == Kind::softmax) return 0;
  const auto row_bytes = static_cast<std::int64_t>(sizeof(T)) * length;
  const std::int64_t room = (machine().l2_bytes - 3 * row_bytes) / 2;
  return room <= 0 ? 0 : static_cast<std::size_t>(std::min(room, row_bytes));
}

// Contiguous rows of at most kLongestBatchedRow elements go kRowBatch at a time
// through the batch kernels (training/simd/gradient_rows.hpp's *_rows), which share a
// row's fixed costs (its dispatches, its sum's join) across the batch; the same bits
// as a row at a time. Longer rows go a row a call, where the write pass can fetch the
// next row's head.
constexpr std::int64_t kLongestBatchedRow = 1024;
constexpr std::int64_t kRowBatch = 64;

template <class T>
void simd_rows(Kind kind, const T* y, const T* dy, T* dx, const training::simd::BackwardRows& rows, std::int64_t n,
               std::int64_t count, double inv_t, bool stream) {
  const auto length = static_cast<std::size_t>(n);
  const auto batch = static_cast<std::size_t>(count);
  if (kind == Kind::softmax) training::simd::softmax_backward_rows(y, dy, dx, rows, length, batch, inv_t, stream);
  else training::simd::log_softmax_backward_rows(y, dy, dx, rows, length, batch, inv_t, stream);
}

// Threads share rows across the lanes in pieces of at most this many columns (any
// split gives the same bits: each lane is its own row).
constexpr std::int64_t kColumnsPerPiece = 512;

template <class T>
void run_columns(const Request& r) {
  const auto* y = reinterpret_cast<const T*>(r.y);
  const auto* dy = reinterpret_cast<const T*>(r.dy);
  auto* dx = reinterpret_cast<T*>(r.dx);
  const training::simd::ColumnStrides strides{r.y_stride, r.dy_stride, r.dx_stride};
  const std::int64_t pieces = (r.columns + kColumnsPerPiece - 1) / kColumnsPerPiece;
  const std::int64_t groups = r.fold.rows / r.columns;
  training::for_rows(groups * pieces, r.threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t piece = begin; piece < end; ++piece) {
      const std::int64_t first = piece % pieces * kColumnsPerPiece;
      const auto count = static_cast<std::size_t>(std::min(kColumnsPerPiece, r.columns - first));
      const RowCursor at(r.fold, piece / pieces * r.columns + first);
      const auto n = static_cast<std::size_t>(r.length);
      if (r.kind == Kind::softmax) {
        training::simd::softmax_backward_columns(y + at.offset(0), dy + at.offset(1), dx + at.offset(2), strides, n,
                                                 count, r.inv_t);
      } else {
        training::simd::log_softmax_backward_columns(y + at.offset(0), dy + at.offset(1), dx + at.offset(2), strides,
                                                     n, count, r.inv_t);
      }
    }
  });
}

template <class T>
void run_typed(const Request& r) {
  if constexpr (kSimdRows<T>) {
    if (r.columns > 0) return run_columns<T>(r);
  }
  const auto* y = reinterpret_cast<const T*>(r.y);
  const auto* dy = reinterpret_cast<const T*>(r.dy);
  auto* dx = reinterpret_cast<T*>(r.dx);
  const auto inv_t = static_cast<Compute<T>>(r.inv_t);
  const bool contiguous = r.y_stride == 1 && r.dy_stride == 1 && r.dx_stride == 1;
  const std::size_t prefetch_bytes = kSimdRows<T> && contiguous ? next_row_prefetch_bytes<T>(r.kind, r.length) : 0;
  const bool batched = kSimdRows<T> && contiguous && r.length <= kLongestBatchedRow;
  training::for_rows(r.fold.rows, r.threads, [&](std::int64_t begin, std::int64_t end) {
    RowCursor at(r.fold, begin);
    if constexpr (kSimdRows<T>) {
      if (batched) {
        std::int64_t offsets[3][kRowBatch];
        for (std::int64_t first = begin; first < end; first += kRowBatch) {
          const std::int64_t count = std::min(kRowBatch, end - first);
          for (std::int64_t j = 0; j < count; ++j, at.next()) {
            for (int view = 0; view < 3; ++view) offsets[view][j] = at.offset(view);
          }
          simd_rows(r.kind, y, dy, dx, {offsets[0], offsets[1], offsets[2], prefetch_bytes}, r.length, count, r.inv_t,
                    r.stream);
        }
        if (r.stream) hwy::FlushStream();  // the batches' streaming stores, once
        return;
      }
    }
    for (std::int64_t row = begin; row < end; ++row, at.next()) {
      if constexpr (kSimdRows<T>) {
        if (contiguous) {
          training::simd::NextRow next;
          if (prefetch_bytes > 0 && row + 1 < end) {
            RowCursor after = at;
            after.next();
            next = {y + after.offset(0), dy + after.offset(1), prefetch_bytes};
          }
          simd_row(r.kind, y + at.offset(0), dy + at.offset(1), dx + at.offset(2), r.length, r.inv_t, next, r.stream);
          continue;
        }
      }
      if (r.kind == Kind::softmax) {
        softmax_backward_row(y + at.offset(0), r.y_stride, dy + at.offset(1), r.dy_stride, dx + at.offset(2),
                             r.dx_stride, r.length, inv_t);
      } else {
        log_softmax_backward_row(y + at.offset(0), r.y_stride, dy + at.offset(1), r.dy_stride, dx + at.offset(2),
                                 r.dx_stride, r.length, inv_t);
      }
    }
    if (r.stream) hwy::FlushStream();  // the rows' streaming stores (simd_row's), once
  });
}

void run(const Request& r) {
  if (r.fold.rows == 0 || r.length == 0) return;
  switch (r.dtype) {
    case DType::f32: return run_typed<float>(r);
    case DType::f64: return run_typed<double>(r);
    case DType::f16: return run_typed<half>(r);
    case DType::bf16: return run_typed<bfloat16>(r);
  }
}

}  // namespace

void softmax_backward(const TensorView& y, const TensorView& dy, const MutableTensorView& dx,
                      const BackwardOptions& options) {
  run(validate(Kind::softmax, y, dy, dx, options));
}

void log_softmax_backward(const TensorView& log_y, const TensorView& dy, const MutableTensorView& dx,
                          const BackwardOptions& options) {
  run(validate(Kind::log_softmax, log_y, dy, dx, options));
}

}  // namespace smax
