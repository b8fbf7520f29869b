// smax demo: the tutorial's variants side by side, first on the example that
// breaks the naive formula, then for speed and accuracy on random data.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "reference/reference.hpp"
#include "smax/info.hpp"
#include "smax/ops.hpp"
#include "smax/options.hpp"

namespace smax::cli {
namespace {

struct Variant {
  const char* label;
  Algorithm algorithm;
  PassOrder order;
};

constexpr std::array kVariants{
    Variant{"naive", Algorithm::naive, PassOrder::reverse},
    Variant{"safe", Algorithm::safe, PassOrder::reverse},
    Variant{"fused", Algorithm::fused, PassOrder::reverse},
    Variant{"tiled reverse", Algorithm::tiled, PassOrder::reverse},
    Variant{"tiled forward", Algorithm::tiled, PassOrder::forward},
    Variant{"online reverse", Algorithm::online, PassOrder::reverse},
    Variant{"online forward", Algorithm::online, PassOrder::forward},
    Variant{"auto", Algorithm::automatic, PassOrder::reverse},
};

std::string format(const char* pattern, double value) {
  if (std::isnan(value)) return "nan";  // printf may print "-nan"
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// Left-aligns `text` in a column of `width` characters.
std::string pad(const std::string& text, std::size_t width) {
  return text + std::string(width > text.size() ? width - text.size() : 1, ' ');
}

void show_tutorial_example() {
  const std::vector<float> x{1.0f, 100.0f, 100000.0f};
  std::cout << "1. The tutorial's example: x = [1, 100, 100000] (float32)\n\n"
            << "  " << pad("variant", 16) << pad("softmax(x)", 30) << "logsumexp(x)\n";
  for (const Variant& v : kVariants) {
    if (v.order == PassOrder::forward || v.algorithm == Algorithm::automatic) continue;
    Options options;
    options.algorithm = v.algorithm;
    std::vector<float> y(x.size());
    softmax(std::span<const float>(x), std::span<float>(y), options);
    std::string values = "[";
    for (std::size_t i = 0; i < y.size(); ++i) values += (i ? ", " : "") + format("%.6g", y[i]);
    values += "]";
    std::cout << "  " << pad(v.algorithm == Algorithm::naive ? v.label : to_string(v.algorithm).data(), 16)
              << pad(values, 30) << format("%.8g", logsumexp(std::span<const float>(x), options)) << '\n';
  }
  std::cout << "\n  naive's NaN: exp(100) and exp(100000) overflow float32 to inf, and inf / inf is NaN;\n"
            << "  the other variants subtract the row's maximum first, so no exp overflows.\n\n";
}

// A C-order float32 tensor whose rows run along the last axis, and its exact softmax.
struct Workload {
  std::string title;
  std::int64_t rows;
  std::int64_t length;
  std::vector<float> x;
  std::vector<long double> reference;
};

Workload make_workload(std::string title, std::int64_t rows, std::int64_t length, std::mt19937_64& random) {
  Workload w{std::move(title), rows, length, std::vector<float>(static_cast<std::size_t>(rows * length)), {}};
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : w.x) v = normal(random);
  w.reference.resize(w.x.size());
  const auto n = static_cast<std::size_t>(length);
  std::vector<long double> row(n);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    std::copy_n(w.x.begin() + static_cast<std::ptrdiff_t>(r * n), n, row.begin());
    reference::row(Op::softmax, row, std::span<long double>(w.reference).subspan(r * n, n));
  }
  return w;
}

// The largest |y - ref| / ref over reference values >= 1e-30; NaN if any y is NaN.
double max_relative_error(const std::vector<float>& y, const std::vector<long double>& reference) {
  long double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(y[i])) return NAN;
    if (reference[i] >= 1e-30L) worst = std::max(worst, std::fabs(y[i] - reference[i]) / reference[i]);
  }
  return static_cast<double>(worst);
}

void benchmark(const Workload& w) {
  constexpr int kRuns = 5;
  const double megabytes = static_cast<double>(w.x.size() * sizeof(float) * 2) / 1e6;
  std::cout << "  " << w.title << ": " << format("%.1f", megabytes) << " MB read and written per run\n"
            << "  " << pad("variant", 16) << pad("median", 12) << pad("GB/s", 9) << "max rel. error\n";
  std::vector<float> y(w.x.size());
  const TensorView x(w.x.data(), DType::f32, {w.rows, w.length});
  const MutableTensorView out(y.data(), DType::f32, {w.rows, w.length});
  for (const Variant& v : kVariants) {
    std::cout << "  " << pad(v.label, 16);
    if (v.algorithm == Algorithm::fused && w.length > kFusedMaxLength) {
      std::cout << "(rows longer than " << kFusedMaxLength << " elements do not fit its buffer)\n";
      continue;
    }
    Options options;
    options.algorithm = v.algorithm;
    options.pass_order = v.order;
    softmax(x, out, options);  // warm-up: pages, caches, threads
    std::array<double, kRuns> seconds{};
    for (double& s : seconds) {
      const auto start = std::chrono::steady_clock::now();
      softmax(x, out, options);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[kRuns / 2];
    std::cout << pad(format("%.3f ms", median * 1e3), 12) << pad(format("%.2f", megabytes / 1e3 / median), 9)
              << format("%.2e", max_relative_error(y, w.reference)) << '\n';
  }
  std::cout << '\n';
}

}  // namespace

int run_demo(std::span<const std::string> args) {
  const Arguments arguments = parse_arguments("demo", args, {});
  constexpr std::array<std::string_view, 0> kNone{};
  expect_positional("demo", arguments, kNone);

  show_tutorial_example();
  constexpr std::uint64_t kSeed = 20240601;
  std::mt19937_64 random(kSeed);
  std::cout << "2. Random float32 softmax, x ~ normal(0, 3), seed " << kSeed << ", " << machine().threads
            << " threads; median of 5 runs after a warm-up\n\n";
  benchmark(make_workload("one row of 2^20 elements", 1, 1 << 20, random));
  benchmark(make_workload("64 x 4096", 64, 4096, random));
  return 0;
}

}  // namespace smax::cli
