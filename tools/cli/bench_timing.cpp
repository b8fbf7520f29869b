#include "bench_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <random>
#include <type_traits>

#include "reference/reference.hpp"
#include "smax/dtype.hpp"
#include "smax/info.hpp"

namespace smax::cli::bench {
namespace {

long double load(const std::byte* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f32: return reinterpret_cast<const float*>(data)[i];
    case DType::f64: return reinterpret_cast<const double*>(data)[i];
    case DType::f16: return to_float(reinterpret_cast<const half*>(data)[i]);
    case DType::bf16: return to_float(reinterpret_cast<const bfloat16*>(data)[i]);
  }
  return NAN;
}

// The smallest normal number of the dtype: relative errors of outputs below it
// measure the subnormal spacing, not the kernel, and are left out.
long double smallest_normal(DType dtype) {
  switch (dtype) {
    case DType::f16: return 0x1p-14L;
    case DType::f64: return std::numeric_limits<double>::min();
    case DType::f32:
    case DType::bf16: break;
  }
  return std::numeric_limits<float>::min();
}

// The index of the first output that is NaN, infinite or of the wrong sign (sign * v
// < 0); -1 if none.
template <class T>
std::int64_t first_bad(const std::byte* data, std::int64_t n, long double sign) {
  const T* y = reinterpret_cast<const T*>(data);
  for (std::int64_t i = 0; i < n; ++i) {
    long double v;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) v = y[i];
    else v = to_float(y[i]);
    if (!(sign * v >= 0) || std::isinf(v)) return i;
  }
  return -1;
}

// The first output that is NaN, infinite or of the wrong sign (softmax >= 0,
// log_softmax <= 0), or -1.
std::int64_t first_bad(const std::byte* y, DType dtype, std::int64_t n, Op op) {
  const long double sign = op == Op::log_softmax ? -1 : 1;
  switch (dtype) {
    case DType::f32: return first_bad<float>(y, n, sign);
    case DType::f16: return first_bad<half>(y, n, sign);
    case DType::bf16: return first_bad<bfloat16>(y, n, sign);
    case DType::f64: return first_bad<double>(y, n, sign);
  }
  return -1;
}

}  // namespace

// ---- Workspace -------------------------------------------------------------------

std::size_t tensor_stride(std::size_t tensor_bytes, std::size_t offset) {
  return (offset + tensor_bytes + kPage - 1) / kPage * kPage;
}

std::size_t rotation_sets(std::size_t set_bytes, std::size_t cache_bytes, std::size_t memory_budget) {
  const std::size_t wanted = (2 * cache_bytes + set_bytes - 1) / set_bytes;
  return std::max<std::size_t>(1, std::min(wanted, memory_budget / set_bytes));
}

Workspace::Workspace(std::size_t memory_budget, std::size_t cache_bytes, std::size_t offset)
    : memory_budget_(memory_budget), cache_bytes_(cache_bytes), offset_(offset) {}

Workspace::~Workspace() { std::free(base_); }

void Workspace::load(const Point& point, std::uint64_t seed) {
  point_ = point;
  tensor_stride_ = tensor_stride(point.tensor_bytes(), offset_);
  set_stride_ = 2 * tensor_stride_;
  sets_ = rotation_sets(set_stride_, cache_bytes_, memory_budget_);
  cursor_ = 0;
  if (footprint() > capacity_) {
    std::free(base_);
    base_ = nullptr;
    capacity_ = 0;
    base_ = static_cast<std::byte*>(std::aligned_alloc(kPage, footprint()));
    if (!base_) throw std::bad_alloc();
    capacity_ = footprint();
  }

  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::int64_t n = point.numel();
  std::byte* first = set_at(0);
  for (std::int64_t i = 0; i < n; ++i) {
    float v = normal(random);
    if (v == 0.0f) v = 0x1p-10f;  // inputs are never zero: a kernel that reads nothing cannot pass
    switch (point.dtype) {
      case DType::f32: reinterpret_cast<float*>(first)[i] = v; break;
      case DType::f64: reinterpret_cast<double*>(first)[i] = v; break;
      case DType::f16: reinterpret_cast<half*>(first)[i] = to_half(v); break;
      case DType::bf16: reinterpret_cast<bfloat16*>(first)[i] = to_bfloat16(v); break;
    }
  }
  for (std::size_t s = 0; s < sets_; ++s) {
    std::byte* set = set_at(s);
    if (s > 0) std::memcpy(set, first, point.tensor_bytes());
    poison(set + tensor_stride_);
  }
}

Workspace::Set Workspace::next() {
  std::byte* set = set_at(cursor_);
  cursor_ = (cursor_ + 1) % sets_;
  return {set, set + tensor_stride_};
}

void Workspace::poison(std::byte* y) const {
  const std::int64_t n = point_.numel();
  switch (point_.dtype) {
    case DType::f32: std::fill_n(reinterpret_cast<float*>(y), n, std::numeric_limits<float>::quiet_NaN()); break;
    case DType::f64: std::fill_n(reinterpret_cast<double*>(y), n, std::numeric_limits<double>::quiet_NaN()); break;
    case DType::f16: std::fill_n(reinterpret_cast<half*>(y), n, half{0x7e00}); break;
    case DType::bf16: std::fill_n(reinterpret_cast<bfloat16*>(y), n, bfloat16{0x7fc0}); break;
  }
}

// ---- Checker ---------------------------------------------------------------------

namespace {

// Row r of a C-order tensor normalised along `axis`: the index of its element k.
struct RowIndex {
  std::int64_t length;
  std::int64_t inner;  // product of the extents after the axis: the row's stride

  std::int64_t at(std::int64_t r, std::int64_t k) const {
    return (r / inner) * length * inner + k * inner + r % inner;
  }
};

RowIndex row_index(const Point& point) {
  std::int64_t inner = 1;
  for (std::size_t i = static_cast<std::size_t>(point.axis) + 1; i < point.shape.size(); ++i) inner *= point.shape[i];
  return {point.length(), inner};
}

}  // namespace

Checker::Checker(const Point& point, const std::byte* x) : point_(point) {
  // Up to 8 rows spread over the tensor (the first and the last among them), and no
  // more than about a million reference elements unless one row is longer: the
  // long double reference costs far more than the kernels.
  constexpr std::int64_t kMaxRows = 8;
  constexpr std::int64_t kElementBudget = std::int64_t{1} << 20;
  const std::int64_t rows = point.rows();
  const std::int64_t length = point.length();
  const std::int64_t count = std::clamp<std::int64_t>(kElementBudget / std::max<std::int64_t>(length, 1), 1,
                                                      std::min(kMaxRows, rows));
  for (std::int64_t i = 0; i < count; ++i) rows_.push_back(count == 1 ? 0 : i * (rows - 1) / (count - 1));

  const RowIndex index = row_index(point);
  std::vector<long double> row(static_cast<std::size_t>(length));
  reference_.resize(rows_.size() * row.size());
  for (std::size_t s = 0; s < rows_.size(); ++s) {
    for (std::int64_t k = 0; k < length; ++k) row[static_cast<std::size_t>(k)] = load(x, point.dtype, index.at(rows_[s], k));
    reference::row(point.op, row, std::span<long double>(reference_).subspan(s * row.size(), row.size()));
  }
}

double Checker::tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16: return 2e-2;   // about 20 ulp (2^-10)
    case DType::bf16: return 5e-2;  // about 6 ulp (2^-7)
    case DType::f32: return 1e-2;   // float sums over 2^20 elements reach 1e-3 (naive, XNNPACK)
    case DType::f64: return 1e-8;
  }
  return 0;
}

Checker::Result Checker::output(const std::byte* y) const {
  Result result;
  const std::int64_t n = point_.numel();
  if (const std::int64_t bad = first_bad(y, point_.dtype, n, point_.op); bad >= 0) {
    const long double v = load(y, point_.dtype, bad);
    result.problem = "output[" + std::to_string(bad) + "] is " +
                     (std::isnan(v) ? std::string("NaN") : std::to_string(static_cast<double>(v))) + ", but a " +
                     std::string(to_string(point_.op)) + " of finite inputs is finite and " +
                     (point_.op == Op::log_softmax ? "<= 0" : ">= 0");
    result.max_rel_err = NAN;
    return result;
  }
  const RowIndex index = row_index(point_);
  const long double tiny = smallest_normal(point_.dtype);
  long double worst = 0;
  for (std::size_t s = 0; s < rows_.size(); ++s) {
    for (std::int64_t k = 0; k < index.length; ++k) {
      const long double want = reference_[s * static_cast<std::size_t>(index.length) + static_cast<std::size_t>(k)];
      if (std::fabs(want) < tiny) continue;
      worst = std::max(worst, std::fabs((load(y, point_.dtype, index.at(rows_[s], k)) - want) / want));
    }
  }
  result.max_rel_err = static_cast<double>(worst);
  if (result.max_rel_err > tolerance(point_.dtype)) {
    char text[160];
    std::snprintf(text, sizeof text, "max relative error %.3g exceeds %.3g: the output is off the reference",
                  result.max_rel_err, tolerance(point_.dtype));
    result.problem = text;
  }
  return result;
}

Checker::Result Checker::copy(const std::byte* x, const std::byte* y) const {
  Result result;
  result.max_rel_err = NAN;
  if (std::memcmp(x, y, point_.tensor_bytes()) != 0) result.problem = "the copy differs from its input";
  return result;
}

// ---- measure ---------------------------------------------------------------------

Measurement measure(const Kernel& kernel, bool is_copy, int repeats, Workspace& workspace, const Checker& checker) {
  Measurement m;
  m.max_rel_err = is_copy ? NAN : 0.0;
  std::vector<double> seconds;
  // Run 0 is the warm-up (first-touch of code, thread start-up, library caches).
  // Its time sets the number of timed runs: `repeats`, or fewer (never under 3)
  // for calls so slow that `repeats` of them would take more than kBudget.
  constexpr double kBudget = 0.5;
  int runs = repeats;
  for (int run = 0; run <= runs; ++run) {
    const Workspace::Set set = workspace.next();
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int call = 0; call < (run == 0 ? 1 : m.calls); ++call) kernel(set.x, set.y);
    } catch (const std::exception& e) {
      m.problem = e.what();
      break;
    }
    const auto stop = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(stop - start).count();
    if (run == 0) {
      runs = std::clamp(static_cast<int>(kBudget / std::max(elapsed, 1e-9)), std::min(3, repeats), repeats);
      if (!workspace.from_dram()) {
        // Counted from a second call: the warm-up's first touches can take many calls'
        // time, and a run of too few calls would then count the first call's cold
        // cache (after the check below) in its mean.
        const auto again = std::chrono::steady_clock::now();
        try {
          kernel(set.x, set.y);
        } catch (const std::exception& e) {
          m.problem = e.what();
          break;
        }
        const double call = std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();
        m.calls = std::clamp(static_cast<int>(std::ceil(kMinCachedRunSeconds / std::max(call, 1e-9))), 1, 1000);
      }
    } else {
      seconds.push_back(elapsed / m.calls);
    }
    const Checker::Result check = is_copy ? checker.copy(set.x, set.y) : checker.output(set.y);
    if (!is_copy) m.max_rel_err = std::isnan(check.max_rel_err) ? NAN : std::max(m.max_rel_err, check.max_rel_err);
    // Poison right after the check rather than right before the next use of this
    // set: the NaNs then leave the cache with the rest of the set, and the next run
    // writes to cold lines as the kernels would in a model.
    workspace.poison(set.y);
    if (!check.problem.empty() && m.problem.empty()) m.problem = check.problem;
  }
  m.repeats = static_cast<int>(seconds.size());
  if (!seconds.empty()) {
    std::sort(seconds.begin(), seconds.end());
    const std::size_t half = seconds.size() / 2;
    m.median_s = seconds.size() % 2 ? seconds[half] : (seconds[half - 1] + seconds[half]) / 2;
    m.min_s = seconds.front();
  }
  return m;
}

}  // namespace smax::cli::bench
