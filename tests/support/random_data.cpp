#include "random_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace smax::test {

Distribution random_distribution(Rng& rng) {
  std::uniform_real_distribution<double> offset(-50.0, 50.0);
  std::uniform_real_distribution<double> log_scale(std::log(0.1), std::log(10.0));
  return {offset(rng), std::exp(log_scale(rng))};
}

void fill_normal(TestTensor& tensor, Rng& rng, Distribution distribution) {
  std::normal_distribution<double> normal(distribution.offset, distribution.scale);
  for (std::int64_t i = 0; i < tensor.numel(); ++i) tensor.set_at(i, normal(rng));
}

TestTensor linspace_ramp(std::int64_t n, bool ascending) {
  TestTensor x(DType::f64, {n});
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(n - 1);
    x.set_at(i, ascending ? t : 1.0 - t);
  }
  return x;
}

std::vector<std::int64_t> random_shape(Rng& rng, int rank, std::int64_t max_extent) {
  std::uniform_int_distribution<std::int64_t> extent(1, max_extent);
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rank));
  for (auto& e : shape) e = extent(rng);
  return shape;
}

int random_call_count(int fallback) {
  const char* text = std::getenv("SMAX_RANDOM_CALLS");
  return text != nullptr ? std::atoi(text) : fallback;
}

std::int64_t random_call_elements(std::int64_t fallback) {
  const char* text = std::getenv("SMAX_RANDOM_ELEMENTS");
  return text != nullptr ? std::max<std::int64_t>(1, std::atoll(text)) : fallback;
}

}  // namespace smax::test
