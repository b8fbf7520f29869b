// The (max, sum) pair of a row and its associative merge: the one piece of algebra
// that online softmax, logsumexp and every split of a row build on.
#pragma once

#include <cmath>
#include <limits>

namespace smax::detail {

// NaN-propagating max: a NaN on either side wins (std::max and maxps drop it
// depending on the operand order).
template <class C>
inline C nan_max(C a, C b) {
  return (a > b || a != a) ? a : b;
}

// Neumaier's compensated sum in double. The terms a softmax adds are all >= 0, so
// the error stays within a few ulp at any length (a plain float sum loses three
// digits at 4M elements).
class ExactSum {
 public:
  void add(double v) {
    const double t = sum_ + v;
    correction_ += std::abs(sum_) >= std::abs(v) ? (sum_ - t) + v : (v - t) + sum_;
    sum_ = t;
  }
  void add(const ExactSum& other) {
    add(other.sum_);
    add(other.correction_);
  }
  void scale(double factor) {
    sum_ *= factor;
    correction_ *= factor;
  }
  double value() const { return sum_ + correction_; }
  // value() - 1 without the rounding of value(): when the row's max contributes
  // exactly 1 and the rest is tiny, log1p of this keeps log(d) exact (sum_ - 1 is
  // exact for sum_ in [0.5, 2]).
  double minus_one() const { return (sum_ - 1.0) + correction_; }

 private:
  double sum_ = 0;
  double correction_ = 0;
};

// m = max(x); d = sum(exp((x - m) * inv_t)). The max is kept in the raw domain of
// x so that x - m is exact for every element that matters (Sterbenz), whatever the
// temperature.
template <class C>
struct Stats {
  C m = -std::numeric_limits<C>::infinity();
  ExactSum d;
};

// The merge of the online-softmax paper: rescale both sums to the larger max.
// A non-finite max decides the row by itself (see finish_row), so d is not needed.
template <class C>
inline Stats<C> merge(const Stats<C>& a, const Stats<C>& b, C inv_t) {
  Stats<C> r;
  r.m = nan_max(a.m, b.m);
  if (!std::isfinite(r.m)) return r;
  ExactSum da = a.d;
  ExactSum db = b.d;
  da.scale(std::exp(static_cast<double>((a.m - r.m) * inv_t)));
  db.scale(std::exp(static_cast<double>((b.m - r.m) * inv_t)));
  r.d = da;
  r.d.add(db);
  return r;
}

// Online softmax keeps its running sum against a reference point that moves only when
// the max exceeds it by more than this (in units of T): every exp(ref_old - ref_new)
// factor then shrinks the old sum by e^-8 or more, so rounding cannot pile up on an
// ascending row the way one rescale per new max would. Terms stay below e^8, far
// from overflow.
inline constexpr double kRescaleThreshold = 8;

}  // namespace smax::detail
