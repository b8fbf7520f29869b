#include "accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace smax::test {
namespace {

constexpr int kMaxReportedFailures = 6;

bool is_16_bit(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

// The smallest magnitude that rounds to infinity in the output type: its largest
// finite value plus half a unit in its last place.
long double overflow_threshold(DType dtype) {
  switch (dtype) {
    case DType::f32: return std::ldexp(2.0L - std::ldexp(1.0L, -24), 127);
    case DType::f64: return std::ldexp(2.0L - std::ldexp(1.0L, -53), 1023);
    case DType::f16: return 65520.0L;
    case DType::bf16: return std::ldexp(2.0L - std::ldexp(1.0L, -8), 127);
  }
  return 0;
}

std::string format(long double v) {
  std::ostringstream out;
  out.precision(21);
  out << v;
  return out.str();
}

}  // namespace

long double ulp16(DType dtype, long double value) {
  const int fraction_bits = dtype == DType::f16 ? 10 : 7;
  const int min_normal_exponent = dtype == DType::f16 ? -14 : -126;
  const long double magnitude = std::fabs(value);
  int exponent = min_normal_exponent;
  if (magnitude >= std::ldexp(1.0L, min_normal_exponent)) exponent = std::ilogb(magnitude);
  return std::ldexp(1.0L, exponent - fraction_bits);
}

long double tolerance(Op op, DType dtype, long double reference) {
  if (is_16_bit(dtype)) return ulp16(dtype, reference);
  const long double bar = dtype == DType::f64 ? 1e-13L : (op == Op::softmax ? 1e-6L : 2e-6L);
  const long double magnitude = std::fabs(reference);
  if (op != Op::softmax) return bar * std::max(1.0L, magnitude);
  return magnitude >= 1e-30L ? bar * magnitude : 1e-36L;
}

bool meets_bar(Op op, DType dtype, long double got, long double reference, std::string* why) {
  auto fail = [&](const std::string& text) {
    if (why != nullptr) *why = text;
    return false;
  };
  if (std::isnan(reference)) return std::isnan(got) || fail("expected NaN");
  if (std::isinf(reference) || std::fabs(reference) >= overflow_threshold(dtype)) {
    const long double infinity = std::copysign(HUGE_VALL, reference);
    return got == infinity || fail(std::string("expected ") + (reference > 0 ? "+inf" : "-inf"));
  }
  if (!std::isfinite(got)) return fail("expected a finite value");
  const long double error = std::fabs(got - reference);
  const long double allowed = tolerance(op, dtype, reference);
  if (error <= allowed) return true;
  return fail("error " + format(error) + " > allowed " + format(allowed));
}

::testing::AssertionResult matches_reference(Op op, const TestTensor& output, const Expected& expected) {
  if (output.shape() != expected.shape) {
    return ::testing::AssertionFailure() << "output " << output.describe() << " does not have the expected shape";
  }
  std::ostringstream report;
  int failures = 0;
  std::string why;
  for (std::int64_t i = 0; i < output.numel(); ++i) {
    const long double got = output.at(i);
    const long double reference = expected.values[static_cast<std::size_t>(i)];
    if (meets_bar(op, output.dtype(), got, reference, &why)) continue;
    if (++failures <= kMaxReportedFailures) {
      report << "\n  at " << ::testing::PrintToString(output.unravel(i)) << ": got " << format(got) << ", reference "
             << format(reference) << ": " << why;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << to_string(op) << " on " << output.describe() << ": " << failures << " of "
                                       << output.numel() << " outputs miss the bar" << report.str();
}

::testing::AssertionResult bitwise_equal(const TestTensor& a, const TestTensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe() << ": different tensors";
  }
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const long double x = a.at(i);
    const long double y = b.at(i);
    const bool same = (std::isnan(x) && std::isnan(y)) || (x == y && std::signbit(x) == std::signbit(y));
    if (!same) {
      return ::testing::AssertionFailure() << "first difference at " << ::testing::PrintToString(a.unravel(i))
                                           << ": " << format(x) << " vs " << format(y);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace smax::test
