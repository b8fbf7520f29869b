// Every vectorised row kernel of src/cpu/simd/ on every Highway target this machine
// supports, one thread, cache-resident rows, beside a memcpy of the same bytes; the
// column-panel kernels (softmax down a non-last axis), three-pass and online; and the
// training ops' row kernels (src/training/simd/: backward passes, cross-entropy's).
// Names read kernel/storage/target/n, e.g. f32_rstore_exp_minus_max/bf16/AVX3/16384,
// or kernel/storage/target/LENGTHxWIDTH for panels (f32_columns_online/f32/AVX3/2048x64).
// bytes_per_second counts what the kernel reads and writes once.
//   build/release/bench/smax_bench_kernels --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true --benchmark_filter=AVX3
#include <benchmark/benchmark.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/simd/f32_columns.hpp"
#include "cpu/simd/f32_rows.hpp"
#include "smax/dtype.hpp"
#include "training/simd/gradient_rows.hpp"

namespace {

using namespace smax;
namespace simd = smax::cpu::simd;

template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, half>) {
    return to_half(v);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return to_bfloat16(v);
  } else {
    return v;
  }
}

template <class T>
std::vector<T> random_row(std::size_t n) {
  std::mt19937 gen(42);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<T> x(n);
  for (T& v : x) v = from_float<T>(dist(gen));
  return x;
}

template <class T>
const char* storage_name() {
  if constexpr (std::is_same_v<T, half>) return "f16";
  if constexpr (std::is_same_v<T, bfloat16>) return "bf16";
  return "f32";
}

// Runs body with dispatch restricted to `target`, counting `bytes` per iteration.
template <class Body>
void run_on(benchmark::State& state, std::int64_t target, std::int64_t bytes, Body&& body) {
  hwy::SetSupportedTargetsForTest(target);
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  hwy::SetSupportedTargetsForTest(0);
  state.SetBytesProcessed(state.iterations() * bytes);
}

template <class T>
void register_kernels(std::int64_t target, std::size_t n) {
  const std::string suffix = std::string("/") + storage_name<T>() + "/" + hwy::TargetName(target) + "/" +
                             std::to_string(n);
  const auto row_bytes = static_cast<std::int64_t>(n * sizeof(T));
  const float m = 30.0f;  // above every normal(0, 3) sample of these rows
  auto add = [&](const std::string& name, auto body) {
    benchmark::RegisterBenchmark((name + suffix).c_str(), body);
  };
  add("f32_rmax", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    float sink = 0;
    run_on(state, target, row_bytes, [&] { sink += simd::f32_rmax(x.data(), n); });
    benchmark::DoNotOptimize(sink);
  });
  // softmax's sum, and the log ops' (the terms at the max counted apart).
  for (const bool count_at_max : {false, true}) {
    add(count_at_max ? "f32_rsum_exp_minus_max_log" : "f32_rsum_exp_minus_max", [=](benchmark::State& state) {
      const auto x = random_row<T>(n);
      double sink = 0;
      run_on(state, target, row_bytes,
             [&] { sink += simd::f32_rsum_exp_minus_max(x.data(), n, m, 1.0, count_at_max, false).below_max; });
      benchmark::DoNotOptimize(sink);
    });
  }
  add("f32_rstore_exp_minus_max", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<float> e(n);
    double sink = 0;
    run_on(state, target, row_bytes + static_cast<std::int64_t>(n * sizeof(float)),
           [&] { sink += simd::f32_rstore_exp_minus_max(x.data(), e.data(), n, m, 1.0).below_max; });
    benchmark::DoNotOptimize(sink);
  });
  add("f32_vscale", [=](benchmark::State& state) {
    const std::vector<float> e = random_row<float>(n);
    std::vector<T> y(n);
    run_on(state, target, static_cast<std::int64_t>(n * sizeof(float)) + row_bytes,
           [&] { simd::f32_vscale(e.data(), y.data(), n, 0.5f); });
  });
  add("f32_softmax_normalize", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<T> y(n);
    run_on(state, target, 2 * row_bytes,
           [&] { simd::f32_softmax_normalize(x.data(), y.data(), n, m, 1.0, 0.5f, false); });
  });
  add("f32_log_softmax_normalize", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<T> y(n);
    run_on(state, target, 2 * row_bytes,
           [&] { simd::f32_log_softmax_normalize(x.data(), y.data(), n, m, 1.0, 0.5f, false); });
  });
}

// Softmax down the columns of one length x width panel (contiguous rows of `width`),
// small enough to stay in L2: the panels' arithmetic, without memory's. `online`
// takes the two-pass form that tall panels take.
template <class T>
void register_columns(std::int64_t target, std::size_t length, std::size_t width) {
  const std::string suffix = std::string("/") + storage_name<T>() + "/" + hwy::TargetName(target) + "/" +
                             std::to_string(length) + "x" + std::to_string(width);
  for (const bool online : {false, true}) {
    const std::string name = online ? "f32_columns_online" : "f32_columns";
    benchmark::RegisterBenchmark((name + suffix).c_str(), [=](benchmark::State& state) {
      const auto x = random_row<T>(length * width);
      std::vector<T> y(length * width);
      const simd::ColumnPanel<T> panel{x.data(), static_cast<std::ptrdiff_t>(width), y.data(),
                                       static_cast<std::ptrdiff_t>(width), width, length};
      simd::ColumnParams params;
      params.online = online;
      run_on(state, target, static_cast<std::int64_t>(2 * length * width * sizeof(T)),
             [&] { simd::columns(panel, params); });
    });
  }
}

// A batch of short softmax rows (f32_softmax_rows: rows across lanes where the target
// has them, else each row in registers), in cache.
template <class T>
void register_short_rows(std::int64_t target, std::size_t rows, std::size_t n) {
  const std::string name = std::string("f32_softmax_rows/") + storage_name<T>() + "/" + hwy::TargetName(target) + "/" +
                           std::to_string(rows) + "x" + std::to_string(n);
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const auto x = random_row<T>(rows * n);
    std::vector<T> y(rows * n);
    std::vector<float> buffer(2 * kFusedMaxLength);
    const auto stride = static_cast<std::ptrdiff_t>(n);
    run_on(state, target, static_cast<std::int64_t>(2 * rows * n * sizeof(T)),
           [&] { simd::f32_softmax_rows(x.data(), stride, y.data(), stride, rows, n, 1.0, buffer.data()); });
  });
}

// The training ops' row kernels over one row of n (training/simd/gradient_rows.hpp):
// each backward pass, and cross-entropy's passes (its first pass and the gradient
// from the stored exps over one block, at most kExpBlock long; the gradient that
// computes its exps, over the row). Inputs as a softmax's: y = exp(x - 30) (below 1),
// log_y = x - 30, dy normal(0, 3).
template <class T>
void register_training_kernels(std::int64_t target, std::size_t n) {
  namespace tsimd = smax::training::simd;
  const std::string suffix = std::string("/") + storage_name<T>() + "/" + hwy::TargetName(target) + "/" +
                             std::to_string(n);
  const auto row_bytes = static_cast<std::int64_t>(n * sizeof(T));
  const auto float_bytes = static_cast<std::int64_t>(n * sizeof(float));
  constexpr float kMax = 30.0f;  // above every normal(0, 3) sample of these rows
  auto add = [&](const std::string& name, auto body) {
    benchmark::RegisterBenchmark((name + suffix).c_str(), body);
  };
  const auto shifted = [n](float by, bool exp) {
    const std::vector<float> x = random_row<float>(n);
    std::vector<T> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = from_float<T>(exp ? std::exp(x[i] - by) : x[i] - by);
    return out;
  };
  // Each backward op's reduction pass, then its write pass (y, or log_y with `log`).
  for (const bool log : {false, true}) {
    add(log ? "sum_of" : "sum_of_products", [=](benchmark::State& state) {
      const auto y = shifted(kMax, !log);
      const auto dy = random_row<T>(n);
      double sink = 0;
      run_on(state, target, (log ? 1 : 2) * row_bytes, [&] {
        sink += (log ? tsimd::sum_of(dy.data(), n) : tsimd::sum_of_products(y.data(), dy.data(), n)).hi;
      });
      benchmark::DoNotOptimize(sink);
    });
    add(log ? "log_softmax_backward_write" : "softmax_backward_write", [=](benchmark::State& state) {
      const auto y = shifted(kMax, !log);
      const auto dy = random_row<T>(n);
      std::vector<T> dx(n);
      run_on(state, target, 3 * row_bytes, [&] {
        if (log) tsimd::log_softmax_backward_write(y.data(), dy.data(), dx.data(), n, 0.25, 1.0);
        else tsimd::softmax_backward_write(y.data(), dy.data(), dx.data(), n, {0.25, 0.0}, 1.0);
      });
    });
  }
  // Both passes over a batch of 64 contiguous rows (the API's path for rows of up to
  // 1024), bytes as above for all of them.
  if (n <= 1024) {
    for (const bool log : {false, true}) {
      add(log ? "log_softmax_backward_rows" : "softmax_backward_rows", [=](benchmark::State& state) {
        constexpr std::size_t kRows = 64;
        std::vector<T> y, dy = random_row<T>(kRows * n), dx(kRows * n);
        for (std::size_t j = 0; j < kRows; ++j) {
          const auto row = shifted(kMax, !log);
          y.insert(y.end(), row.begin(), row.end());
        }
        std::vector<std::int64_t> at(kRows);
        for (std::size_t j = 0; j < kRows; ++j) at[j] = static_cast<std::int64_t>(j * n);
        const tsimd::BackwardRows rows{at.data(), at.data(), at.data()};
        run_on(state, target, static_cast<std::int64_t>(kRows) * 3 * row_bytes, [&] {
          if (log) tsimd::log_softmax_backward_rows(y.data(), dy.data(), dx.data(), rows, n, kRows, 1.0, false);
          else tsimd::softmax_backward_rows(y.data(), dy.data(), dx.data(), rows, n, kRows, 1.0, false);
        });
      });
    }
  }
  tsimd::CrossEntropyRow row;
  row.m = kMax;
  row.coefficient_sum = 1.0;
  row.inv_d = 0.5;
  add("cross_entropy_row", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<T> grad(n);
    run_on(state, target, 2 * row_bytes,
           [&] { tsimd::cross_entropy_row(x.data(), grad.data(), nullptr, n, row, false); });
  });
  if (n > tsimd::kExpBlock) return;
  add("store_exps", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<float> e(n);
    double sink = 0;
    run_on(state, target, row_bytes + float_bytes,
           [&] { sink += tsimd::store_exps(x.data(), e.data(), n, kMax).below_max; });
    benchmark::DoNotOptimize(sink);
  });
  add("cross_entropy_block_from_exps", [=](benchmark::State& state) {
    const auto x = random_row<T>(n);
    std::vector<float> e(n);
    tsimd::store_exps(x.data(), e.data(), n, kMax);
    std::vector<T> grad(n);
    run_on(state, target, float_bytes + row_bytes, [&] {
      tsimd::cross_entropy_block_from_exps(x.data(), e.data(), grad.data(), nullptr, n, kMax, row, false);
    });
  });
}

void register_all() {
  for (std::size_t n : {std::size_t{1024}, std::size_t{16384}, std::size_t{1} << 18}) {
    benchmark::RegisterBenchmark(("memcpy/f32/" + std::to_string(n)).c_str(), [n](benchmark::State& state) {
      const auto x = random_row<float>(n);
      std::vector<float> y(n);
      for (auto _ : state) {
        std::memcpy(y.data(), x.data(), n * sizeof(float));
        benchmark::ClobberMemory();
      }
      state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * n * sizeof(float)));
    });
    for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
      register_kernels<float>(target, n);
      register_kernels<half>(target, n);
      register_kernels<bfloat16>(target, n);
    }
  }
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    register_columns<float>(target, 2048, 64);
    register_columns<bfloat16>(target, 2048, 64);
    for (std::size_t n : {std::size_t{8}, std::size_t{16}, std::size_t{32}, std::size_t{64}}) {
      register_short_rows<float>(target, 1024, n);
    }
  }
  for (std::size_t n : {std::size_t{100}, std::size_t{2048}, std::size_t{32000}}) {
    for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
      register_training_kernels<float>(target, n);
      register_training_kernels<half>(target, n);
      register_training_kernels<bfloat16>(target, n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
