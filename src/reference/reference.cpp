#include "reference/reference.hpp"

#include <cmath>
#include <limits>

namespace smax::reference {

namespace {

// sum(exp((x - m) / T)) - 1 for a row with a finite max m: the sum without the max's
// own term, which is exactly 1. log1p of it keeps log(d) exact when the others are
// tiny (log(1 + 1e-30) would round to 0).
long double sum_of_others(std::span<const long double> x, long double m, long double temperature) {
  long double sum = 0, correction = 0;  // Neumaier
  bool skipped_max = false;
  for (long double v : x) {
    if (v == m && !skipped_max) {
      skipped_max = true;
      continue;
    }
    const long double term = std::exp((v - m) / temperature);
    const long double t = sum + term;
    correction += std::fabs(sum) >= term ? (sum - t) + term : (term - t) + sum;
    sum = t;
  }
  return sum + correction;
}

}  // namespace

void row(Op op, std::span<const long double> x, std::span<long double> out, long double temperature,
         AllMasked all_masked) {
  constexpr long double kInf = std::numeric_limits<long double>::infinity();
  constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();
  bool any_nan = false;
  long double m = -kInf;
  for (long double v : x) {
    if (std::isnan(v)) any_nan = true;
    else if (v > m) m = v;
  }
  auto fill = [&](long double value) {
    for (long double& o : out) o = value;
  };
  if (op == Op::logsumexp) {
    if (any_nan) out[0] = kNaN;
    else if (!std::isfinite(m)) out[0] = m;  // +inf, or -inf for all -inf and empty rows
    else out[0] = m / temperature + std::log1p(sum_of_others(x, m, temperature));
    return;
  }
  if (any_nan || m == kInf) return fill(kNaN);
  if (m == -kInf) {
    if (all_masked == AllMasked::nan) return fill(kNaN);
    return fill(op == Op::softmax ? 0.0L : -kInf);
  }
  const long double others = sum_of_others(x, m, temperature);
  const long double d = 1 + others;
  const long double log_d = std::log1p(others);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double z = (x[i] - m) / temperature;
    out[i] = op == Op::softmax ? std::exp(z) / d : z - log_d;
  }
}

}  // namespace smax::reference
