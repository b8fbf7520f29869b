// cross_entropy: per sample (a row along the class axis), one read of the logits for
// their (max, sum) and, only when an output or the smoothed loss needs it, one more
// read that writes the gradient and the log-probabilities.
//
// Every form of the loss is -sum_c a_c * log p_c for coefficients a_c >= 0:
//   class index t:  a_c = (1 - s) * w_t * [c == t] + (s / C) * w_c
//   probabilities:  a_c = w_c * ((1 - s) * y_c + s / C)
// (s: label smoothing, w: class weights or 1), so that
//   loss = S * log(d) + sum_c a_c * (m - x_c),   S = sum_c a_c,
//   d(loss)/dx_c = S * p_c - a_c,
// with m the row's max and d = sum(exp(x - m)). Both loss terms are >= 0: no
// cancellation, and log(d) = log1p(d - 1) stays exact when the target dominates.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>

#include "core/format.hpp"
#include "core/stats.hpp"
#include "cpu/element.hpp"
#include "cpu/passes.hpp"
#include "plan/planner.hpp"
#include "smax/info.hpp"
#include "smax/training.hpp"
#include "training/rows.hpp"
#include "training/simd/gradient_columns.hpp"
#include "training/simd/gradient_rows.hpp"

namespace smax {
namespace {

using detail::Stats;
using training::Checker;
using training::RowCursor;
using training::RowFold;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Views of the row fold.
enum View : int { kLogits = 0, kTarget = 1, kLoss = 2, kGrad = 3, kLogProb = 4 };

struct Request {
  DType dtype = DType::f32;
  const std::byte* logits = nullptr;
  std::int64_t classes = 0;
  std::array<std::int64_t, training::kMaxViews> class_stride{};  // along the class axis; 0 for per-row views
  RowFold fold;

  bool index_targets = true;
  IndexType index_type = IndexType::i64;
  const void* target = nullptr;
  std::optional<std::int64_t> ignore_index;

  const std::byte* weight = nullptr;  // null: every weight is 1
  std::int64_t weight_stride = 0;
  double smoothing = 0;
  Reduction reduction = Reduction::mean;

  std::byte* loss = nullptr;
  std::byte* grad = nullptr;
  std::byte* log_prob = nullptr;

  double weight_total = 0;  // the mean's divisor
  int threads = 1;
  // Whether the call's gradient, were it not written over the logits, would stream
  // (streams_grad): the rule for stored exps takes this, not `stream`, so that in
  // place or not gives the same bits.
  bool grad_call_streams = false;
  bool stream = false;  // the gradient's whole vectors around the cache (stored exps' rows)
  // > 0: the samples lie across the vector lanes (training/simd/gradient_columns.hpp),
  // this many side by side: the fold's innermost dimension, of unit stride in the
  // logits (and the gradient and log-probabilities asked for), where the class axis is
  // not.
  std::int64_t columns = 0;
};

// Integer targets stand in as a TensorView of the same element size for the byte
// range checks (which look at sizes and strides only, never at values).
TensorView as_sized_view(const IndexView& v) {
  return TensorView(v.data(), v.type() == IndexType::i64 ? DType::f64 : DType::f32, v.shape(), v.strides());
}

std::int64_t index_at(const void* base, IndexType type, std::int64_t offset) {
  if (type == IndexType::i64) return static_cast<const std::int64_t*>(base)[offset];
  return static_cast<const std::int32_t*>(base)[offset];
}

template <class T>
double load_double(const std::byte* base, std::int64_t offset) {
  return cpu::Element<T>::template load<double>(reinterpret_cast<const T*>(base)[offset]);
}

double weight_of(const Request& r, std::int64_t c) {
  if (r.weight == nullptr) return 1.0;
  switch (r.dtype) {
    case DType::f32: return load_double<float>(r.weight, c * r.weight_stride);
    case DType::f64: return load_double<double>(r.weight, c * r.weight_stride);
    case DType::f16: return load_double<half>(r.weight, c * r.weight_stride);
    case DType::bf16: return load_double<bfloat16>(r.weight, c * r.weight_stride);
  }
  return kNaN;
}

void store_as(DType dtype, std::byte* base, std::int64_t offset, double v) {
  switch (dtype) {
    case DType::f32: reinterpret_cast<float*>(base)[offset] = static_cast<float>(v); return;
    case DType::f64: reinterpret_cast<double*>(base)[offset] = v; return;
    case DType::f16: reinterpret_cast<half*>(base)[offset] = to_half(static_cast<float>(v)); return;
    case DType::bf16: reinterpret_cast<bfloat16*>(base)[offset] = to_bfloat16(static_cast<float>(v)); return;
  }
}

// CrossEntropyOptions::stores, over the logits and the gradient, by the forward ops'
// rule (detail::streaming_threshold_bytes). Its logits come hot from the matmul before
// it more often than not, its gradient buffer less often. On the Intel Xeon VM,
// streamed over cached, two threads (docs/PERFORMANCE.md, twenty-third session): 62
// MiB calls (f32 256 x 32000, 64 x 128256; bf16 128 x 128256) with the logits in cache
// and the gradient buffer not 1.12-1.29x, from DRAM 1.10-1.28x, all in cache
// 0.90-1.04x; 16 MiB calls 1.11-1.24x, 1.08-1.27x, but 0.75-1.00x all in cache, where
// an output that fits may also be read from cache by the next op. (Until then: a
// quarter of the reported L3, uncapped: 120 MiB there.) A gradient in place over the
// logits never streams: its lines are in cache already, read by the same pass
// (Request::stream is false there; Request::grad_call_streams is this rule's answer).
// Rows under detail::kShortestStreamedGradRowBytes never stream under automatic.
bool streams_grad(Stores stores, const Request& r) {
  if (r.grad == nullptr) return false;
  const std::int64_t moved = 2 * r.fold.rows * r.classes * static_cast<std::int64_t>(size_of(r.dtype));
  return detail::training_output_streams(stores, moved, detail::streaming_threshold_bytes(machine()),
                                         r.classes * static_cast<std::int64_t>(size_of(r.dtype)),
                                         detail::kShortestStreamedGradRowBytes);
}

// Everything but the tensors' values: dtypes, shapes, axis, options, null data,
// overlaps. Fills the request; the targets are checked afterwards.
Request validate(const Checker& check, const TensorView& logits, const TensorView* probabilities,
                 const IndexView* indices, const MutableTensorView& loss, const CrossEntropyOptions& o,
                 const CrossEntropyOutputs& out) {
  check.supported_dtype(logits, "logits");
  const int axis = check.axis(o.axis, logits.rank(), false);
  check.data_present(logits.data(), logits.shape(), "logits");
  const auto a = static_cast<std::size_t>(axis);
  std::vector<std::int64_t> batch;
  for (std::size_t i = 0; i < static_cast<std::size_t>(logits.rank()); ++i) {
    if (i != a) batch.push_back(logits.shape()[i]);
  }
  const std::string class_axis_note = "the logits' shape " + detail::format_list(logits.shape()) +
                                      " without the class axis " + std::to_string(axis);
  if (indices != nullptr) {
    if (indices->type() != IndexType::i64 && indices->type() != IndexType::i32) {
      check.fail(Errc::dtype, "unsupported target index type (value " +
                                  std::to_string(static_cast<int>(indices->type())) + "); use i64 or i32");
    }
    check.shape_is(indices->shape(), "target", batch, class_axis_note);
    check.data_present(indices->data(), indices->shape(), "target");
  } else {
    check.same_dtype(*probabilities, "target", logits.dtype(), "logits");
    check.shape_is(probabilities->shape(), "target", logits.shape(),
                   "probability targets have the logits' shape");
    check.data_present(probabilities->data(), probabilities->shape(), "target");
    if (o.ignore_index) {
      check.fail(Errc::option, "ignore_index (" + std::to_string(*o.ignore_index) +
                                   ") applies to class-index targets only, not to probabilities");
    }
  }
  const std::int64_t classes = logits.shape()[a];
  if (o.weight) {
    check.same_dtype(*o.weight, "weight", logits.dtype(), "logits");
    const std::int64_t expected[] = {classes};
    check.shape_is(o.weight->shape(), "weight", expected, "one weight per class");
    check.data_present(o.weight->data(), o.weight->shape(), "weight");
  }
  if (to_string(o.reduction) == "invalid") {
    check.fail(Errc::option, "unknown reduction (value " + std::to_string(static_cast<int>(o.reduction)) +
                                 "); use none, sum or mean");
  }
  if (!(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0)) {
    check.fail(Errc::option, "label_smoothing must be in [0, 1], got " + detail::format_double(o.label_smoothing));
  }
  check.threads(o.threads);

  check.same_dtype(loss, "loss", logits.dtype(), "logits");
  if (o.reduction == Reduction::none) {
    check.shape_is(loss.shape(), "loss", batch, "reduction none: " + class_axis_note);
  } else {
    check.shape_is(loss.shape(), "loss", {}, "reduction " + std::string(to_string(o.reduction)) + ": a scalar");
  }
  check.data_present(loss.data(), loss.shape(), "loss");
  check.writable(loss, "loss");

  // Every input the outputs must not touch (except the logits, which grad or
  // log_prob may replace in place).
  std::vector<std::pair<TensorView, const char*>> inputs;
  if (indices != nullptr) inputs.emplace_back(as_sized_view(*indices), "target");
  else inputs.emplace_back(*probabilities, "target");
  if (o.weight) inputs.emplace_back(*o.weight, "weight");

  check.no_overlap(loss, "loss", logits, "logits", false);
  for (const auto& [view, name] : inputs) check.no_overlap(loss, "loss", view, name, false);
  const std::pair<const std::optional<MutableTensorView>*, const char*> extras[] = {{&out.grad, "grad"},
                                                                                    {&out.log_prob, "log_prob"}};
  for (const auto& [extra, name] : extras) {
    if (!*extra) continue;
    const MutableTensorView& v = **extra;
    check.same_dtype(v, name, logits.dtype(), "logits");
    check.shape_is(v.shape(), name, logits.shape(), "the logits' shape");
    check.data_present(v.data(), v.shape(), name);
    check.writable(v, name);
    // Element c is written after the logits' element c is read, and the (max, sum)
    // pass has read the whole row before: in place over the logits is safe.
    check.no_overlap(v, name, logits, "logits", true);
    for (const auto& [view, input_name] : inputs) check.no_overlap(v, name, view, input_name, false);
    check.no_overlap(v, name, loss, "loss", false);
  }
  if (out.grad && out.log_prob) check.no_overlap(*out.grad, "grad", *out.log_prob, "log_prob", false);

  Request r;
  r.dtype = logits.dtype();
  r.logits = static_cast<const std::byte*>(logits.data());
  r.classes = classes;
  r.index_targets = indices != nullptr;
  r.ignore_index = o.ignore_index;
  r.smoothing = o.label_smoothing;
  r.reduction = o.reduction;
  r.loss = static_cast<std::byte*>(loss.data());
  if (o.weight) {
    r.weight = static_cast<const std::byte*>(o.weight->data());
    r.weight_stride = o.weight->strides()[0];
  }
  std::array<training::Strides, training::kMaxViews> strides{};
  strides[kLogits] = training::batch_strides(logits.strides(), axis);
  r.class_stride[kLogits] = logits.strides()[a];
  if (indices != nullptr) {
    r.index_type = indices->type();
    r.target = indices->data();
    strides[kTarget] = training::batch_strides(indices->strides(), -1);
  } else {
    r.target = probabilities->data();
    strides[kTarget] = training::batch_strides(probabilities->strides(), axis);
    r.class_stride[kTarget] = probabilities->strides()[a];
  }
  if (o.reduction == Reduction::none) strides[kLoss] = training::batch_strides(loss.strides(), -1);
  if (out.grad) {
    r.grad = static_cast<std::byte*>(out.grad->data());
    strides[kGrad] = training::batch_strides(out.grad->strides(), axis);
    r.class_stride[kGrad] = out.grad->strides()[a];
  }
  if (out.log_prob) {
    r.log_prob = static_cast<std::byte*>(out.log_prob->data());
    strides[kLogProb] = training::batch_strides(out.log_prob->strides(), axis);
    r.class_stride[kLogProb] = out.log_prob->strides()[a];
  }
  r.fold = training::fold_rows(batch, strides);
  r.threads = training::thread_count(o.threads, r.fold.rows, classes);
  r.grad_call_streams = streams_grad(o.stores, r);
  r.stream = r.grad_call_streams && r.grad != r.logits;
  if (r.dtype != DType::f64 && r.index_targets && classes > 0 && r.class_stride[kLogits] != 1) {
    std::vector<int> views = {kLogits};  // and the outputs asked for
    if (r.grad != nullptr) views.push_back(kGrad);
    if (r.log_prob != nullptr) views.push_back(kLogProb);
    r.columns = training::lane_columns(r.fold, views);
  }
  return r;
}

// Whether row-major targets t[0, count) without class weights all lie in [0, classes)
// or equal the ignore_index, and how many do not equal it, in one branch-free loop
// (the general loop below, one target at a time, took 0.7 cycles a logit of [8, 21,
// 256, 256] f32 on one thread before the threads start, 14% of the call on two;
// docs/PERFORMANCE.md, forty-ninth session).
template <class I>
bool unweighted_targets_fit(const I* t, std::int64_t count, const Request& r, std::int64_t& kept) {
  const bool has_ignore = r.ignore_index.has_value();
  const std::int64_t ignore = r.ignore_index.value_or(0);
  std::int64_t ignored = 0;
  bool outside = false;
  for (std::int64_t n = 0; n < count; ++n) {
    const auto v = static_cast<std::int64_t>(t[n]);
    const bool skip = has_ignore && v == ignore;
    ignored += skip ? 1 : 0;
    // One unsigned comparison: negative targets wrap beyond every class count.
    outside |= !skip && static_cast<std::uint64_t>(v) >= static_cast<std::uint64_t>(r.classes);
  }
  kept = count - ignored;
  return !outside;
}

// Whether v's elements lie one after another in row-major order.
bool row_major(const IndexView& v) {
  std::int64_t expected = 1;
  for (int d = v.rank() - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    if (v.shape()[k] != 1 && v.strides()[k] != expected) return false;
    expected *= v.shape()[k];
  }
  return true;
}

// Reads every class-index target once, in order: an out-of-range target that is not
// ignored is an error naming its position (before anything is written), and the
// weights of the others add up to the mean's divisor.
void check_targets(const Checker& check, const IndexView& target, Request& r) {
  if (r.weight == nullptr && row_major(target)) {
    std::int64_t kept = 0;
    const bool fit = target.type() == IndexType::i64
                         ? unweighted_targets_fit(static_cast<const std::int64_t*>(target.data()), target.numel(), r, kept)
                         : unweighted_targets_fit(static_cast<const std::int32_t*>(target.data()), target.numel(), r, kept);
    if (fit) {
      r.weight_total = static_cast<double>(kept);  // the compensated sum of as many 1s: exact
      return;
    }
  }
  training::CompensatedSum<double> total;
  const int rank = target.rank();
  std::array<std::int64_t, kMaxRank> index{};
  std::int64_t offset = 0;
  const std::int64_t count = target.numel();
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int64_t t = index_at(target.data(), target.type(), offset);
    if (!(r.ignore_index && t == *r.ignore_index)) {
      if (t < 0 || t >= r.classes) {
        const std::span<const std::int64_t> position(index.data(), static_cast<std::size_t>(rank));
        check.fail(Errc::option, "target " + detail::format_list(position) + " is " + std::to_string(t) +
                                     ", outside the " + std::to_string(r.classes) + " classes [0, " +
                                     std::to_string(r.classes) + ")" +
                                     (r.ignore_index ? " and not ignore_index (" + std::to_string(*r.ignore_index) + ")"
                                                     : std::string(" (no ignore_index is set)")));
      }
      total.add(weight_of(r, t));
    }
    for (int d = rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      offset += target.strides()[k];
      if (++index[k] < target.shape()[k]) break;
      offset -= index[k] * target.strides()[k];
      index[k] = 0;
    }
  }
  r.weight_total = total.hi();
}

// The (max, sum) of a row of logits in one read: blocks small enough to stay in L1
// each get their max and exp-sum from the shared passes (vectorised for contiguous
// f32, f16 and bf16: float exps), merged into the running pair. With `wide` (a
// scratch buffer) it sums double exps instead, each block widened to double first:
// for 16-bit rows whose gradient is computed in double where S * p_c and a_c may
// cancel, since d's error reaches the gradient at the size of the terms.
template <class T>
Stats<double> logit_stats(const T* x, std::ptrdiff_t stride, std::int64_t n, std::vector<double>* wide) {
  constexpr std::int64_t kBlock = 2048;
  Stats<double> running;
  if (wide != nullptr) wide->resize(static_cast<std::size_t>(kBlock));
  for (std::int64_t begin = 0; begin < n; begin += kBlock) {
    const std::int64_t end = std::min(n, begin + kBlock);
    Stats<double> block;
    if (wide != nullptr) {
      double* w = wide->data();
      for (std::int64_t i = begin; i < end; ++i) w[i - begin] = cpu::Element<T>::template load<double>(x[i * stride]);
      block.m = cpu::max_pass<double>(w, 1, 0, end - begin, -kInf);
      if (std::isfinite(block.m)) {
        cpu::sum_exp_pass<double>(w, 1, 0, end - begin, block.m, 1.0, PassOrder::forward, block.d);
      }
    } else {
      block.m = cpu::max_pass<double>(x, stride, begin, end, -kInf);
      if (std::isfinite(block.m)) {
        cpu::sum_exp_pass<double>(x, stride, begin, end, block.m, 1.0, PassOrder::forward, block.d);
      }
    }
    running = detail::merge(running, block, 1.0);
  }
  return running;
}

// Each float exp that flushes is below FLT_MIN: n of them are within 2^-24 of a d - 1
// of n * FLT_MIN * 2^24 or more.
inline constexpr double kFlushedTermsMatter = 0x1p-126 * 0x1p24;

// One sample's row.
struct Sample {
  std::int64_t logits, target, loss, grad, log_prob;  // offsets of the row in each view
  std::int64_t next_logits = -1;                      // the offset of the row done after it, if any
};

// Floats aligned to the vector: a heap block of std::vector lies 16 bytes off, and
// every exp stored there would cross a cache line.
class AlignedFloats {
 public:
  // At least n floats; their values are whatever was there.
  float* reserve(std::size_t n) {
    if (n > capacity_) {
      data_ = hwy::AllocateAligned<float>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<float[]> data_;
  std::size_t capacity_ = 0;
};

// Per thread: the exps of a row of 16-bit logits (or of f32 logits whose gradient
// replaces them), and the max of each block of the row.
struct Scratch {
  AlignedFloats exps;
  std::vector<std::int64_t> x_rows, grad_rows, log_prob_rows;  // RowKernel::run_row_batch's rows
  std::vector<float> block_max;
  std::vector<double> wide;  // a block of 16-bit logits widened (logit_stats)
  std::vector<double> columns;      // RowKernel::run_columns's per-column arrays
  std::vector<double> column_exps;  // and its exps (columns_per_piece), in double
  std::vector<float> column_float_exps;  // or in float
};

// Threads share samples across the lanes in pieces of columns (any split gives the
// same bits: each lane is its own sample): at most 512, and few enough that the
// piece's exps, kept from the (max, sum) pass for the write pass, take at most
// kColumnExpsBytes (in L2 beside the piece's logits).
constexpr std::int64_t kColumnExpsBytes = 256 * 1024;
std::int64_t columns_per_piece(std::int64_t classes) {
  const std::int64_t fit = kColumnExpsBytes / (static_cast<std::int64_t>(sizeof(double)) * classes);
  return std::clamp<std::int64_t>(fit / 32 * 32, 32, 512);
}

// RowKernel::run_row_batch: rows of up to kBatchedClasses classes go a batch at a
// time, as many as keep about kRowBatchExps exps (32 KiB of floats, in L1).
constexpr std::int64_t kBatchedClasses = 1024;
constexpr std::int64_t kRowBatchExps = 8192;

// The storage types of the vectorised kernels (training/simd/).
template <class T>
inline constexpr bool kSimdTypes = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T>
class RowKernel {
 public:
  RowKernel(const Request& r, double class_weight_sum)
      : r_(r),
        x_(reinterpret_cast<const T*>(r.logits)),
        grad_(reinterpret_cast<T*>(r.grad)),
        log_prob_(reinterpret_cast<T*>(r.log_prob)),
        log_prob_replaces_logits_(r.log_prob != nullptr && r.log_prob == r.logits),
        weight_sum_(class_weight_sum),
        grad_scale_(r.reduction == Reduction::mean ? 1.0 / r.weight_total : 1.0),
        stored_exps_(uses_stored_exps()),
        double_exps_(cancels_in_double()) {
    if (r.columns > 0 && r.smoothing != 0) {
      for (std::int64_t c = 0; c < r.classes; ++c) class_weight_.push_back(weight_of(r, c));
    }
  }

  bool prefetches_next_row() const { return stored_exps_; }

  // Request::columns: `count` samples side by side, the first at `first`, each next one
  // `step` elements on in each view (the logits', gradient's and log-probabilities'
  // step 1). The same loss, gradient and log-probabilities as run() gives each, in
  // double lanes (training/simd/gradient_columns.hpp); writes each loss to loss[j].
  void run_columns(const Sample& first, const std::array<std::int64_t, training::kMaxViews>& step, std::size_t count,
                   Scratch& scratch, double* loss) const {
    const auto n = static_cast<std::size_t>(r_.classes);
    const std::ptrdiff_t xs = r_.class_stride[kLogits];
    const T* x = x_ + first.logits;
    training::simd::CrossEntropyColumns p = sample_arrays(count, scratch);
    p.class_weight = p.spread != 0 ? class_weight_.data() : nullptr;

    // Float exps where they meet the bars (as run()'s: 16-bit rows whose gradient may
    // cancel take double exps), unless flushed terms matter (as run() redoes them).
    bool in_float = false;
    if (!double_exps_) {
      if (grad_ != nullptr) {
        if (scratch.column_float_exps.size() < n * p.exps_stride) scratch.column_float_exps.resize(n * p.exps_stride);
        p.float_exps = scratch.column_float_exps.data();
      }
      in_float = training::simd::cross_entropy_column_stats_in_float(x, xs, n, count, p);
      for (std::size_t j = 0; j < count && in_float; ++j) {
        const double minus_one = (p.at_max[j] - 1.0) + p.below[j];
        in_float = !(std::isfinite(p.m[j]) && minus_one < kFlushedTermsMatter * static_cast<double>(n));
      }
    }
    if (!in_float) {
      p.float_exps = nullptr;
      if (grad_ != nullptr) {
        if (scratch.column_exps.size() < n * p.exps_stride) scratch.column_exps.resize(n * p.exps_stride);
        p.exps = scratch.column_exps.data();
      }
      training::simd::cross_entropy_column_stats(x, xs, n, count, p);
    }
    gather_targets(
        count, p, [&](std::size_t j) { return first.target + static_cast<std::int64_t>(j) * step[kTarget]; },
        [&](std::size_t j, std::int64_t t) { return x[t * xs + static_cast<std::int64_t>(j)]; });
    training::simd::cross_entropy_column_terms(count, p);
    if (in_float && grad_ != nullptr && p.spread == 0) {
      // The write pass in float lanes, as the rows' (the double one took four times as
      // long; docs/PERFORMANCE.md, forty-ninth session), each target's own gradient
      // stored after it; the log-probabilities in a pass of their own, before a
      // gradient in place over the logits or after it where they replace the logits.
      const auto write_log_prob = [&] {
        training::simd::cross_entropy_columns(x, xs, nullptr, 0, log_prob_ + first.log_prob, r_.class_stride[kLogProb],
                                              n, count, p);
      };
      if (log_prob_ != nullptr && !log_prob_replaces_logits_) write_log_prob();
      training::simd::cross_entropy_column_target_gradients(count, p);
      T* grad = grad_ + first.grad;
      const std::ptrdiff_t gs = r_.class_stride[kGrad];
      training::simd::cross_entropy_columns_in_float(x, xs, grad, gs, n, count, p);
      for (std::size_t j = 0; j < count; ++j) {
        if (p.ignored[j] == 0 && std::isfinite(p.m[j])) {
          store(grad, static_cast<std::int64_t>(j) + static_cast<std::int64_t>(p.target[j]) * gs, p.target_grad[j]);
        }
      }
      if (log_prob_replaces_logits_) write_log_prob();
    } else if (grad_ != nullptr || log_prob_ != nullptr || p.spread != 0) {
      training::simd::cross_entropy_columns(x, xs, grad_ != nullptr ? grad_ + first.grad : nullptr,
                                            r_.class_stride[kGrad],
                                            log_prob_ != nullptr ? log_prob_ + first.log_prob : nullptr,
                                            r_.class_stride[kLogProb], n, count, p);
    }
    training::simd::cross_entropy_column_losses(count, p);
    std::copy_n(p.loss, count, loss);
  }

  // Whether rows go through run_row_batch: those of run_with_stored_exps of one block
  // each, short enough that a call a row costs more than its elements, with their
  // log-probabilities (if asked) along unit stride.
  bool runs_row_batches() const {
    return kSimd && stored_exps_ && r_.classes > 0 && r_.classes <= kBatchedClasses &&
           (log_prob_ == nullptr || r_.class_stride[kLogProb] == 1);
  }
  std::size_t rows_per_batch() const {
    return static_cast<std::size_t>(std::clamp<std::int64_t>(kRowBatchExps / r_.classes, 8, 256));
  }

  // run_with_stored_exps over `count` samples at once: its two passes each a kernel
  // over every row (training/simd/gradient_rows.hpp), the per-row scalar work between
  // them (log1p, 1 / d, the target's gradient) in double lanes across the samples, as
  // run_columns computes it. Writes each loss to loss[j].
  void run_row_batch(const Sample* s, std::size_t count, Scratch& scratch, double* loss) const {
    if constexpr (kSimd) {
      const auto n = static_cast<std::size_t>(r_.classes);
      training::simd::CrossEntropyColumns p = sample_arrays(count, scratch);
      scratch.x_rows.resize(count);
      scratch.grad_rows.resize(count);
      scratch.log_prob_rows.resize(count);
      for (std::size_t j = 0; j < count; ++j) {
        scratch.x_rows[j] = s[j].logits;
        scratch.grad_rows[j] = s[j].grad;
        scratch.log_prob_rows[j] = s[j].log_prob;
      }
      float* exps = scratch.exps.reserve(count * n);
      // The gradient's lines fetched for writing beside the exps, as run_with_stored_exps's
      // (where it goes through the cache and is not the logits).
      const bool fetch = grad_ != x_ && !r_.stream;
      training::simd::cross_entropy_rows_stats(x_, scratch.x_rows.data(), exps, fetch ? grad_ : nullptr,
                                               scratch.grad_rows.data(), n, count, p);
      gather_targets(
          count, p, [&](std::size_t j) { return s[j].target; },
          [&](std::size_t j, std::int64_t t) { return x_[s[j].logits + t]; });
      training::simd::cross_entropy_column_terms(count, p);
      training::simd::cross_entropy_column_target_gradients(count, p);
      // The log-probabilities from the logits, before a gradient in place over them,
      // or after the gradient where they replace the logits themselves (as run()).
      const auto write_log_prob = [&] {
        training::simd::cross_entropy_rows_log_prob(x_, scratch.x_rows.data(), log_prob_,
                                                    scratch.log_prob_rows.data(), n, count, p.m, p.log_d);
      };
      if (log_prob_ != nullptr && !log_prob_replaces_logits_) write_log_prob();
      const auto* weight = p.spread != 0 ? reinterpret_cast<const T*>(r_.weight) : nullptr;
      training::simd::cross_entropy_rows_write(x_, scratch.x_rows.data(), exps, grad_, scratch.grad_rows.data(),
                                               weight, n, count, p, r_.stream);
      if (r_.stream) hwy::FlushStream();  // the rows' streaming stores, before the targets' own
      for (std::size_t j = 0; j < count; ++j) {
        if (p.ignored[j] != 0) {
          fill_grad(s[j], 0.0);
        } else if (!std::isfinite(p.m[j])) {
          fill_grad(s[j], kNaN);  // as run_with_stored_exps: NaN rows, all -inf included
        } else {
          store(grad_, s[j].grad + static_cast<std::int64_t>(p.target[j]), p.target_grad[j]);
        }
      }
      if (log_prob_replaces_logits_) write_log_prob();
      training::simd::cross_entropy_column_losses(count, p);
      std::copy_n(p.loss, count, loss);
    }
  }

  // The row's loss (before reduction); writes its gradient and log-probabilities.
  double run(const Sample& s, Scratch& scratch) const {
    const std::int64_t n = r_.classes;
    const std::ptrdiff_t xs = r_.class_stride[kLogits];
    std::int64_t t = -1;  // the class index; -1 for probability targets
    bool ignored = false;
    if (r_.index_targets) {
      t = index_at(r_.target, r_.index_type, s.target);
      ignored = r_.ignore_index && t == *r_.ignore_index;
    }
    if constexpr (kSimd) {
      if (!ignored && n > 0 && stored_exps_) return run_with_stored_exps(s, t, scratch);
    }
    Stats<double> stats = logit_stats(x_ + s.logits, xs, n, double_exps_ ? &scratch.wide : nullptr);
    if (!double_exps_ && std::isfinite(stats.m) && stats.d.minus_one() < kFlushedTermsMatter * static_cast<double>(n)) {
      // The float exps flush terms below FLT_MIN; where they could be 2^-24 of d - 1
      // (a confident row, whose loss is about d - 1), double exps keep them (found by
      // a differential fuzz: f32 [0, -92] gave loss 0 for 1.1e-40 without a gradient).
      stats = logit_stats(x_ + s.logits, xs, n, &scratch.wide);
    }
    const bool finite = std::isfinite(stats.m);
    const double log_d = finite ? std::log1p(stats.d.minus_one()) : kNaN;
    // log_softmax of the row, as the forward op gives it: a non-finite max makes the
    // row NaN (all -inf included). Written before the gradient (which may replace the
    // logits), or after everything else where it replaces the logits itself.
    if (log_prob_ != nullptr && !log_prob_replaces_logits_) write_log_prob(s, stats.m, log_d);
    const double loss = loss_and_gradient(s, t, ignored, stats, log_d);
    if (log_prob_replaces_logits_) write_log_prob(s, stats.m, log_d);
    return loss;
  }

 private:
  // CrossEntropyColumns's per-sample arrays for `count` samples, in the scratch, and
  // the request's constants (not the class weights).
  training::simd::CrossEntropyColumns sample_arrays(std::size_t count, Scratch& scratch) const {
    constexpr std::size_t kArrays = 18;  // the per-sample arrays below
    const std::size_t room = (count + training::simd::kColumnArrayPadding - 1) /
                             training::simd::kColumnArrayPadding * training::simd::kColumnArrayPadding;
    // Every entry a lane reads is written first; the padding keeps whatever it held.
    if (scratch.columns.size() < room * kArrays) scratch.columns.resize(room * kArrays);
    double* next_array = scratch.columns.data();
    const auto array = [&] { return std::exchange(next_array, next_array + room); };
    training::simd::CrossEntropyColumns p;
    for (double** a : {&p.m, &p.at_max, &p.below, &p.target, &p.target_weight, &p.target_logit, &p.ignored, &p.log_d,
                       &p.d, &p.inv_d, &p.p_minus_one, &p.sum_hi, &p.sum_lo, &p.sum_a, &p.target_coefficient,
                       &p.spread_offsets, &p.loss, &p.target_grad}) {
      *a = array();
    }
    p.exps_stride = room;
    p.keep = 1.0 - r_.smoothing;
    p.spread = r_.smoothing / static_cast<double>(r_.classes);
    p.spread_weight_sum = p.spread * weight_sum_;
    p.scale = grad_scale_;
    return p;
  }

  // Each sample's target, its weight and its logit (logit(j, t), read before a
  // gradient in place overwrites it), and whether it is ignored, after the stats:
  // ignored samples and non-finite maxes read no logit (the kernels replace them).
  template <class TargetOffset, class Logit>
  void gather_targets(std::size_t count, const training::simd::CrossEntropyColumns& p, TargetOffset&& target_offset,
                      Logit&& logit) const {
    for (std::size_t j = 0; j < count; ++j) {
      const std::int64_t t = index_at(r_.target, r_.index_type, target_offset(j));
      const bool ignored = r_.ignore_index && t == *r_.ignore_index;
      p.ignored[j] = ignored ? 1.0 : 0.0;
      const bool idle = ignored || !std::isfinite(p.m[j]);
      p.target[j] = idle ? -1.0 : static_cast<double>(t);
      p.target_weight[j] = idle ? 0.0 : weight_of(r_, t);
      p.target_logit[j] = idle ? 0.0 : cpu::Element<T>::template load<double>(logit(j, t));
    }
  }

  // The rest of run() after the row's (max, sum): the loss, and the gradient if asked.
  double loss_and_gradient(const Sample& s, std::int64_t t, bool ignored, const Stats<double>& stats,
                           double log_d) const {
    const std::int64_t n = r_.classes;
    const bool finite = std::isfinite(stats.m);
    const double m = stats.m;
    if (ignored) {
      // A constant 0 loss: its gradient is exactly 0, whatever the logits hold.
      fill_grad(s, 0.0);
      return 0.0;
    }
    if (n == 0) return 0.0;  // probability targets over no classes: an empty sum
    if (!finite) {
      fill_grad(s, kNaN);
      return kNaN;
    }

    // S = sum(a) as hi + lo: where one coefficient carries nearly all of S, S - a_c
    // is then exact (see gradient()).
    const double keep = 1.0 - r_.smoothing;
    const double spread = r_.smoothing / static_cast<double>(n);
    double target_weight = 0;
    const SplitCoefficients split = coefficient_sum(s, t, target_weight);
    const double sum_hi = split.hi;
    const double sum_lo = split.lo;
    const double sum_a = sum_hi + sum_lo;

    // sum_c a_c * (m - x_c): from the target alone without smoothing, otherwise
    // accumulated in the pass that writes the gradient.
    // Class-index targets take the target's (1 - s) part on its own, as PyTorch's
    // (1 - s) nll + s / C smooth does: at s = 1 a target at -inf makes it 0 * inf, NaN.
    const bool every_class = !r_.index_targets || spread != 0;
    training::CompensatedSum<double> offsets;  // an infinite term stays infinite
    if (r_.index_targets) offsets.add(target_weight * keep * (m - load(t, s)));
    if (every_class || grad_ != nullptr) {
      const GradientTerms terms(stats, sum_hi, sum_lo);
      if constexpr (kSimd) {
        if (vectorised(spread)) return run_vectorised(s, t, target_weight, stats, terms, log_d);
      }
      for (std::int64_t c = 0; c < n; ++c) {
        const double x = load(c, s);
        const double a = coefficient(c, s, t, target_weight);
        if (every_class) offsets.add((r_.index_targets ? spread * weight_of(r_, c) : a) * (m - x));
        if (grad_ != nullptr) store(grad_, s.grad + c * r_.class_stride[kGrad], gradient(x, a, m, terms) * grad_scale_);
      }
    }
    return sum_a * log_d + offsets.hi();
  }

  // What the gradient S * p_c - a_c of a row needs besides x_c and a_c.
  struct GradientTerms {
    GradientTerms(const Stats<double>& stats, double hi, double lo)
        : d(stats.d.value()),
          inv_d(1.0 / d),
          p_minus_one(-stats.d.minus_one() * inv_d),
          sum_hi(hi),
          sum_lo(lo),
          sum_a(hi + lo) {}
    double d, inv_d;
    double p_minus_one;  // p - 1 for the row's unique dominant element: -(d - 1) / d without rounding d
    double sum_hi, sum_lo, sum_a;
  };

  static double gradient(double x, double a, double m, const GradientTerms& g) {
    if (x == m && g.d < 2) {
      // p > 1/2: S * p - a = S * (p - 1) + (S - a), with S - a exact where a ~ S.
      return g.sum_a * g.p_minus_one + ((g.sum_hi - a) + g.sum_lo);
    }
    const double z = x - m;
    double p = std::exp(z) * g.inv_d;
    if constexpr (std::is_same_v<T, double>) {
      // f64 logits: x - m rounds, by up to 2^-53 |x - m|, and exp turns that into p's
      // relative error, which S * p - a keeps where it cancels (found by a random
      // test: 2^-49.7 of S * p at |x - m| near 10). Its rounding error, by TwoSum,
      // puts it back: exp(z + e) = exp(z) (1 + e). The narrower types' x - m is exact.
      if (std::isfinite(z)) {
        const double m_part = z - x;
        const double e = (x - (z - m_part)) + (-m - m_part);
        p = std::fma(p, e, p);
      }
    }
    return g.sum_a * p - a;
  }

  // The vectorised kernels take class-index targets over contiguous rows of f32, f16
  // or bf16. They compute the gradient in float lanes, so where S * p_c and a_c can
  // cancel (label smoothing) only f32 goes there, whose bar allows float precision
  // for it (docs/SEMANTICS.md); f16 and bf16 keep double.
  static constexpr bool kSimd = kSimdTypes<T>;
  bool vectorised(double spread) const {
    if (!r_.index_targets || r_.class_stride[kLogits] != 1) return false;
    if (grad_ != nullptr && r_.class_stride[kGrad] != 1) return false;
    if (spread != 0 && !std::is_same_v<T, float>) return false;
    return spread == 0 || r_.weight == nullptr || r_.weight_stride == 1;
  }

  // The rest of run() for vectorised rows: one pass writes every gradient as if no
  // class were the target (and sums the smoothing's offsets); then the target's own
  // gradient is redone in double, as the scalar loop computes it.
  double run_vectorised(const Sample& s, std::int64_t t, double target_weight, const Stats<double>& stats,
                        const GradientTerms& terms, double log_d) const {
    const double x_t = load(t, s);  // before an in-place gradient overwrites it
    const double spread = r_.smoothing / static_cast<double>(r_.classes);
    const training::simd::CrossEntropyRow row = simd_row(stats, terms);
    const auto* weight = reinterpret_cast<const T*>(r_.weight);
    const double spread_offsets = training::simd::cross_entropy_row(
        x_ + s.logits, grad_ != nullptr ? grad_ + s.grad : nullptr, spread != 0 ? weight : nullptr,
        static_cast<std::size_t>(r_.classes), row, spread != 0);
    return finish_vectorised(s, t, x_t, target_weight, stats.m, terms, log_d, spread_offsets);
  }

  training::simd::CrossEntropyRow simd_row(const Stats<double>& stats, const GradientTerms& terms) const {
    training::simd::CrossEntropyRow row;
    row.m = static_cast<float>(stats.m);
    row.coefficient_sum = terms.sum_a;
    row.inv_d = terms.inv_d;
    row.spread = r_.smoothing / static_cast<double>(r_.classes);
    row.scale = grad_scale_;
    return row;
  }

  double finish_vectorised(const Sample& s, std::int64_t t, double x_t, double target_weight, double m,
                           const GradientTerms& terms, double log_d, double spread_offsets) const {
    const double keep = 1.0 - r_.smoothing;
    const double spread = r_.smoothing / static_cast<double>(r_.classes);
    if (grad_ != nullptr) {
      const double a_t = coefficient(t, s, t, target_weight);
      store(grad_, s.grad + t * r_.class_stride[kGrad], gradient(x_t, a_t, m, terms) * grad_scale_);
    }
    training::CompensatedSum<double> offsets;
    offsets.add(target_weight * keep * (m - x_t));  // apart from spread's, as run() takes it
    if (spread != 0) offsets.add(spread * spread_offsets);
    return terms.sum_a * log_d + offsets.hi();
  }

  // Whether a 16-bit row's gradient is computed in double where S * p_c and a_c may
  // cancel (label smoothing, probability targets: vectorised() sends these to the
  // scalar loop), so that d must be as exact as that: its bar is double's precision
  // times the terms (docs/SEMANTICS.md).
  bool cancels_in_double() const {
    constexpr bool kSixteenBit = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
    return kSixteenBit && grad_ != nullptr && (r_.smoothing != 0 || !r_.index_targets);
  }

  // Whether rows compute each exp once (training/simd/gradient_rows.hpp): the first
  // pass keeps exp(x - m_b) per block (in the gradient itself for f32 logits that it
  // does not replace and that does not stream, in the thread's scratch otherwise: a
  // streamed gradient is written once, around the cache) and the second scales them,
  // instead of computing them again. For vectorised rows with a gradient, where the
  // logits, the exps and the gradient (and the next row's logits, prefetched) fit in
  // L2, or where the whole call's logits and gradient stay in the cache between the
  // passes by the forward softmax's rule for fused over chunks, so that the second
  // pass reads cache, or where the gradient goes through the cache anyway (it does
  // not stream): computing the exps again would then save no memory traffic. Zen 4
  // VM (32 MiB L3), calls of 16 to 32 MiB (f32 8 x 262144, 16 x 200000; bf16 16 x
  // 262144), twenty-seventh session: 1.03-1.53x from DRAM on two threads, 1.30-1.58x on
  // one, 1.19-1.62x hot; in place 1.23-1.71x. (With or without log-probabilities and in place
  // or not, so that each gives the same bits.)
  bool uses_stored_exps() const {
    if (grad_ == nullptr) return false;
    if (!vectorised(r_.smoothing / static_cast<double>(r_.classes))) return false;
    const MachineInfo& m = machine();
    const auto bytes_per_class = static_cast<std::int64_t>(3 * sizeof(T) + sizeof(float));
    if (r_.classes * bytes_per_class <= m.l2_bytes) return true;
    if (!r_.grad_call_streams) return true;
    return detail::stays_cached_between_passes(r_.fold.rows * r_.classes * static_cast<std::int64_t>(2 * sizeof(T)), m);
  }

  // run() with stored exps: the same (max, sum) merge of blocks as logit_stats, the
  // same loss and gradient formulas.
  double run_with_stored_exps(const Sample& s, std::int64_t t, Scratch& scratch) const {
    const std::int64_t n = r_.classes;
    const auto length = static_cast<std::size_t>(n);
    const T* x = x_ + s.logits;
    T* grad = grad_ + s.grad;
    const double x_t = load(t, s);  // before an in-place gradient overwrites it
    float* exps = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (grad != x && !r_.stream) exps = grad;  // a streamed gradient keeps them in cache
    }
    if (exps == nullptr) exps = scratch.exps.reserve(length);
    // Where the exps wait apart from a gradient that goes through the cache and is not
    // the logits (16-bit logits), the first pass fetches the gradient's lines for
    // writing, in step with the exps, so that the second finds them in cache instead
    // of reading each from memory after the arithmetic: bf16 8 x 128256 and 64 x 32000
    // 1.07-1.14x from DRAM and with the logits in cache (docs/PERFORMANCE.md,
    // twenty-fourth session). (A burst of a block's lines at once ran 0.87-0.95x.)
    const bool fetch_grad = static_cast<void*>(exps) != static_cast<void*>(grad) && grad != x && !r_.stream;
    constexpr std::size_t kBlock = training::simd::kExpBlock;
    const std::size_t blocks = (length + kBlock - 1) / kBlock;
    scratch.block_max.resize(blocks);
    Stats<double> stats;
    // Where the exps wait in the scratch, each block takes its max from the exp pass of
    // the block before it where that one ran: its loads fill the cycles of the exps
    // instead of a pass of their own (bf16 8 x 128256, 64 x 32000 and 4096 x 32000
    // 1.01-1.05x from DRAM, 1.03-1.06x in cache; f32 4096 x 32000, its gradient
    // streamed, 1.06x). Not where the exps go to the f32 gradient itself, whose lines
    // the exp pass reads for ownership from memory: beside the next block's loads,
    // f32 8 x 128256 and 64 x 32000 ran 0.83-0.90x from DRAM (docs/PERFORMANCE.md,
    // thirty-fourth session).
    const bool next_max_beside = static_cast<void*>(exps) != static_cast<void*>(grad);
    std::optional<float> next_max;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t begin = b * kBlock;
      const std::size_t count = std::min(kBlock, length - begin);
      Stats<double> block;
      const float block_max = next_max ? *next_max : cpu::simd::f32_rmax(x + begin, count);
      next_max.reset();
      scratch.block_max[b] = block_max;
      block.m = block_max;
      if (std::isfinite(block_max)) {
        T* write_ahead = fetch_grad ? grad + begin : nullptr;
        training::simd::BlockExpSum sum;
        if (next_max_beside && b + 1 < blocks) {
          const std::size_t next_count = std::min(kBlock, length - begin - count);
          const training::simd::BlockExpSumAndNextMax r = training::simd::store_exps_and_next_max(
              x + begin, exps + begin, count, block_max, write_ahead, x + begin + count, next_count);
          sum = r.sum;
          next_max = r.next_max;
        } else {
          sum = training::simd::store_exps(x + begin, exps + begin, count, block_max, write_ahead);
        }
        block.d.add(static_cast<double>(sum.at_max));
        block.d.add(sum.below_max);
      }
      stats = detail::merge(stats, block, 1.0);
    }
    if (!std::isfinite(stats.m)) {
      // As run(): a non-finite max makes the row NaN (all -inf included).
      if (log_prob_ != nullptr) {
        for (std::int64_t c = 0; c < n; ++c) store(log_prob_, s.log_prob + c * r_.class_stride[kLogProb], kNaN);
      }
      fill_grad(s, kNaN);
      return kNaN;
    }
    const double log_d = std::log1p(stats.d.minus_one());
    // The log-probabilities from the logits, before a gradient in place over them, or
    // after the gradient pass where they replace the logits themselves.
    const bool log_prob_in_place = log_prob_ != nullptr && log_prob_ + s.log_prob == x;
    if (log_prob_ != nullptr && !log_prob_in_place) write_log_prob(s, stats.m, log_d);
    double target_weight = 0;
    const SplitCoefficients split = coefficient_sum(s, t, target_weight);
    const GradientTerms terms(stats, split.hi, split.lo);
    const training::simd::CrossEntropyRow row = simd_row(stats, terms);
    const double spread = row.spread;
    const auto* weight = spread != 0 ? reinterpret_cast<const T*>(r_.weight) : nullptr;
    const T* next_x = s.next_logits >= 0 ? x_ + s.next_logits : nullptr;
    double spread_offsets = 0;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t begin = b * kBlock;
      const std::size_t count = std::min(kBlock, length - begin);
      const T* block_weight = weight != nullptr ? weight + begin : nullptr;
      if (std::isfinite(scratch.block_max[b])) {
        training::simd::NextRow next;
        if (next_x != nullptr) next = {next_x + begin, nullptr, count * sizeof(T)};
        spread_offsets += training::simd::cross_entropy_block_from_exps(
            x + begin, exps + begin, grad + begin, block_weight, count, scratch.block_max[b], row, spread != 0, next,
            r_.stream);
      } else {
        // Every logit of the block is -inf (the row is finite): nothing was stored.
        spread_offsets +=
            training::simd::cross_entropy_row(x + begin, grad + begin, block_weight, count, row, spread != 0);
      }
    }
    if (r_.stream) hwy::FlushStream();  // the blocks' streaming stores, before the target's own
    if (log_prob_in_place) write_log_prob(s, stats.m, log_d);
    return finish_vectorised(s, t, x_t, target_weight, stats.m, terms, log_d, spread_offsets);
  }

  // log_softmax of a row, as the forward op gives it: (x - m) - log_d, NaN where m is
  // not finite (all -inf included; log_d is NaN there).
  void write_log_prob(const Sample& s, double m, double log_d) const {
    if constexpr (kSimd) {
      if (r_.class_stride[kLogits] == 1 && r_.class_stride[kLogProb] == 1) {
        training::simd::cross_entropy_rows_log_prob(x_, &s.logits, log_prob_, &s.log_prob,
                                                    static_cast<std::size_t>(r_.classes), 1, &m, &log_d);
        return;
      }
    }
    for (std::int64_t c = 0; c < r_.classes; ++c) {
      const double v = std::isfinite(m) ? (load(c, s) - m) - log_d : kNaN;
      store(log_prob_, s.log_prob + c * r_.class_stride[kLogProb], v);
    }
  }

  // S = sum(a) as hi + lo (see run()).
  struct SplitCoefficients {
    double hi, lo;
  };
  SplitCoefficients coefficient_sum(const Sample& s, std::int64_t t, double& target_weight) const {
    training::CompensatedSum<double> total;
    const double keep = 1.0 - r_.smoothing;
    const double spread = r_.smoothing / static_cast<double>(r_.classes);
    if (r_.index_targets) {
      target_weight = weight_of(r_, t);
      total.add(keep * target_weight);
      if (spread != 0) total.add(spread * weight_sum_);
    } else {
      for (std::int64_t c = 0; c < r_.classes; ++c) total.add(coefficient(c, s, t, target_weight));
    }
    return {total.hi(), total.lo()};
  }

  double load(std::int64_t c, const Sample& s) const {
    return cpu::Element<T>::template load<double>(x_[s.logits + c * r_.class_stride[kLogits]]);
  }
  static void store(T* base, std::int64_t offset, double v) {
    if constexpr (std::is_same_v<T, double>) {
      base[offset] = v;
    } else {
      base[offset] = cpu::Element<T>::template store<double>(v);
    }
  }
  // a_c (see the top of the file).
  double coefficient(std::int64_t c, const Sample& s, std::int64_t t, double target_weight) const {
    const double keep = 1.0 - r_.smoothing;
    const double spread = r_.smoothing / static_cast<double>(r_.classes);
    if (r_.index_targets) {
      double a = c == t ? keep * target_weight : 0.0;
      if (spread != 0) a += spread * weight_of(r_, c);
      return a;
    }
    const double y = load_double<T>(static_cast<const std::byte*>(r_.target), s.target + c * r_.class_stride[kTarget]);
    const double target = spread != 0 ? keep * y + spread : y;
    return r_.weight == nullptr ? target : weight_of(r_, c) * target;
  }
  void fill_grad(const Sample& s, double v) const {
    if (grad_ == nullptr) return;
    for (std::int64_t c = 0; c < r_.classes; ++c) store(grad_, s.grad + c * r_.class_stride[kGrad], v);
  }

  const Request& r_;
  const T* x_;
  T* grad_;
  T* log_prob_;
  bool log_prob_replaces_logits_;  // the same data and strides (the only overlap allowed)
  double weight_sum_;  // sum of every class's weight (C without weights)
  double grad_scale_;
  bool stored_exps_;   // run_with_stored_exps takes every row it can
  bool double_exps_;   // logit_stats sums double exps (cancels_in_double)
  std::vector<double> class_weight_;  // every class's weight, for run_columns's smoothing
};

// Each sample's loss goes to the loss tensor (reduction none) or to row_loss.
template <class T>
void store_loss(const Request& r, std::int64_t row, std::int64_t offset, double loss, std::vector<double>& row_loss) {
  if (r.reduction == Reduction::none) store_as(r.dtype, r.loss, offset, loss);
  else row_loss[static_cast<std::size_t>(row)] = loss;
}

template <class T>
void run_rows(const Request& r, const RowKernel<T>& kernel, std::vector<double>& row_loss) {
  training::for_rows(r.fold.rows, r.threads, [&](std::int64_t begin, std::int64_t end) {
    RowCursor at(r.fold, begin);
    Scratch scratch;
    if (kernel.runs_row_batches()) {
      std::vector<Sample> batch(kernel.rows_per_batch());
      std::vector<double> losses(batch.size());
      for (std::int64_t row = begin; row < end;) {
        std::size_t count = 0;
        for (; count < batch.size() && row + static_cast<std::int64_t>(count) < end; ++count, at.next()) {
          batch[count] = {at.offset(kLogits), at.offset(kTarget), at.offset(kLoss), at.offset(kGrad),
                          at.offset(kLogProb)};
        }
        kernel.run_row_batch(batch.data(), count, scratch, losses.data());
        for (std::size_t j = 0; j < count; ++j, ++row) store_loss<T>(r, row, batch[j].loss, losses[j], row_loss);
      }
      return;
    }
    for (std::int64_t row = begin; row < end; ++row, at.next()) {
      Sample sample{at.offset(kLogits), at.offset(kTarget), at.offset(kLoss), at.offset(kGrad), at.offset(kLogProb)};
      if (kernel.prefetches_next_row() && row + 1 < end) {
        RowCursor after = at;
        after.next();
        sample.next_logits = after.offset(kLogits);
      }
      store_loss<T>(r, row, at.offset(kLoss), kernel.run(sample, scratch), row_loss);
    }
  });
}

// Request::columns: pieces of columns_per_piece samples across the lanes. Returns the
// sum of the losses for sum and mean: each piece's compensated sum, joined in piece
// order (the samples' order), the same for any thread count. (A loss per sample in a
// fresh buffer, summed by one thread afterwards, took [8, 21, 256, 256] 1.07-1.24x
// the time; docs/PERFORMANCE.md, forty-ninth session.)
template <class T>
double run_columns(const Request& r, const RowKernel<T>& kernel) {
  const std::int64_t width = columns_per_piece(r.classes);
  const std::int64_t pieces = (r.columns + width - 1) / width;
  const std::int64_t groups = r.fold.rows / r.columns;
  const auto inner = static_cast<std::size_t>(r.fold.rank - 1);
  std::array<std::int64_t, training::kMaxViews> step{};
  for (std::size_t v = 0; v < step.size(); ++v) step[v] = r.fold.strides[v][inner];
  const bool reduced = r.reduction != Reduction::none;
  std::vector<std::array<double, 2>> piece_sums(reduced ? static_cast<std::size_t>(groups * pieces) : 0);
  training::for_rows(groups * pieces, r.threads, [&](std::int64_t begin, std::int64_t end) {
    Scratch scratch;
    std::vector<double> losses(static_cast<std::size_t>(std::min(width, r.columns)));
    for (std::int64_t piece = begin; piece < end; ++piece) {
      const std::int64_t row = piece / pieces * r.columns + piece % pieces * width;
      const std::int64_t count = std::min(width, r.columns - piece % pieces * width);
      const RowCursor at(r.fold, row);
      const Sample first{at.offset(kLogits), at.offset(kTarget), at.offset(kLoss), at.offset(kGrad),
                         at.offset(kLogProb)};
      kernel.run_columns(first, step, static_cast<std::size_t>(count), scratch, losses.data());
      training::CompensatedSum<double> sum;
      for (std::int64_t j = 0; j < count; ++j) {
        const double loss = losses[static_cast<std::size_t>(j)];
        if (reduced) sum.add(loss);
        else store_as(r.dtype, r.loss, first.loss + j * step[kLoss], loss);
      }
      if (reduced) piece_sums[static_cast<std::size_t>(piece)] = {sum.hi(), sum.lo()};
    }
  });
  training::CompensatedSum<double> total;
  for (const auto& [hi, lo] : piece_sums) {
    total.add(hi);
    total.add(lo);
  }
  return total.hi();
}

template <class T>
void run_typed(const Request& r) {
  double class_weight_sum = static_cast<double>(r.classes);
  if (r.weight != nullptr) {
    training::CompensatedSum<double> sum;
    for (std::int64_t c = 0; c < r.classes; ++c) sum.add(weight_of(r, c));
    class_weight_sum = sum.hi();
  }
  const RowKernel<T> kernel(r, class_weight_sum);
  const std::int64_t rows = r.fold.rows;
  double result = 0;
  if (r.columns > 0) {
    if constexpr (kSimdTypes<T>) result = run_columns(r, kernel);
  } else {
    // Per-sample losses for sum and mean, added in order afterwards: the result does
    // not depend on the thread count. Compensated, but plain IEEE for non-finite
    // losses (ExactSum's correction would turn an infinite loss into NaN).
    std::vector<double> row_loss(r.reduction == Reduction::none ? 0 : static_cast<std::size_t>(rows));
    run_rows(r, kernel, row_loss);
    training::CompensatedSum<double> total;
    for (double v : row_loss) total.add(v);
    result = total.hi();
  }
  if (r.reduction == Reduction::none) return;
  if (r.reduction == Reduction::mean) result /= r.weight_total;
  store_as(r.dtype, r.loss, 0, result);
}

void run(const Request& r) {
  switch (r.dtype) {
    case DType::f32: return run_typed<float>(r);
    case DType::f64: return run_typed<double>(r);
    case DType::f16: return run_typed<half>(r);
    case DType::bf16: return run_typed<bfloat16>(r);
  }
}

}  // namespace

void cross_entropy(const TensorView& logits, const IndexView& target, const MutableTensorView& loss,
                   const CrossEntropyOptions& options, const CrossEntropyOutputs& outputs) {
  const Checker check("cross_entropy");
  Request r = validate(check, logits, nullptr, &target, loss, options, outputs);
  check_targets(check, target, r);
  run(r);
}

void cross_entropy(const TensorView& logits, const TensorView& target_probabilities, const MutableTensorView& loss,
                   const CrossEntropyOptions& options, const CrossEntropyOutputs& outputs) {
  const Checker check("cross_entropy");
  Request r = validate(check, logits, &target_probabilities, nullptr, loss, options, outputs);
  r.weight_total = static_cast<double>(r.fold.rows);  // the mean over samples, as PyTorch
  run(r);
}

}  // namespace smax
