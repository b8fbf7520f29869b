// smax bench: the workloads, each a list of tensors ("points") that every
// implementation normalises side by side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smax/dtype.hpp"
#include "smax/info.hpp"

namespace smax::cli::bench {

// One tensor and the axis to normalise: the unit every implementation is timed on.
struct Point {
  std::string workload;  // "sweep", "vocab", ...
  std::vector<std::int64_t> shape;
  int axis = 0;  // in [0, rank): the workloads never use negative axes
  DType dtype = DType::f32;
  Op op = Op::softmax;  // softmax or log_softmax (--shape with --op)

  std::int64_t numel() const;
  std::int64_t length() const;  // extent of the softmax axis
  std::int64_t rows() const;    // independent rows: numel / length
  std::size_t tensor_bytes() const;  // one tensor (the input, or the output)
  // Bytes a call moves: the input read once and the output written once.
  std::size_t moved_bytes() const { return 2 * tensor_bytes(); }
  // Extents joined by 'x', with the softmax axis in brackets when it is not the
  // last one, after the op where it is not softmax: "64x4096", "32x[81]x8732",
  // "log-softmax 4096x64".
  std::string label() const;
};

struct WorkloadInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help and --list
  bool in_default;           // part of a plain `smax bench`
};

// Every workload, in the order they run.
std::span<const WorkloadInfo> workloads();

// The summary of a workload, or of the points --shape gives (kShapeWorkload).
std::string_view workload_summary(std::string_view name);

// The workload of the points given on the command line: each --shape in each
// --dtype, along --axis, for each --op.
inline constexpr std::string_view kShapeWorkload = "shape";
std::vector<Point> shape_points(std::span<const std::vector<std::int64_t>> shapes, int axis,
                                std::span<const DType> dtypes, std::span<const Op> ops);

// The points of the named workloads (known names, in the order given).
// `bytes_per_point` is what a call should move (input + output) in the workloads
// whose row count is free (sweep, attention, half's sweep points).
std::vector<Point> make_points(std::span<const std::string> names, std::size_t bytes_per_point);

}  // namespace smax::cli::bench
