#include "bench_report.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "smax/error.hpp"
#include "smax/info.hpp"

extern char** environ;

namespace smax::cli::bench {
namespace {

std::string printf_text(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// Three significant digits at most: 0.812, 12.4, 259.
std::string gbps_text(double gbps) {
  if (gbps < 10) return printf_text("%.2f", gbps);
  if (gbps < 100) return printf_text("%.1f", gbps);
  return printf_text("%.0f", gbps);
}

// What auto ran, from its note ("fused over chunks, 2 thread(s), streaming"): the
// variant, and whether its output streamed.
std::string auto_ran(const std::string& note) {
  std::string text = note.substr(0, note.find(','));
  if (note.ends_with(", streaming")) text += ", streaming";
  return text;
}

std::string percent_text(double fraction) {
  if (std::isnan(fraction)) return "-";
  return printf_text(fraction < 0.1 ? "%.1f%%" : "%.0f%%", fraction * 100);
}

std::string ratio_text(double ratio) { return std::isnan(ratio) ? "-" : printf_text("%.2fx", ratio); }

std::string error_text(double error) { return std::isnan(error) ? "nan" : printf_text("%.1e", error); }

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text + ' ' : text + std::string(width - text.size(), ' ');
}

std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? ' ' + text : std::string(width - text.size(), ' ') + text;
}

// Table headings: smax's variants without the prefix, "forward" shortened.
std::string short_name(const std::string& impl) {
  std::string name = impl.starts_with("smax:") ? impl.substr(5) : impl;
  if (name.ends_with("-forward")) name = name.substr(0, name.size() - 8) + "-fw";
  return name;
}

std::string mib(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20)) return printf_text("%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return printf_text("%.0f KiB", static_cast<double>(bytes) / (1 << 10));
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) text += (i ? separator : "") + items[i];
  return text;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::vector<std::string> extents;
  for (std::int64_t e : shape) extents.push_back(std::to_string(e));
  return join(extents, "x");
}

// ---- JSON ------------------------------------------------------------------------

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += printf_text("\\u%04x", static_cast<double>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// JSON has no NaN: a missing number is null.
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  return printf_text("%.9g", value);
}

std::string json_strings(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) quoted.push_back(json_string(item));
  std::string text = "[";  // appended, not '"[" + ... + "]"', which trips GCC 12's -Wrestrict
  text += join(quoted, ", ");
  text += ']';
  return text;
}

std::string json_shape(const std::vector<std::int64_t>& shape) {
  std::vector<std::string> extents;
  for (std::int64_t e : shape) extents.push_back(std::to_string(e));
  std::string text = "[";
  text += join(extents, ", ");
  text += ']';
  return text;
}

void check_stream(const std::ostream& stream, const std::filesystem::path& path) {
  if (!stream) throw Error(Errc::io, path.string() + ": cannot write");
}

// ---- the plot script ---------------------------------------------------------------

std::filesystem::path executable_directory() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path();
}

// Where plot_bench.py is: $SMAX_PLOT_SCRIPT, then the install layout next to the
// executable (bin/../share/smax), then the source tree this binary was built from.
std::filesystem::path find_plot_script() {
  if (const char* path = std::getenv("SMAX_PLOT_SCRIPT"); path && *path) return path;
  std::vector<std::filesystem::path> candidates{executable_directory() / ".." / "share" / "smax" / "plot_bench.py"};
#ifdef SMAX_PLOT_SCRIPT_SOURCE
  candidates.emplace_back(SMAX_PLOT_SCRIPT_SOURCE);
#endif
  for (const auto& candidate : candidates) {
    std::error_code error;
    if (std::filesystem::is_regular_file(candidate, error)) return candidate;
  }
  return {};
}

// Runs a program with arguments (no shell); its exit status, or -1 if it did not run.
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (!WIFEXITED(status)) return -1;
  const int code = WEXITSTATUS(status);
  return code == 127 ? -1 : code;  // 127: posix_spawnp's child could not exec
}

// How the rotation stands against the last-level cache, in words.
std::string data_text(const RunInfo& info) {
  if (info.memory_budget >= 2 * info.cache_bytes) {
    return "each point's buffers rotate through copies (up to " + mib(info.memory_budget) +
           ", --memory) larger than the " + mib(info.cache_bytes) +
           " last-level cache: runs read DRAM ('dram'), not what the last run left in cache";
  }
  return "the " + mib(info.cache_bytes) + " last-level cache is more than half of --memory (" +
         mib(info.memory_budget) + "): points whose copies fit in it are cache-resident ('cache'); "
         "raise --memory to measure them from DRAM";
}

}  // namespace

// ---- derive --------------------------------------------------------------------------

void derive(std::vector<Result>& results) {
  for (Result& r : results) {
    if (!r.skipped && r.measurement.median_s > 0) {
      r.gbps = static_cast<double>(r.point.moved_bytes()) / r.measurement.median_s / 1e9;
    }
  }
  for (Result& r : results) {
    if (r.skipped || r.gbps <= 0) continue;
    double copy = NAN;
    double best_library = NAN;
    for (const Result& other : results) {
      if (other.point_index != r.point_index || other.threads != r.threads || other.skipped || other.failed() ||
          other.gbps <= 0) {
        continue;
      }
      if (other.is_copy && !(copy >= other.gbps)) copy = other.gbps;
      if (other.is_library && other.impl != r.impl && !(best_library >= other.gbps)) best_library = other.gbps;
    }
    r.copy_fraction = r.gbps / copy;
    r.best_library_ratio = r.gbps / best_library;
  }
}

// ---- stdout --------------------------------------------------------------------------

void print_header(std::ostream& out, const RunInfo& info) {
  const MachineInfo& m = machine();
  std::vector<std::string> threads;
  for (int t : info.threads) threads.push_back(std::to_string(t));
  std::vector<std::string> libraries;
  for (const LibraryStatus& library : info.libraries) {
    libraries.push_back(library.name + (library.available ? " " + library.version : ": " + library.reason));
  }
  out << "smax bench " << version() << ": softmax (or --op), GB/s = (input + output bytes) / median time\n"
      << "machine    " << m.cpu_model << ", " << m.architecture
      << (m.vendor.empty() ? "" : " " + m.vendor) << ", " << m.threads << " threads; L1d "
      << mib(static_cast<std::size_t>(m.l1d_bytes)) << ", L2 " << mib(static_cast<std::size_t>(m.l2_bytes))
      << ", L3 " << mib(static_cast<std::size_t>(m.l3_bytes)) << '\n'
      << "features   " << (m.features.empty() ? "(none detected)" : join(m.features, " ")) << '\n'
      << "libraries  " << join(libraries, "\n           ") << '\n'
      << "workloads  " << join(info.workloads, ", ") << "; threads " << join(threads, ", ") << '\n'
      << "timing     median of " << info.repeats << " runs after 1 warm-up (at least 3 for calls over "
      << printf_text("%.0f", 500.0 / info.repeats) << " ms); inputs normal(0, 3), seed " << info.seed
      << "; sized points move about " << mib(info.bytes_per_point) << " (--bytes)\n"
      << "           a run of a cache-resident point repeats its call back to back for at least "
      << printf_text("%.0f", kMinCachedRunSeconds * 1e3) << " ms, and counts the mean call\n"
      << "data       " << data_text(info) << '\n'
      << "           every tensor starts " << info.offset << " bytes past a page (--offset)"
      << (info.offset == 0 ? "" : "; NumPy and malloc put large blocks 16 past one") << '\n'
      << "check      outputs NaN-filled before every run, then checked: finite, >= 0 (log-softmax: <= 0),\n"
      << "           and within the dtype's tolerance of a long double reference on sampled rows; a failure is\n"
      << "           marked '!'\n\n";
}

void print_workload(std::ostream& out, const std::string& workload, const RunInfo& info,
                    const std::vector<Result>& results) {
  std::vector<const Result*> rows;  // the results of this workload, in run order
  for (const Result& r : results) {
    if (r.point.workload == workload) rows.push_back(&r);
  }
  if (rows.empty()) return;

  std::size_t shape_width = 5;
  for (const Result* r : rows) shape_width = std::max(shape_width, r->point.label().size() + 2);
  constexpr std::size_t kColumn = 9;
  const bool has_auto = std::find(info.impls.begin(), info.impls.end(), "smax:auto") != info.impls.end();

  out << "== " << workload << " (GB/s)\n";
  out << pad("shape", shape_width) << pad("dtype", 6) << pad_left("thr", 3) << pad_left("data", 6);
  for (const std::string& impl : info.impls) out << pad_left(short_name(impl), kColumn);
  if (has_auto) out << pad_left("auto/copy", 11) << pad_left("auto/lib", 10) << "  auto ran";
  out << '\n';

  // One line per point and thread count; results of a line are contiguous.
  for (std::size_t i = 0; i < rows.size();) {
    const Result& first = *rows[i];
    std::size_t end = i;
    while (end < rows.size() && rows[end]->point_index == first.point_index && rows[end]->threads == first.threads) ++end;
    out << pad(first.point.label(), shape_width) << pad(std::string(to_string(first.point.dtype)), 6)
        << pad_left(std::to_string(first.threads), 3) << pad_left(first.from_dram ? "dram" : "cache", 6);
    const Result* automatic = nullptr;
    for (const std::string& impl : info.impls) {
      const auto found = std::find_if(rows.begin() + static_cast<std::ptrdiff_t>(i),
                                      rows.begin() + static_cast<std::ptrdiff_t>(end),
                                      [&](const Result* r) { return r->impl == impl; });
      std::string cell = "?";
      if (found != rows.begin() + static_cast<std::ptrdiff_t>(end)) {
        const Result& r = **found;
        if (impl == "smax:auto") automatic = &r;
        cell = r.skipped ? "-" : gbps_text(r.gbps) + (r.failed() ? "!" : "");
      }
      out << pad_left(cell, kColumn);
    }
    if (has_auto) {
      const bool usable = automatic && !automatic->skipped;
      out << pad_left(usable ? percent_text(automatic->copy_fraction) : "-", 11)
          << pad_left(usable ? ratio_text(automatic->best_library_ratio) : "-", 10) << "  "
          << (automatic ? auto_ran(automatic->note) : "-");
    }
    out << '\n';
    i = end;
  }

  // The worst error of each implementation over the workload (the copies have none).
  std::vector<std::string> errors;
  for (const std::string& impl : info.impls) {
    if (impl == "copy" || impl == kCopyNtImpl) continue;
    double worst = -1;
    for (const Result* r : rows) {
      if (r->impl != impl || r->skipped) continue;
      const double e = r->measurement.max_rel_err;
      worst = std::isnan(e) || std::isnan(worst) ? NAN : std::max(worst, e);
    }
    if (worst != -1) errors.push_back(short_name(impl) + " " + error_text(worst));
  }
  if (!errors.empty()) out << "max rel. error: " << join(errors, ", ") << '\n';

  // A summary anyone can check against the table: where auto stands.
  double low_copy = INFINITY, high_copy = 0, low_lib = INFINITY, high_lib = 0;
  for (const Result* r : rows) {
    if (r->impl != "smax:auto" || r->skipped || r->failed()) continue;
    if (!std::isnan(r->copy_fraction)) low_copy = std::min(low_copy, r->copy_fraction), high_copy = std::max(high_copy, r->copy_fraction);
    if (!std::isnan(r->best_library_ratio)) low_lib = std::min(low_lib, r->best_library_ratio), high_lib = std::max(high_lib, r->best_library_ratio);
  }
  if (high_copy > 0) {
    auto range = [](const std::string& low, const std::string& high) { return low == high ? low : low + " to " + high; };
    out << "auto reaches " << range(percent_text(low_copy), percent_text(high_copy)) << " of copy";
    if (high_lib > 0) out << ", " << range(ratio_text(low_lib), ratio_text(high_lib)) << " the best library's speed";
    out << '\n';
  }

  std::set<std::string> notes;  // skip reasons, once each
  for (const Result* r : rows) {
    if (r->failed()) {
      out << "! " << r->impl << " on " << r->point.label() << " " << to_string(r->point.dtype) << ", " << r->threads
          << " thread(s): " << r->measurement.problem
          << (r->fails_run() ? "" : " (naive's plain float sum, as expected: not a failure of the run)") << '\n';
    }
    if (r->skipped) notes.insert(short_name(r->impl) + " skipped: " + r->note);
  }
  for (const std::string& note : notes) out << "- " << note << '\n';
  out << '\n';
}

// ---- files --------------------------------------------------------------------------

void write_json(const std::filesystem::path& path, const RunInfo& info, const std::vector<Result>& results) {
  const MachineInfo& m = machine();
  std::ofstream out(path);
  check_stream(out, path);
  std::vector<std::string> libraries;
  for (const LibraryStatus& library : info.libraries) {
    libraries.push_back(json_string(library.name) + ": " +
                        (library.available ? json_string(library.version) : std::string("null")));
  }
  std::vector<std::string> threads;
  for (int t : info.threads) threads.push_back(std::to_string(t));

  out << "{\n  \"tool\": \"smax bench\",\n"
      << "  \"machine\": {\"cpu_model\": " << json_string(m.cpu_model)
      << ", \"architecture\": " << json_string(m.architecture) << ", \"vendor\": " << json_string(m.vendor)
      << ", \"features\": " << json_strings(m.features)
      << ", \"l1d_bytes\": " << m.l1d_bytes << ", \"l2_bytes\": " << m.l2_bytes << ", \"l3_bytes\": " << m.l3_bytes
      << ", \"threads\": " << m.threads << ", \"assumed\": " << json_strings(m.assumed)
      << ", \"smax_version\": " << json_string(std::string(version())) << ", \"libraries\": {" << join(libraries, ", ")
      << "}},\n"
      << "  \"settings\": {\"workloads\": " << json_strings(info.workloads) << ", \"threads\": [" << join(threads, ", ")
      << "], \"impls\": " << json_strings(info.impls) << ", \"bytes_per_point\": " << info.bytes_per_point
      << ", \"memory_bytes\": " << info.memory_budget << ", \"offset_bytes\": " << info.offset
      << ", \"cache_bytes\": " << info.cache_bytes
      << ", \"repeats\": " << info.repeats << ", \"warmup\": 1, \"seed\": " << info.seed
      << ", \"input\": \"normal(0, 3)\", \"gbps\": \"(input + output bytes) / median_s / 1e9\"},\n"
      << "  \"results\": [";
  bool first = true;
  for (const Result& r : results) {
    if (r.skipped) continue;
    out << (first ? "\n" : ",\n") << "    {\"workload\": " << json_string(r.point.workload)
        << ", \"op\": " << json_string(std::string(to_string(r.point.op))) << ", \"shape\": "
        << json_shape(r.point.shape) << ", \"axis\": " << r.point.axis
        << ", \"dtype\": " << json_string(std::string(to_string(r.point.dtype))) << ", \"threads\": " << r.threads
        << ", \"impl\": " << json_string(r.impl) << ", \"median_s\": " << json_number(r.measurement.median_s)
        << ", \"min_s\": " << json_number(r.measurement.min_s) << ", \"repeats\": " << r.measurement.repeats
        << ", \"calls\": " << r.measurement.calls
        << ", \"bytes\": " << r.point.moved_bytes() << ", \"gbps\": " << json_number(r.gbps)
        << ", \"copy_fraction\": " << json_number(r.copy_fraction)
        << ", \"best_library_ratio\": " << json_number(r.best_library_ratio)
        << ", \"max_rel_err\": " << json_number(r.measurement.max_rel_err)
        << ", \"data\": " << json_string(r.from_dram ? "dram" : "cache") << ", \"ok\": " << (r.failed() ? "false" : "true")
        << ", \"problem\": " << (r.failed() ? json_string(r.measurement.problem) : "null")
        << ", \"note\": " << json_string(r.note) << "}";
    first = false;
  }
  out << "\n  ],\n  \"skipped\": [";
  first = true;
  for (const Result& r : results) {
    if (!r.skipped) continue;
    out << (first ? "\n" : ",\n") << "    {\"workload\": " << json_string(r.point.workload)
        << ", \"op\": " << json_string(std::string(to_string(r.point.op))) << ", \"shape\": "
        << json_shape(r.point.shape) << ", \"axis\": " << r.point.axis
        << ", \"dtype\": " << json_string(std::string(to_string(r.point.dtype))) << ", \"threads\": " << r.threads
        << ", \"impl\": " << json_string(r.impl) << ", \"reason\": " << json_string(r.note) << "}";
    first = false;
  }
  out << "\n  ]\n}\n";
  out.close();
  check_stream(out, path);
}

void write_csv(const std::filesystem::path& path, const std::vector<Result>& results) {
  std::ofstream out(path);
  check_stream(out, path);
  out << "workload,op,shape,axis,dtype,threads,impl,median_s,min_s,repeats,bytes,gbps,copy_fraction,"
         "best_library_ratio,max_rel_err,data,ok,note\n";
  auto number = [](double value) { return std::isfinite(value) ? printf_text("%.9g", value) : std::string(); };
  auto quoted = [](const std::string& text) {
    std::string q = "\"";
    for (const char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const Result& r : results) {
    if (r.skipped) continue;
    out << r.point.workload << ',' << to_string(r.point.op) << ',' << shape_text(r.point.shape) << ','
        << r.point.axis << ','
        << to_string(r.point.dtype) << ',' << r.threads << ',' << r.impl << ',' << number(r.measurement.median_s) << ','
        << number(r.measurement.min_s) << ',' << r.measurement.repeats << ',' << r.point.moved_bytes() << ','
        << number(r.gbps) << ',' << number(r.copy_fraction) << ',' << number(r.best_library_ratio) << ','
        << number(r.measurement.max_rel_err) << ',' << (r.from_dram ? "dram" : "cache") << ','
        << (r.failed() ? "false" : "true") << ',' << quoted(r.failed() ? r.measurement.problem : r.note) << '\n';
  }
  out.close();
  check_stream(out, path);
}

// ---- plot -----------------------------------------------------------------------------

std::string draw_plot(const std::filesystem::path& json, const std::filesystem::path& image) {
  const std::filesystem::path script = find_plot_script();
  if (script.empty()) {
    return "scripts/plot_bench.py not found (set SMAX_PLOT_SCRIPT to its path)";
  }
  // Debian's python3-matplotlib belongs to /usr/bin/python3; a python3 earlier on
  // PATH (a virtual environment) may not see it.
  const std::string python = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  const int status = run_program({python, script.string(), "--output", image.string(), json.string()});
  if (status == 0) return "";
  if (status == -1) return "python3 not found (apt-get install python3 python3-matplotlib)";
  if (status == 3) return "matplotlib is not installed for " + python + " (apt-get install python3-matplotlib)";
  return script.string() + " failed with exit status " + std::to_string(status);
}

}  // namespace smax::cli::bench

namespace smax::cli::bench {

Progress::Progress(std::size_t total) : total_(std::max<std::size_t>(total, 1)), enabled_(::isatty(STDERR_FILENO) == 1) {}

void Progress::step(const std::string& what) {
  if (!enabled_) return;
  constexpr std::size_t kWidth = 24;
  const std::size_t filled = done_ * kWidth / total_;
  std::string line = "\r\033[K[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " +
                     std::to_string(done_ * 100 / total_) + "% " + what;
  ++done_;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace smax::cli::bench
