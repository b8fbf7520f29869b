// smax bench: what a run found, and its output: the tables on stdout, the JSON and
// CSV files, and the plot (drawn by scripts/plot_bench.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "bench_impls.hpp"
#include "bench_timing.hpp"
#include "bench_workloads.hpp"

namespace smax::cli::bench {

// The settings of a run, for the header and the files.
struct RunInfo {
  std::vector<std::string> workloads;
  std::vector<int> threads;
  std::vector<std::string> impls;  // in table order
  std::size_t bytes_per_point = 0;
  std::size_t memory_budget = 0;
  std::size_t offset = 0;       // bytes past a page where every tensor starts
  std::size_t cache_bytes = 0;  // the last-level cache the rotation has to exceed
  int repeats = 0;
  std::uint64_t seed = 0;
  std::vector<LibraryStatus> libraries;
};

// One implementation on one point at one thread count: measured, or skipped.
struct Result {
  std::size_t point_index = 0;  // into the run's points
  Point point;
  int threads = 1;
  std::string impl;
  bool is_library = false;
  bool is_copy = false;  // a copy of the same bytes: a physical limit, not a softmax
  bool skipped = false;
  std::string note;  // the skip reason, or what ran (e.g. auto's plan)
  Measurement measurement;
  bool from_dram = false;  // the rotated buffers exceeded the last-level cache
  // Filled by derive(): comparisons with the other results of the same point.
  double gbps = 0;
  double copy_fraction = NAN;          // gbps / the faster copy's gbps
  double best_library_ratio = NAN;     // gbps / the best library's (other than this one)

  bool failed() const { return !skipped && !measurement.problem.empty(); }
  // Whether a failed check fails the run. Not for naive, the textbook formula in float
  // (no max, a plain running sum): off the reference on long rows is what it shows.
  bool fails_run() const { return failed() && impl != kNaiveImpl; }
};

// Computes gbps and the ratios of every result from the others of its point.
void derive(std::vector<Result>& results);

void print_header(std::ostream& out, const RunInfo& info);
// The table of one workload: one line per point and thread count, GB/s per
// implementation, then auto's fraction of copy and ratio to the best library,
// the worst errors, failures and skips.
void print_workload(std::ostream& out, const std::string& workload, const RunInfo& info,
                    const std::vector<Result>& results);

// Throw smax::Error(Errc::io) when a file cannot be written.
void write_json(const std::filesystem::path& path, const RunInfo& info, const std::vector<Result>& results);
void write_csv(const std::filesystem::path& path, const std::vector<Result>& results);

// Runs scripts/plot_bench.py on a JSON file. Returns an empty string on success,
// else what went wrong (python3 or matplotlib missing, the script not found, ...).
std::string draw_plot(const std::filesystem::path& json, const std::filesystem::path& image);

}  // namespace smax::cli::bench

namespace smax::cli::bench {

// A one-line progress bar on stderr, only when stderr is a terminal: the workload,
// the point and the implementation being measured.
class Progress {
 public:
  explicit Progress(std::size_t total);
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void step(const std::string& what);  // about to measure `what`
  void clear();                        // erase the bar (before printing a table)

 private:
  std::size_t total_;
  std::size_t done_ = 0;
  bool enabled_;
  bool shown_ = false;
};

}  // namespace smax::cli::bench
