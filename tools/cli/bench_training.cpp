#include "bench_training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <new>
#include <random>

#include "bench_impls.hpp"
#include "bench_timing.hpp"
#include "smax/ops.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"
#include "smax/training.hpp"

namespace smax::cli::bench {
namespace {

void store(std::byte* data, DType dtype, std::int64_t i, float v) {
  switch (dtype) {
    case DType::f32: reinterpret_cast<float*>(data)[i] = v; return;
    case DType::f64: reinterpret_cast<double*>(data)[i] = v; return;
    case DType::f16: reinterpret_cast<half*>(data)[i] = to_half(v); return;
    case DType::bf16: reinterpret_cast<bfloat16*>(data)[i] = to_bfloat16(v); return;
  }
}

double load(const std::byte* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f32: return reinterpret_cast<const float*>(data)[i];
    case DType::f64: return reinterpret_cast<const double*>(data)[i];
    case DType::f16: return to_float(reinterpret_cast<const half*>(data)[i]);
    case DType::bf16: return to_float(reinterpret_cast<const bfloat16*>(data)[i]);
  }
  return std::nan("");
}

// The sets of one point: inputs a (y, log_y or the logits) and b (dy), output out,
// repeated past the last-level cache (within the memory budget) and taken in turn,
// as Workspace does for softmax.
class TrainingBuffers {
 public:
  TrainingBuffers(const TrainingPoint& point, const TrainingSettings& settings)
      : point_(point), offset_(settings.offset), tensor_stride_(tensor_stride(point.tensor_bytes(), offset_)) {
    const std::size_t set_bytes = 3 * tensor_stride_;
    sets_ = rotation_sets(set_bytes, settings.cache_bytes, settings.memory_budget);
    base_ = static_cast<std::byte*>(std::aligned_alloc(kPage, sets_ * set_bytes));
    if (base_ == nullptr) throw std::bad_alloc();
    fill(settings.seed);
  }
  TrainingBuffers(const TrainingBuffers&) = delete;
  TrainingBuffers& operator=(const TrainingBuffers&) = delete;
  ~TrainingBuffers() { std::free(base_); }

  struct Set {
    std::byte* a;
    std::byte* b;
    std::byte* out;
  };
  Set next() {
    std::byte* set = base_ + offset_ + cursor_ * 3 * tensor_stride_;
    cursor_ = (cursor_ + 1) % sets_;
    return {set, set + tensor_stride_, set + 2 * tensor_stride_};
  }
  const std::vector<std::int64_t>& targets() const { return targets_; }
  std::size_t sets() const { return sets_; }
  bool from_dram(std::size_t cache_bytes) const { return sets_ * 3 * tensor_stride_ > cache_bytes; }

  void poison(std::byte* out) const {
    for (std::int64_t i = 0; i < numel(); ++i) store(out, point_.dtype, i, std::numeric_limits<float>::quiet_NaN());
  }
  // The index of the first output that is not finite (unwritten, or wrong); -1 if none.
  std::int64_t first_bad(const std::byte* out) const {
    for (std::int64_t i = 0; i < numel(); ++i) {
      if (!std::isfinite(load(out, point_.dtype, i))) return i;
    }
    return -1;
  }

 private:
  std::int64_t numel() const { return point_.numel(); }

  // Logits normal(0, 3); for the backward passes a = softmax or log_softmax of them
  // (what a forward pass hands over) and b = dy normal(0, 1); for cross-entropy
  // random class-index targets.
  void fill(std::uint64_t seed) {
    std::mt19937_64 random(seed);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    std::normal_distribution<float> gradient(0.0f, 1.0f);
    Set first = next();
    cursor_ = 0;
    const std::vector<std::int64_t>& shape = point_.shape;
    if (point_.op == "cross_entropy") {
      for (std::int64_t i = 0; i < numel(); ++i) store(first.a, point_.dtype, i, logit(random));
      targets_.resize(static_cast<std::size_t>(numel() / point_.classes()));
      std::uniform_int_distribution<std::int64_t> cls(0, point_.classes() - 1);
      for (auto& t : targets_) t = cls(random);
    } else {
      for (std::int64_t i = 0; i < numel(); ++i) store(first.out, point_.dtype, i, logit(random));
      const TensorView logits(first.out, point_.dtype, shape);
      const MutableTensorView forward(first.a, point_.dtype, shape);
      Options options;
      options.axis = point_.axis;
      if (point_.op == "softmax_backward") softmax(logits, forward, options);
      else log_softmax(logits, forward, options);
      for (std::int64_t i = 0; i < numel(); ++i) store(first.b, point_.dtype, i, gradient(random));
    }
    for (std::size_t s = 1; s < sets_; ++s) {
      std::memcpy(first.a + s * 3 * tensor_stride_, first.a, 2 * tensor_stride_);
    }
    for (std::size_t s = 0; s < sets_; ++s) poison(next().out);
  }

  TrainingPoint point_;
  std::size_t offset_;
  std::size_t tensor_stride_;
  std::size_t sets_ = 1;
  std::size_t cursor_ = 0;
  std::byte* base_ = nullptr;
  std::vector<std::int64_t> targets_;
};

// The memory limit for the op's bytes: every thread streams its slice (for_each_slice),
// reading one input (a copy) or two (a bytewise xor of both) and writing one
// output, with cached stores or non-temporal ones (no read of the output's lines
// first; only where kNonTemporalStores).
void limit_kernel(const TrainingPoint& point, int threads, const TrainingBuffers::Set& set, bool non_temporal) {
  const bool two_inputs = point.tensors_read() == 2;
  for_each_slice(point.tensor_bytes(), threads, [&](std::size_t begin, std::size_t end) {
    const std::size_t n = end - begin;
    if (non_temporal) {
      if (two_inputs) xor_streaming(set.a + begin, set.b + begin, set.out + begin, n);
      else copy_streaming(set.a + begin, set.out + begin, n);
    } else if (!two_inputs) {
      if (n > 0) std::memcpy(set.out + begin, set.a + begin, n);
    } else {
      const auto* a = reinterpret_cast<const std::uint32_t*>(set.a + begin);
      const auto* b = reinterpret_cast<const std::uint32_t*>(set.b + begin);
      auto* out = reinterpret_cast<std::uint32_t*>(set.out + begin);
      const std::size_t words = n / 4;  // tensor bytes are whole words: f32, or an even bf16 count
      for (std::size_t i = 0; i < words; ++i) out[i] = a[i] ^ b[i];
    }
  });
}

void op_kernel(const TrainingPoint& point, int threads, const TrainingBuffers& buffers,
               const TrainingBuffers::Set& set) {
  const std::vector<std::int64_t>& shape = point.shape;
  const TensorView a(set.a, point.dtype, shape);
  const MutableTensorView out(set.out, point.dtype, shape);
  if (point.op == "cross_entropy") {
    CrossEntropyOptions options;
    options.axis = point.axis;
    options.threads = threads;
    float loss_f32 = 0;
    bfloat16 loss_bf16{};
    const MutableTensorView loss(point.dtype == DType::f32 ? static_cast<void*>(&loss_f32) : &loss_bf16,
                                 point.dtype, {});
    CrossEntropyOutputs outputs;
    outputs.grad = out;
    const std::vector<std::int64_t> batch = point.batch_shape();
    cross_entropy(a, IndexView(buffers.targets().data(), batch), loss, options, outputs);
    return;
  }
  BackwardOptions options;
  options.axis = point.axis;
  options.threads = threads;
  const TensorView b(set.b, point.dtype, shape);
  if (point.op == "softmax_backward") softmax_backward(a, b, out, options);
  else log_softmax_backward(a, b, out, options);
}

struct Timing {
  double median_s = 0;
  int calls = 1;  // per timed run
  bool failed = false;
};

// A timed run makes at least this much time's worth of calls back to back, each on
// the next set (so from DRAM where the sets exceed the cache), at most one call a
// set, and counts their mean: one call of a third of a millisecond (8 x 128256) is
// too short to time alone on a VM, whose medians of such calls moved 2x between runs
// (docs/PERFORMANCE.md, thirty-seventh session).
inline constexpr double kMinRunSeconds = 2e-3;

// One warm-up call, then the median of `repeats` runs (at least 3; fewer than asked
// only when the calls are slow). Every output is checked after its call and then
// NaN-filled, so that the NaNs leave the cache with the rest of the set, as in the
// softmax tables (Workspace), and the next call on it writes to cold lines.
template <class Run>
Timing time_runs(int repeats, TrainingBuffers& buffers, bool check, Run&& run) {
  using Clock = std::chrono::steady_clock;
  Timing timing;
  std::vector<TrainingBuffers::Set> sets;
  std::vector<double> seconds;
  for (int i = 0; i <= repeats; ++i) {
    sets.clear();
    for (int call = 0; call < (i == 0 ? 1 : timing.calls); ++call) sets.push_back(buffers.next());
    const auto start = Clock::now();
    for (const TrainingBuffers::Set& set : sets) run(set);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    for (const TrainingBuffers::Set& set : sets) {
      if (check && buffers.first_bad(set.out) >= 0) timing.failed = true;
      buffers.poison(set.out);
    }
    if (i == 0) {
      if (s * repeats > 0.5) repeats = std::max(3, static_cast<int>(0.5 / s));
      const auto wanted = static_cast<std::size_t>(std::ceil(kMinRunSeconds / std::max(s, 1e-9)));
      timing.calls = static_cast<int>(std::clamp<std::size_t>(wanted, 1, buffers.sets()));
      continue;
    }
    seconds.push_back(s / timing.calls);
  }
  std::sort(seconds.begin(), seconds.end());
  timing.median_s = seconds[seconds.size() / 2];
  return timing;
}

}  // namespace

std::int64_t TrainingPoint::numel() const {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

std::int64_t TrainingPoint::classes() const {
  return shape[static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(shape.size()) : axis)];
}

std::vector<std::int64_t> TrainingPoint::batch_shape() const {
  std::vector<std::int64_t> batch = shape;
  batch.erase(batch.begin() + (axis < 0 ? axis + static_cast<int>(shape.size()) : axis));
  return batch;
}

std::size_t TrainingPoint::tensor_bytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype); }

std::size_t TrainingPoint::moved_bytes() const {
  return static_cast<std::size_t>(tensors_read() + 1) * tensor_bytes();
}

std::string TrainingPoint::label() const {
  std::string text;
  for (std::int64_t e : shape) {
    if (!text.empty()) text += 'x';
    text += std::to_string(e);
  }
  if (axis != -1 && axis != static_cast<int>(shape.size()) - 1) {
    text += ':';
    text += std::to_string(axis);
  }
  return text;
}

std::vector<TrainingPoint> training_points() {
  std::vector<TrainingPoint> points;
  for (DType dtype : {DType::f32, DType::bf16}) {
    // LLM vocabularies along the last axis, a classification batch (CIFAR-100's
    // classes: short rows, whose cost a row shows), and a segmentation batch along
    // axis 1 (PASCAL VOC's 21 classes over 256 x 256 pixels: PyTorch's layout).
    const std::pair<std::vector<std::int64_t>, int> shapes[] = {
        {{8, 128256}, -1}, {{4096, 32000}, -1}, {{16384, 100}, -1}, {{8, 21, 256, 256}, 1}};
    for (const auto& [shape, axis] : shapes) {
      for (const char* op : {"softmax_backward", "log_softmax_backward", "cross_entropy"}) {
        points.push_back(TrainingPoint{op, shape, axis, dtype});
      }
    }
  }
  return points;
}

int run_training(const TrainingSettings& settings, std::ostream& out) {
  out << "training: backward passes (read y and dy, write dx) and cross-entropy with its gradient (read the\n"
      << "          logits, write the gradient; mean over class-index targets); GB/s = those bytes / median\n"
      << "          time; copy = a plain kernel moving the same bytes (backward: 2 reads + 1 write;\n"
      << "          cross-entropy: 1 read + 1 write) with cached stores, nt = the same with non-temporal\n"
      << "          stores; 'of copy' is of the faster; 'calls' = calls per timed run, each on the next of the\n"
      << "          buffer sets, their mean counted; outputs checked after every call, then NaN-filled\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-21s %-15s %-5s %7s %5s %5s %11s %9s %9s %9s %8s\n", "op", "shape", "dtype",
                "threads", "data", "calls", "median ms", "GB/s", "copy GB/s", "nt GB/s", "of copy");
  out << line;
  int failures = 0;
  const std::vector<TrainingPoint> points = training_points();
  for (std::size_t index = 0; index < points.size(); ++index) {
    const TrainingPoint& point = points[index];
    TrainingSettings seeded = settings;
    seeded.seed = settings.seed * 1000003 + index;
    TrainingBuffers buffers(point, seeded);
    for (int threads : settings.threads) {
      std::cerr << "\r[" << index + 1 << "/" << points.size() << "] training " << point.op << ' ' << point.label()
                << ' ' << to_string(point.dtype) << ", " << threads << " thread(s)        " << std::flush;
      const Timing cached = time_runs(settings.repeats, buffers, false, [&](const TrainingBuffers::Set& set) {
        limit_kernel(point, threads, set, false);
      });
      const Timing non_temporal =
          kNonTemporalStores ? time_runs(settings.repeats, buffers, false,
                                         [&](const TrainingBuffers::Set& set) { limit_kernel(point, threads, set, true); })
                             : Timing{};
      const Timing op = time_runs(settings.repeats, buffers, true, [&](const TrainingBuffers::Set& set) {
        op_kernel(point, threads, buffers, set);
      });
      if (op.failed) ++failures;
      const double bytes = static_cast<double>(point.moved_bytes());
      const double gbps = bytes / op.median_s / 1e9;
      const double cached_gbps = bytes / cached.median_s / 1e9;
      const double nt_gbps = kNonTemporalStores ? bytes / non_temporal.median_s / 1e9 : NAN;
      const double copy_gbps = kNonTemporalStores ? std::max(cached_gbps, nt_gbps) : cached_gbps;
      std::snprintf(line, sizeof line, "%-21s %-15s %-5s %7d %5s %5d %11.3f %9.2f %9.2f %9.2f %7.0f%%%s\n",
                    point.op.c_str(), point.label().c_str(), std::string(to_string(point.dtype)).c_str(), threads,
                    buffers.from_dram(settings.cache_bytes) ? "dram" : "cache", op.calls, op.median_s * 1e3, gbps,
                    cached_gbps,
                    nt_gbps, 100.0 * gbps / copy_gbps, op.failed ? " !" : "");
      std::cerr << "\r" << std::string(100, ' ') << "\r" << std::flush;
      out << line << std::flush;
    }
  }
  out << '\n';
  return failures;
}

}  // namespace smax::cli::bench
