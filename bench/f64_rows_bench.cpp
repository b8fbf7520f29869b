// f64 rows, one thread: each variant next to a copy of the same bytes, on a
// cache-resident row and a DRAM-resident one. bytes_per_second counts the input read
// and the output written once.
//   build/release/bench/smax_bench_f64 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "smax/smax.hpp"

namespace {

std::vector<double> random_row(std::int64_t n) {
  std::mt19937 gen(42);
  std::normal_distribution<double> dist(0.0, 3.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (double& v : x) v = dist(gen);
  return x;
}

void set_bytes(benchmark::State& state, std::int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * 2 * static_cast<std::int64_t>(sizeof(double)));
}

void BM_f64_copy(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<double> x = random_row(n);
  std::vector<double> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size() * sizeof(double));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

void BM_f64(benchmark::State& state, smax::Op op, smax::Algorithm algorithm, smax::PassOrder order,
            double temperature) {
  const std::int64_t n = state.range(0);
  const std::vector<double> x = random_row(n);
  std::vector<double> y(x.size());
  const smax::Options options{.temperature = temperature, .algorithm = algorithm, .pass_order = order, .threads = 1};
  for (auto _ : state) {
    if (op == smax::Op::softmax) {
      smax::softmax(x, y, options);
    } else {
      smax::log_softmax(x, y, options);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}

void lengths(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {16384, 1 << 22}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

void short_lengths(benchmark::internal::Benchmark* b) {
  b->Arg(16384);
  b->Unit(benchmark::kMicrosecond);
}

using smax::Algorithm;
using smax::Op;
using smax::PassOrder;

BENCHMARK(BM_f64_copy)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, safe, Op::softmax, Algorithm::safe, PassOrder::forward, 1.0)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, safe_T07, Op::softmax, Algorithm::safe, PassOrder::forward, 0.7)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, fused, Op::softmax, Algorithm::fused, PassOrder::forward, 1.0)->Apply(short_lengths);
BENCHMARK_CAPTURE(BM_f64, tiled_reverse, Op::softmax, Algorithm::tiled, PassOrder::reverse, 1.0)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, online_reverse, Op::softmax, Algorithm::online, PassOrder::reverse, 1.0)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, auto, Op::softmax, Algorithm::automatic, PassOrder::reverse, 1.0)->Apply(lengths);
BENCHMARK_CAPTURE(BM_f64, log_softmax_safe, Op::log_softmax, Algorithm::safe, PassOrder::forward, 1.0)->Apply(lengths);

}  // namespace

BENCHMARK_MAIN();
