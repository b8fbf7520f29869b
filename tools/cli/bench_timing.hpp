// smax bench: the measurement. Buffers rotated past the last-level cache, fresh
// random inputs, outputs poisoned with NaN before every run and checked after it,
// and the median of repeated runs after a warm-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_impls.hpp"
#include "bench_workloads.hpp"

namespace smax::cli::bench {

// The layout of a point's rotated buffers, shared by softmax's Workspace and the
// training bench: arenas start at a page, every tensor `offset` bytes past one.
inline constexpr std::size_t kPage = 4096;

// Bytes from one tensor of a set to the next: whole pages holding offset + bytes.
std::size_t tensor_stride(std::size_t tensor_bytes, std::size_t offset);

// How many sets of `set_bytes` to rotate through: enough to move twice the cache
// (caches do not evict in exact LRU order), within the memory budget, at least one.
std::size_t rotation_sets(std::size_t set_bytes, std::size_t cache_bytes, std::size_t memory_budget);

// The input and output tensors of one point, repeated in as many identical sets as
// it takes to exceed the last-level cache (within a memory budget). Runs take the
// sets in turn, so a set comes back only after more than the cache's worth of
// other data has been touched: a point whose sets exceed the cache is measured from
// DRAM, as a model's activations would be, not from a cache warmed by the last run.
// Every tensor starts `offset` bytes past a page (NumPy and malloc put large blocks
// 16 bytes past one; 0 measures page-aligned tensors).
class Workspace {
 public:
  Workspace(std::size_t memory_budget, std::size_t cache_bytes, std::size_t offset);
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();

  // Fills set 0's input with normal(0, 3) values (never zero) from `seed`, rounded
  // to the point's dtype, copies it to the other sets and poisons every output.
  void load(const Point& point, std::uint64_t seed);

  struct Set {
    const std::byte* x;
    std::byte* y;
  };
  Set next();  // the next set in the rotation
  const std::byte* input() const { return set_at(0); }  // set 0's input

  // Fills y with quiet NaNs of the point's dtype: a kernel that skips an element
  // leaves a NaN the check will find.
  void poison(std::byte* y) const;

  std::size_t sets() const { return sets_; }
  std::size_t footprint() const { return sets_ * set_stride_; }
  // True when the rotation moves more than the last-level cache holds.
  bool from_dram() const { return footprint() > cache_bytes_; }

 private:
  std::size_t memory_budget_;
  std::size_t cache_bytes_;
  std::size_t offset_;
  Point point_;
  std::byte* base_ = nullptr;  // the arena, reused (and grown) from point to point
  std::size_t capacity_ = 0;
  std::size_t tensor_stride_ = 0;  // bytes from a set's x to its y (a whole number of pages)
  std::size_t set_stride_ = 0;
  std::size_t sets_ = 0;
  std::size_t cursor_ = 0;

  std::byte* set_at(std::size_t s) const { return base_ + offset_ + s * set_stride_; }  // its x
};

// The check of a run's output: every element finite and >= 0 (<= 0 for
// log_softmax), and the largest
// relative error against the long double reference (smax::reference::row) on a
// sample of rows, computed once per point.
class Checker {
 public:
  Checker(const Point& point, const std::byte* x);

  struct Result {
    double max_rel_err = 0;  // over sampled outputs whose reference is a normal number
    std::string problem;     // empty when the output passes
  };
  Result output(const std::byte* y) const;  // y must be the point's op (softmax, log_softmax) of x
  Result copy(const std::byte* x, const std::byte* y) const;  // y must equal x bit for bit

  // Above this relative error the result is wrong, not merely imprecise (the
  // tables show the precision): tens of ulps for f16 and bf16; for f32 1%, because
  // a float sum over a row of 2^20 elements (naive, XNNPACK) is already off by 1e-3.
  static double tolerance(DType dtype);

 private:
  Point point_;
  std::vector<std::int64_t> rows_;            // the sampled rows
  std::vector<long double> reference_;        // their outputs, row after row
};

struct Measurement {
  double median_s = 0;     // of one call
  double min_s = 0;
  int repeats = 0;        // timed runs (after one warm-up)
  int calls = 1;          // calls per timed run (cache-resident points: see measure)
  double max_rel_err = 0;  // NaN for copy (no reference)
  std::string problem;    // empty when every run passed the check
};

// One warm-up run, then up to `repeats` timed runs: fewer, but at least 3, when the
// warm-up shows that `repeats` runs would take more than half a second. Every run
// takes the next set of the workspace, and its output is checked.
// Where the workspace is cache-resident, a timed run makes kMinCachedRunSeconds'
// worth of calls back to back on its set (Measurement::calls) and counts their mean:
// a single call of a few microseconds, right after the check's scalar long double
// code, would mostly measure the core waking its 512-bit units and refilling L1
// (1 x 32000 f32 here: 0.40 ns an element for such a call, 0.31 back to back).
inline constexpr double kMinCachedRunSeconds = 1e-3;
Measurement measure(const Kernel& kernel, bool is_copy, int repeats, Workspace& workspace, const Checker& checker);

}  // namespace smax::cli::bench
