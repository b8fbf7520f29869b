#include "bench_workloads.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

#include "choices.hpp"

namespace smax::cli::bench {
namespace {

constexpr std::array<WorkloadInfo, 10> kWorkloads{{
    {"sweep", "f32 rows x columns, columns 128 to 2^20 (doubling, and 1000, 3000, 50257, 300000), rows sized by --bytes",
     true},
    {"vocab", "LLM vocabulary rows: 1, 8 and 64 rows of 32000, 128256, 151936 and 262144 (f32)", true},
    {"attention", "attention scores [batch, 16 heads, queries, keys], keys 128 to 8192, sized by --bytes (f32)", true},
    {"classify", "classifier logits: 256 x 1000 (f32)", true},
    {"axis", "non-last axis: [32, 81, 8732] axis 1, 4096 x 4096 axis 0, [8, 256, 56, 56] axis 1 (f32)", false},
    {"long-row", "single rows of 2^22 to 2^27 elements (f32; 16 MiB to 512 MiB each)", false},
    {"half", "bf16 and f16: 256 x 1000, 8 x 32000, 8 x 128256, sweep columns 1024, 16384, 262144, "
             "[8, 256, 56, 56] axis 1",
     false},
    {"cache", "one core, rows that fit in cache: 256 x 1024, 64 x 1000, 1 x 32000, 1 x 128256 (f32; run with "
              "--threads 1 --memory 0)",
     false},
    {"dram", "a large batch from memory: 16384 x 4096 in f32, bf16 and f16", false},
    {"training", "softmax_backward, log_softmax_backward and cross-entropy with its gradient: 8 x 128256, "
                 "4096 x 32000 and [8, 21, 256, 256] along axis 1, f32 and bf16, against a copy of the same bytes "
                 "(a table of its own)",
     false},
}};

// Rows of `columns` elements that move about `bytes` (input + output); at least one.
std::int64_t rows_for(std::size_t bytes, std::int64_t columns, DType dtype) {
  const auto row_bytes = static_cast<std::size_t>(columns) * size_of(dtype) * 2;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>((bytes + row_bytes / 2) / row_bytes));
}

Point last_axis(const std::string& workload, std::vector<std::int64_t> shape, DType dtype = DType::f32) {
  const int axis = static_cast<int>(shape.size()) - 1;
  return Point{workload, std::move(shape), axis, dtype};
}

void add_sweep(std::vector<Point>& points, std::size_t bytes) {
  std::vector<std::int64_t> columns;
  for (std::int64_t c = 128; c <= (std::int64_t{1} << 20); c *= 2) columns.push_back(c);
  // Sizes that are not powers of two: a classifier, a 3K hidden size, GPT-2's
  // vocabulary, and a long odd row. They catch kernels tuned to round sizes.
  for (std::int64_t c : {1000, 3000, 50257, 300000}) columns.push_back(c);
  std::sort(columns.begin(), columns.end());
  for (std::int64_t c : columns) points.push_back(last_axis("sweep", {rows_for(bytes, c, DType::f32), c}));
}

void add_vocab(std::vector<Point>& points) {
  for (std::int64_t rows : {1, 8, 64}) {
    for (std::int64_t vocabulary : {32000, 128256, 151936, 262144}) points.push_back(last_axis("vocab", {rows, vocabulary}));
  }
}

void add_attention(std::vector<Point>& points, std::size_t bytes) {
  constexpr std::int64_t kHeads = 16;
  for (std::int64_t keys = 128; keys <= 8192; keys *= 2) {
    // As many rows as --bytes allows: queries up to the key count (self-attention),
    // then more batches.
    const std::int64_t rows = rows_for(bytes, keys, DType::f32);
    const std::int64_t queries = std::clamp<std::int64_t>(rows / kHeads, 1, keys);
    const std::int64_t batch = std::max<std::int64_t>(1, rows / (kHeads * queries));
    points.push_back(last_axis("attention", {batch, kHeads, queries, keys}));
  }
}

void add_axis(std::vector<Point>& points) {
  points.push_back(Point{"axis", {32, 81, 8732}, 1, DType::f32});  // SSD's class scores
  points.push_back(Point{"axis", {4096, 4096}, 0, DType::f32});    // a column softmax
  points.push_back(Point{"axis", {8, 256, 56, 56}, 1, DType::f32});  // NCHW channel softmax
}

void add_long_rows(std::vector<Point>& points) {
  for (int log2 = 22; log2 <= 27; ++log2) points.push_back(last_axis("long-row", {std::int64_t{1} << log2}));
}

void add_half(std::vector<Point>& points, std::size_t bytes) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    points.push_back(last_axis("half", {256, 1000}, dtype));
    points.push_back(last_axis("half", {8, 32000}, dtype));
    points.push_back(last_axis("half", {8, 128256}, dtype));
    for (std::int64_t c : {1024, 16384, 262144}) points.push_back(last_axis("half", {rows_for(bytes, c, dtype), c}, dtype));
    points.push_back(Point{"half", {8, 256, 56, 56}, 1, dtype});
  }
}

void add_cache(std::vector<Point>& points) {
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{256, 1024}, std::vector<std::int64_t>{64, 1000},
                                          std::vector<std::int64_t>{1, 32000}, std::vector<std::int64_t>{1, 128256}}) {
    points.push_back(last_axis("cache", std::move(shape)));
  }
}

void add_dram(std::vector<Point>& points) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) points.push_back(last_axis("dram", {16384, 4096}, dtype));
}

}  // namespace

std::int64_t Point::numel() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

std::int64_t Point::length() const { return shape[static_cast<std::size_t>(axis)]; }

std::int64_t Point::rows() const { return numel() / length(); }

std::size_t Point::tensor_bytes() const { return static_cast<std::size_t>(numel()) * size_of(dtype); }

std::string Point::label() const {
  const bool last = axis == static_cast<int>(shape.size()) - 1;
  std::string text;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += 'x';
    const bool marked = !last && static_cast<int>(i) == axis;
    if (marked) text += '[';
    text += std::to_string(shape[i]);
    if (marked) text += ']';
  }
  return op == Op::softmax ? text : op_command_name(op) + " " + text;
}

std::span<const WorkloadInfo> workloads() { return kWorkloads; }

std::string_view workload_summary(std::string_view name) {
  if (name == kShapeWorkload) return "the shapes given by --shape, along --axis, in each --dtype, for each --op";
  for (const WorkloadInfo& w : kWorkloads) {
    if (w.name == name) return w.summary;
  }
  return {};
}

std::vector<Point> shape_points(std::span<const std::vector<std::int64_t>> shapes, int axis,
                                std::span<const DType> dtypes, std::span<const Op> ops) {
  std::vector<Point> points;
  for (const Op op : ops) {
    for (const std::vector<std::int64_t>& shape : shapes) {
      const int rank = static_cast<int>(shape.size());
      const int normalized = axis < 0 ? axis + rank : axis;
      for (const DType dtype : dtypes) {
        points.push_back(Point{std::string(kShapeWorkload), shape, normalized, dtype, op});
      }
    }
  }
  return points;
}

std::vector<Point> make_points(std::span<const std::string> names, std::size_t bytes_per_point) {
  std::vector<Point> points;
  for (const std::string& name : names) {
    if (name == "sweep") add_sweep(points, bytes_per_point);
    else if (name == "vocab") add_vocab(points);
    else if (name == "attention") add_attention(points, bytes_per_point);
    else if (name == "classify") points.push_back(last_axis("classify", {256, 1000}));
    else if (name == "axis") add_axis(points);
    else if (name == "long-row") add_long_rows(points);
    else if (name == "half") add_half(points, bytes_per_point);
    else if (name == "cache") add_cache(points);
    else if (name == "dram") add_dram(points);
    // "training" has no softmax points: bench_training.cpp measures it.
  }
  return points;
}

}  // namespace smax::cli::bench
