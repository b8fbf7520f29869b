// smax bench: every smax variant, a plain copy (the physical limit) and the other
// libraries built in, side by side on the same data; tables, JSON, CSV and a plot.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_impls.hpp"
#include "bench_report.hpp"
#include "bench_timing.hpp"
#include "bench_training.hpp"
#include "bench_workloads.hpp"
#include "choices.hpp"
#include "commands.hpp"
#include "smax/dtype.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"

namespace smax::cli {
namespace {

using namespace bench;

constexpr std::array<OptionSpec, 16> kBenchOptions{{{"workload", true},
                                                    {"shape", true},
                                                    {"axis", true},
                                                    {"dtype", true},
                                                    {"op", true},
                                                    {"threads", true},
                                                    {"bytes", true},
                                                    {"repeats", true},
                                                    {"memory", true},
                                                    {"offset", true},
                                                    {"impl", true},
                                                    {"seed", true},
                                                    {"json", true},
                                                    {"csv", true},
                                                    {"plot", true},
                                                    {"list", false}}};

constexpr std::string_view kDefaultBytes = "16M";
constexpr std::string_view kDefaultMemory = "1G";
constexpr int kDefaultRepeats = 5;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    if (end == text.size()) return items;
    begin = end + 1;
  }
}

// "16M", "1G", "512K" or a plain byte count; binary units.
std::size_t parse_size(const std::string& option, const std::string& text) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string unit(end, text.data() + text.size());
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "GiB") shift = 30;
  if (error != std::errc() || end == text.data() || shift < 0 || value > (std::size_t{1} << (62 - shift))) {
    throw UsageError("bench", "--" + option + " " + text + ": expected a size such as 16M, 1G or 65536");
  }
  return value << shift;
}

std::vector<std::string> workload_choice(const std::string& text) {
  std::vector<std::string> names;
  for (const std::string& name : split(text)) {
    if (name == "all") {
      for (const WorkloadInfo& w : workloads()) names.emplace_back(w.name);
      continue;
    }
    const auto known = std::find_if(workloads().begin(), workloads().end(),
                                    [&](const WorkloadInfo& w) { return w.name == name; });
    if (known == workloads().end()) {
      std::string valid;
      for (const WorkloadInfo& w : workloads()) valid += std::string(w.name) + ", ";
      throw UsageError("bench", "--workload " + name + ": unknown workload (valid: " + valid + "all)");
    }
    names.push_back(name);
  }
  std::vector<std::string> unique;  // each once, in the order given
  for (const std::string& name : names) {
    if (std::find(unique.begin(), unique.end(), name) == unique.end()) unique.push_back(name);
  }
  return unique;
}

// --shape 4096x64,8x128256 with --axis, --dtype f32,bf16 and --op
// softmax,log-softmax: every shape in every dtype, for every op. A bench point needs
// data, so no extent may be 0; the axis must be in range for every shape. logsumexp
// is refused: its output lacks the input's shape, which the bench's buffers, copies
// and checks assume.
std::vector<Point> shape_choice(const Arguments& arguments) {
  const auto text = arguments.value("shape");
  if (!text) {
    for (const char* option : {"axis", "dtype", "op"}) {
      if (arguments.has(option)) {
        throw UsageError("bench", std::string("--") + option + " applies to --shape, which is missing");
      }
    }
    return {};
  }
  std::vector<std::vector<std::int64_t>> shapes;
  for (const std::string& item : split(*text)) {
    std::vector<std::int64_t> shape = parse_shape("bench", item);
    if (shape.empty()) throw UsageError("bench", "--shape " + item + ": a bench point needs at least one axis");
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
      throw UsageError("bench",
                       "--shape " + item + ": every extent must be at least 1 (an empty tensor has nothing to time)");
    }
    shapes.push_back(std::move(shape));
  }
  const int axis = arguments.has("axis") ? parse_int("bench", "axis", *arguments.value("axis")) : -1;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const int rank = static_cast<int>(shapes[i].size());
    if (axis < -rank || axis >= rank) {
      throw UsageError("bench", "--axis " + std::to_string(axis) + " is out of range for --shape " + split(*text)[i] +
                                    " of rank " + std::to_string(rank) + " (valid: " + std::to_string(-rank) + " to " +
                                    std::to_string(rank - 1) + ")");
    }
  }
  std::vector<DType> dtypes;
  for (const std::string& name : split(arguments.value("dtype").value_or("f32"))) {
    const DType dtype = dtype_choice("bench", name);
    if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) dtypes.push_back(dtype);
  }
  std::vector<Op> ops;
  for (const std::string& name : split(arguments.value("op").value_or("softmax"))) {
    const Op op = op_choice("bench", name);
    if (op == Op::logsumexp) {
      throw UsageError("bench", "--op logsumexp: the bench times ops whose output has the input's shape "
                                "(softmax, log-softmax)");
    }
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  return shape_points(shapes, axis, dtypes, ops);
}

std::vector<int> threads_choice(const std::string& text) {
  std::vector<int> threads;
  for (const std::string& item : split(text)) {
    const int t = item == "all" ? machine().threads : parse_int("bench", "threads", item);
    if (t < 1) throw UsageError("bench", "--threads " + item + ": a thread count must be >= 1 (or 'all')");
    if (std::find(threads.begin(), threads.end(), t) == threads.end()) threads.push_back(t);
  }
  return threads;
}

// --impl copy,smax:auto,onednn; "smax" stands for every smax variant. Libraries
// missing from this build are reported and left out.
std::vector<Implementation> impl_choice(const std::string& text, std::vector<Implementation> available) {
  std::vector<std::string> known{"smax"};
  for (const Implementation& impl : available) known.push_back(impl.name);
  for (const LibraryStatus& library : library_statuses()) {
    if (!library.available) known.push_back(library.name);
  }
  const std::vector<std::string> wanted = split(text);
  for (const std::string& name : wanted) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string valid;
      for (std::size_t i = 0; i < known.size(); ++i) valid += (i ? ", " : "") + known[i];
      throw UsageError("bench", "--impl " + name + ": unknown implementation (valid: " + valid + ")");
    }
  }
  std::vector<Implementation> chosen;
  for (Implementation& impl : available) {
    const bool listed = std::find(wanted.begin(), wanted.end(), impl.name) != wanted.end();
    const bool smax_family = impl.name.starts_with("smax:") &&
                             std::find(wanted.begin(), wanted.end(), "smax") != wanted.end();
    if (listed || smax_family) chosen.push_back(std::move(impl));
  }
  return chosen;
}

// Fails before the run, rather than after minutes of measuring.
void check_writable(const std::string& option, const std::optional<std::string>& path) {
  if (!path) return;
  const std::filesystem::path file(*path);
  const std::filesystem::path directory = file.has_parent_path() ? file.parent_path() : ".";
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    throw Error(Errc::io, "--" + option + " " + *path + ": directory '" + directory.string() + "' does not exist");
  }
}

void list_points(const std::vector<Point>& points, const std::vector<Implementation>& impls) {
  std::string current;
  for (const Point& p : points) {
    if (p.workload != current) {
      current = p.workload;
      std::cout << current << ": " << workload_summary(current) << '\n';
    }
    std::cout << "  " << p.label() << ' ' << to_string(p.dtype) << "  (" << p.moved_bytes() / 1024 << " KiB moved)\n";
  }
  std::cout << "implementations:";
  for (const Implementation& impl : impls) std::cout << ' ' << impl.name;
  std::cout << '\n';
}

// Tensors start --offset bytes past a page: less than a page, and on an element
// boundary of every dtype the run measures (the kernels take element-aligned data).
void check_offset(std::size_t offset, const std::vector<Point>& points, bool training) {
  if (offset >= kPage) {
    throw UsageError("bench", "--offset " + std::to_string(offset) + ": must be less than a page (" +
                                  std::to_string(kPage) + " bytes)");
  }
  std::vector<DType> dtypes;
  for (const Point& p : points) dtypes.push_back(p.dtype);
  if (training) {
    for (const TrainingPoint& p : training_points()) dtypes.push_back(p.dtype);
  }
  for (const DType dtype : dtypes) {
    if (offset % size_of(dtype) != 0) {
      throw UsageError("bench", "--offset " + std::to_string(offset) + ": not a multiple of the " +
                                    std::to_string(size_of(dtype)) + "-byte elements of " +
                                    std::string(to_string(dtype)) + ", which this run measures");
    }
  }
}

void list_training_points() {
  std::cout << "training: " << workload_summary("training") << '\n';
  for (const TrainingPoint& p : training_points()) {
    std::cout << "  " << p.op << ' ' << p.label() << ' ' << to_string(p.dtype) << "  (" << p.moved_bytes() / 1024
              << " KiB moved)\n";
  }
}

}  // namespace

int run_bench(std::span<const std::string> args) {
  const Arguments arguments = parse_arguments("bench", args, kBenchOptions);
  constexpr std::array<std::string_view, 0> kNone{};
  expect_positional("bench", arguments, kNone);

  RunInfo info;
  std::string default_workloads;
  for (const WorkloadInfo& w : workloads()) {
    if (w.in_default) default_workloads += (default_workloads.empty() ? "" : ",") + std::string(w.name);
  }
  // --shape alone runs its points only; with --workload, after those workloads.
  const std::vector<Point> custom = shape_choice(arguments);
  if (auto text = arguments.value("workload")) info.workloads = workload_choice(*text);
  else if (custom.empty()) info.workloads = workload_choice(default_workloads);
  info.threads = threads_choice(arguments.value("threads").value_or("1,all"));
  info.bytes_per_point = parse_size("bytes", arguments.value("bytes").value_or(std::string(kDefaultBytes)));
  if (info.bytes_per_point < 1024) throw UsageError("bench", "--bytes must be at least 1K");
  info.memory_budget = parse_size("memory", arguments.value("memory").value_or(std::string(kDefaultMemory)));
  if (auto text = arguments.value("offset")) info.offset = parse_size("offset", *text);
  info.repeats = kDefaultRepeats;
  if (auto text = arguments.value("repeats")) info.repeats = parse_int("bench", "repeats", *text);
  if (info.repeats < 1) throw UsageError("bench", "--repeats must be at least 1");
  info.seed = 1;
  if (auto text = arguments.value("seed")) {
    const int seed = parse_int("bench", "seed", *text);
    if (seed < 0) throw UsageError("bench", "--seed must be >= 0");
    info.seed = static_cast<std::uint64_t>(seed);
  }
  std::vector<Implementation> impls = implementations();
  if (auto text = arguments.value("impl")) impls = impl_choice(*text, std::move(impls));
  for (const Implementation& impl : impls) info.impls.push_back(impl.name);
  info.libraries = library_statuses();
  const MachineInfo& m = machine();
  info.cache_bytes = static_cast<std::size_t>(std::max(m.l3_bytes, m.l2_bytes));

  const auto json_path = arguments.value("json");
  const auto csv_path = arguments.value("csv");
  const auto plot_path = arguments.value("plot");
  check_writable("json", json_path);
  check_writable("csv", csv_path);
  check_writable("plot", plot_path);

  std::vector<Point> points = make_points(info.workloads, info.bytes_per_point);
  if (!custom.empty()) {
    points.insert(points.end(), custom.begin(), custom.end());
    info.workloads.emplace_back(kShapeWorkload);
  }
  const bool training = std::find(info.workloads.begin(), info.workloads.end(), "training") != info.workloads.end();
  check_offset(info.offset, points, training);
  if (arguments.has("list")) {
    list_points(points, impls);
    if (training) list_training_points();
    return 0;
  }

  print_header(std::cout, info);
  std::cout.flush();
  for (const std::string& name : arguments.value("impl") ? split(*arguments.value("impl")) : std::vector<std::string>{}) {
    for (const LibraryStatus& library : info.libraries) {
      if (library.name == name && !library.available) std::cerr << "smax: warning: " << name << " " << library.reason << '\n';
    }
  }

  Progress progress(points.size() * info.threads.size() * impls.size());
  Workspace workspace(info.memory_budget, info.cache_bytes, info.offset);
  std::vector<Result> results;
  for (std::size_t index = 0; index < points.size(); ++index) {
    const Point& point = points[index];
    workspace.load(point, info.seed * 1000003 + index);
    const Checker checker(point, workspace.input());
    for (const int threads : info.threads) {
      for (const Implementation& impl : impls) {
        progress.step(point.workload + " " + point.label() + " " + std::string(to_string(point.dtype)) + ", " +
                      std::to_string(threads) + " thread(s), " + impl.name);
        Result r;
        r.point_index = index;
        r.point = point;
        r.threads = threads;
        r.impl = impl.name;
        r.is_library = impl.is_library;
        r.is_copy = impl.is_copy;
        r.from_dram = workspace.from_dram();
        try {
          Prepared prepared = impl.prepare(point, threads);
          r.note = prepared.note;
          r.skipped = !prepared.kernel;
          if (prepared.kernel) r.measurement = measure(prepared.kernel, impl.is_copy, info.repeats, workspace, checker);
        } catch (const std::exception& e) {  // a library that rejects the point while setting up
          r.measurement.problem = e.what();
        }
        results.push_back(std::move(r));
      }
    }
    // A workload's table comes as soon as its last point is done.
    if (index + 1 == points.size() || points[index + 1].workload != point.workload) {
      derive(results);
      progress.clear();
      print_workload(std::cout, point.workload, info, results);
      std::cout.flush();
    }
  }
  progress.clear();

  int training_failures = 0;
  if (training) {
    TrainingSettings settings;
    settings.threads = info.threads;
    settings.repeats = info.repeats;
    settings.memory_budget = info.memory_budget;
    settings.cache_bytes = info.cache_bytes;
    settings.seed = info.seed;
    settings.offset = info.offset;
    training_failures = run_training(settings, std::cout);
  }

  if (json_path) write_json(*json_path, info, results);
  if (csv_path) write_csv(*csv_path, results);
  if (plot_path) {
    // The plot script reads the JSON: the one asked for, or a temporary one.
    std::filesystem::path json = json_path ? std::filesystem::path(*json_path) : std::filesystem::path();
    if (!json_path) {
      json = std::filesystem::temp_directory_path() / ("smax-bench-" + std::to_string(::getpid()) + ".json");
      write_json(json, info, results);
    }
    const std::string problem = draw_plot(json, *plot_path);
    std::error_code ignored;  // a leftover temporary file is not worth failing the run
    if (!json_path) std::filesystem::remove(json, ignored);
    if (problem.empty()) std::cout << "plot: " << *plot_path << '\n';
    else std::cerr << "smax: warning: no plot written: " << problem << '\n';
  }
  if (json_path) std::cout << "json: " << *json_path << '\n';
  if (csv_path) std::cout << "csv: " << *csv_path << '\n';

  const auto failures = std::count_if(results.begin(), results.end(), [](const Result& r) { return r.fails_run(); }) +
                        training_failures;
  if (failures > 0) {
    std::cerr << "smax: error: " << failures << " measurement(s) failed their check (marked '!' in the tables)\n";
    return 1;
  }
  return 0;
}

}  // namespace smax::cli
