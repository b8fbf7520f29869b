// Each variant on f32 rows of several lengths, one thread, next to a copy of the
// same bytes. bytes_per_second counts the input read and the output written once.
//   build/release/bench/smax_bench_variants --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "smax/smax.hpp"

namespace {

std::vector<float> random_row(std::int64_t n) {
  std::mt19937 gen(42);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = dist(gen);
  return x;
}

void set_bytes(benchmark::State& state, std::int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * 2 * static_cast<std::int64_t>(sizeof(float)));
}

void BM_copy(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> x = random_row(n);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

void BM_softmax(benchmark::State& state, smax::Algorithm algorithm, smax::PassOrder order) {
  const std::int64_t n = state.range(0);
  const std::vector<float> x = random_row(n);
  std::vector<float> y(x.size());
  const smax::Options options{.algorithm = algorithm, .pass_order = order, .threads = 1};
  for (auto _ : state) {
    smax::softmax(x, y, options);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

void lengths(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1000, 16384, 128256, 1 << 22}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

void short_lengths(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1000, 16384}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

using smax::Algorithm;
using smax::PassOrder;

BENCHMARK(BM_copy)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, naive, Algorithm::naive, PassOrder::forward)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, safe, Algorithm::safe, PassOrder::forward)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, fused, Algorithm::fused, PassOrder::forward)->Apply(short_lengths);
BENCHMARK_CAPTURE(BM_softmax, tiled_reverse, Algorithm::tiled, PassOrder::reverse)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, tiled_forward, Algorithm::tiled, PassOrder::forward)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, online_reverse, Algorithm::online, PassOrder::reverse)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, online_forward, Algorithm::online, PassOrder::forward)->Apply(lengths);
BENCHMARK_CAPTURE(BM_softmax, auto, Algorithm::automatic, PassOrder::reverse)->Apply(lengths);

}  // namespace

BENCHMARK_MAIN();
