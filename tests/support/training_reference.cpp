#include "training_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "accuracy.hpp"
#include "reference/reference.hpp"

namespace smax::test {
namespace {

constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();

// Row-major positions of the rows along `axis`: for each row, the linear index of
// its first element and the step between elements.
struct Rows {
  std::vector<std::int64_t> first;
  std::int64_t step = 1;
  std::int64_t length = 1;
};

Rows rows_of(const std::vector<std::int64_t>& shape, int axis) {
  Rows r;
  if (shape.empty()) {
    r.first = {0};
    return r;
  }
  const auto a = static_cast<std::size_t>(axis);
  r.length = shape[a];
  std::int64_t inner = 1;
  for (std::size_t i = a + 1; i < shape.size(); ++i) inner *= shape[i];
  std::int64_t outer = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= shape[i];
  r.step = inner;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) r.first.push_back(o * r.length * inner + in);
  }
  return r;
}

long double neumaier(const std::vector<long double>& terms) {
  long double sum = 0, correction = 0;
  for (long double v : terms) {
    const long double t = sum + v;
    if (std::isfinite(t)) correction += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  return std::isfinite(sum) ? sum + correction : sum;
}

std::string format(long double v) {
  std::ostringstream out;
  out.precision(21);
  out << v;
  return out.str();
}

long double smallest_step(DType dtype) {
  switch (dtype) {
    case DType::f32: return 0x1p-149L;
    case DType::f64: return 0x1p-1074L;
    case DType::f16: return 0x1p-24L;
    case DType::bf16: return 0x1p-133L;
  }
  return 0;
}

}  // namespace

Reference backward_reference(bool log, const TestTensor& y, const TestTensor& dy, int axis, long double temperature) {
  const Rows rows = rows_of(y.shape(), axis);
  Reference r;
  r.values.assign(static_cast<std::size_t>(y.numel()), 0);
  r.cancelled.assign(r.values.size(), 0);
  if (y.numel() == 0) return r;
  for (std::int64_t first : rows.first) {
    std::vector<long double> terms;
    for (std::int64_t i = 0; i < rows.length; ++i) {
      const std::int64_t k = first + i * rows.step;
      terms.push_back(log ? dy.at(k) : y.at(k) * dy.at(k));
    }
    const long double s = neumaier(terms);
    for (std::int64_t i = 0; i < rows.length; ++i) {
      const std::int64_t k = first + i * rows.step;
      const auto o = static_cast<std::size_t>(k);
      if (log) {
        const long double p = std::exp(y.at(k));
        r.values[o] = (dy.at(k) - p * s) / temperature;
        r.cancelled[o] = (std::fabs(dy.at(k)) + std::fabs(p * s)) / temperature;
      } else {
        r.values[o] = y.at(k) * (dy.at(k) - s) / temperature;
        r.cancelled[o] = std::fabs(y.at(k)) * (std::fabs(dy.at(k)) + std::fabs(s)) / temperature;
      }
    }
  }
  return r;
}

CrossEntropyReference cross_entropy_reference(const CrossEntropyCase& c) {
  const Rows rows = rows_of(c.shape, c.axis);
  const std::int64_t classes = rows.length;
  const auto n_classes = static_cast<long double>(classes);
  const long double eps = c.label_smoothing;
  auto w = [&](std::int64_t k) { return c.weight.empty() ? 1.0L : c.weight[static_cast<std::size_t>(k)]; };
  CrossEntropyReference out;
  out.grad.values.assign(c.logits.size(), 0);
  out.grad.cancelled.assign(c.logits.size(), 0);
  out.log_prob.assign(c.logits.size(), 0);
  std::vector<long double> per_sample;
  std::vector<long double> divisor_terms;
  std::vector<std::vector<long double>> coefficients;  // a_c per sample, empty if ignored
  for (std::size_t n = 0; n < rows.first.size(); ++n) {
    std::vector<long double> x(static_cast<std::size_t>(classes)), logp(x.size());
    for (std::int64_t k = 0; k < classes; ++k) x[static_cast<std::size_t>(k)] = c.logits[static_cast<std::size_t>(rows.first[n] + k * rows.step)];
    reference::row(Op::log_softmax, x, logp);
    for (std::int64_t k = 0; k < classes; ++k) {
      out.log_prob[static_cast<std::size_t>(rows.first[n] + k * rows.step)] = logp[static_cast<std::size_t>(k)];
    }
    std::vector<long double> a(x.size(), 0);
    long double loss = 0;
    if (c.index_targets) {
      const std::int64_t t = c.indices[n];
      if (c.ignore_index && t == *c.ignore_index) {
        per_sample.push_back(0);
        coefficients.emplace_back();
        continue;
      }
      divisor_terms.push_back(w(t));
      // PyTorch: (1 - eps) * nll + eps / C * smooth, smooth = -sum_c w_c logp_c.
      const long double nll = -w(t) * logp[static_cast<std::size_t>(t)];
      loss = (1 - eps) * nll;
      a[static_cast<std::size_t>(t)] += (1 - eps) * w(t);
      if (eps != 0) {
        std::vector<long double> smooth;
        for (std::int64_t k = 0; k < classes; ++k) {
          smooth.push_back(-w(k) * logp[static_cast<std::size_t>(k)]);
          a[static_cast<std::size_t>(k)] += eps / n_classes * w(k);
        }
        loss += eps / n_classes * neumaier(smooth);
      }
    } else {
      std::vector<long double> terms;
      for (std::int64_t k = 0; k < classes; ++k) {
        const long double y = c.probabilities[static_cast<std::size_t>(rows.first[n] + k * rows.step)];
        const long double target = (1 - eps) * y + eps / n_classes;
        a[static_cast<std::size_t>(k)] = w(k) * target;
        terms.push_back(-(w(k) * target) * logp[static_cast<std::size_t>(k)]);
      }
      loss = neumaier(terms);
      divisor_terms.push_back(1);
    }
    per_sample.push_back(loss);
    coefficients.push_back(a);
  }
  const long double divisor = neumaier(divisor_terms);
  const long double scale = c.reduction == Reduction::mean ? 1 / divisor : 1;
  if (c.reduction == Reduction::none) out.loss = per_sample;
  else out.loss = {c.reduction == Reduction::sum ? neumaier(per_sample) : neumaier(per_sample) / divisor};
  // d(-sum_c a_c logp_c)/dx_k = S p_k - a_k.
  for (std::size_t n = 0; n < rows.first.size(); ++n) {
    const std::vector<long double>& a = coefficients[n];
    if (a.empty()) continue;  // ignored: the gradient of a constant
    const long double s = neumaier(a);
    for (std::int64_t k = 0; k < classes; ++k) {
      const auto o = static_cast<std::size_t>(rows.first[n] + k * rows.step);
      const long double p = std::exp(out.log_prob[o]);
      out.grad.values[o] = scale * (s * p - a[static_cast<std::size_t>(k)]);
      out.grad.cancelled[o] = std::fabs(scale) * (std::fabs(s * p) + std::fabs(a[static_cast<std::size_t>(k)]));
      if (std::isnan(out.log_prob[o])) out.grad.values[o] = kNaN;
    }
  }
  return out;
}

long double cross_entropy_objective(const CrossEntropyCase& c) {
  const CrossEntropyReference r = cross_entropy_reference(c);
  return c.reduction == Reduction::none ? neumaier(r.loss) : r.loss.at(0);
}

::testing::AssertionResult meets_training_bar(const std::string& what, const TestTensor& out,
                                              const std::vector<long double>& expected,
                                              const std::vector<long double>& cancelled,
                                              long double cancellation_eps) {
  if (static_cast<std::size_t>(out.numel()) != expected.size()) {
    return ::testing::AssertionFailure() << what << ": " << out.numel() << " outputs, " << expected.size()
                                         << " expected";
  }
  std::ostringstream report;
  int failures = 0;
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const long double got = out.at(i);
    const long double ref = expected[static_cast<std::size_t>(i)];
    bool ok;
    long double allowed = 0;
    if (std::isnan(ref)) {
      ok = std::isnan(got);
    } else if (std::isinf(ref)) {
      ok = got == ref;
    } else {
      switch (out.dtype()) {
        case DType::f32: allowed = 1e-6L * std::fabs(ref); break;
        case DType::f64: allowed = 1e-13L * std::fabs(ref); break;
        case DType::f16:
        case DType::bf16: allowed = ulp16(out.dtype(), ref); break;
      }
      allowed += smallest_step(out.dtype()) + cancellation_eps * (cancelled.empty() ? 0 : cancelled[static_cast<std::size_t>(i)]);
      // A result beyond the type's range rounds to an infinity: that infinity is right
      // where some value within the allowed error of the reference rounds to it.
      const long double farthest = round_to(out.dtype(), ref + std::copysign(allowed, ref));
      ok = std::isfinite(got) ? std::fabs(got - ref) <= allowed : std::isinf(farthest) && got == farthest;
    }
    if (!ok && ++failures <= 6) {
      report << "\n  at " << ::testing::PrintToString(out.unravel(i)) << ": got " << format(got) << ", reference "
             << format(ref) << " (allowed error " << format(allowed) << ")";
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " on " << out.describe() << ": " << failures << " of "
                                       << out.numel() << " miss the bar" << report.str();
}

}  // namespace smax::test
