// softmax_backward and log_softmax_backward: every dtype, axis and layout against a
// long double reference, the formula itself against long double finite differences,
// in place, edge values and shapes, threads, errors; the vectorised rows on every
// Highway target.
#include <gtest/gtest.h>
#include <hwy/cache_control.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "reference/reference.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"
#include "smax/error.hpp"
#include "smax/ops.hpp"
#include "smax/training.hpp"
#include "training/simd/gradient_rows.hpp"
#include "training_reference.hpp"

namespace smax::test {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();
constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();
constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// f64 computes in long double, the others in double (see backward.cpp); four units
// of that precision cover the rounding where dy - s cancels.
long double compute_eps(DType dtype) { return dtype == DType::f64 ? 0x1p-61L : 0x1p-50L; }

// y = softmax(x / T) (or log-softmax) of random logits, computed in long double and
// stored in `layout`: the forward output a backward call receives.
TestTensor forward_output(bool log, DType dtype, const std::vector<std::int64_t>& shape, int axis, long double t,
                          Layout layout, Rng& rng) {
  TestTensor x(DType::f64, shape);
  fill_normal(x, rng, Distribution{0, 3});
  Options options;
  options.axis = axis;
  options.temperature = static_cast<double>(t);
  const Expected e = reference_nd(log ? Op::log_softmax : Op::softmax, x, options);
  return make_tensor(dtype, shape, e.values, layout);
}

class Backward : public SeededTest, public ::testing::WithParamInterface<bool> {};

TEST_P(Backward, EveryDtypeAxisAndLayoutMeetsTheBar) {
  const bool log = GetParam();
  for (DType dtype : kDTypes) {
    for (int rank = 1; rank <= 4; ++rank) {
      constexpr std::int64_t kMaxExtent[] = {0, 300, 24, 9, 5};
      for (int axis = -rank; axis < rank; ++axis) {
        const std::vector<std::int64_t> shape = random_shape(rng(), rank, kMaxExtent[rank]);
        const Layout in_layout = kAllLayouts[rng()() % std::size(kAllLayouts)];
        const Layout dy_layout = kAllLayouts[rng()() % std::size(kAllLayouts)];
        const Layout out_layout = kOutputLayouts[rng()() % std::size(kOutputLayouts)];
        const long double t = (rng()() % 2) ? 1.0L : 0.7L;
        TestTensor y = forward_output(log, dtype, shape, axis, t, in_layout, rng());
        TestTensor dy(dtype, shape, dy_layout);
        fill_normal(dy, rng(), Distribution{0, 1});
        TestTensor dx(dtype, shape, out_layout);
        BackwardOptions o;
        o.axis = axis;
        o.temperature = static_cast<double>(t);
        SCOPED_TRACE("axis " + std::to_string(axis) + " T " + std::to_string(static_cast<double>(t)) + " y " +
                     y.describe() + " dy " + dy.describe() + " dx " + dx.describe());
        run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
        const Reference ref = backward_reference(log, y, dy, normalized_axis(axis, rank), t);
        EXPECT_TRUE(meets_training_bar(log ? "log_softmax_backward" : "softmax_backward", dx, ref.values,
                                       ref.cancelled, compute_eps(dtype)));
        EXPECT_TRUE(dx.untouched_outside_view());
      }
    }
  }
}

// The reference's formula against the derivative itself: for L(x) = sum(g * f(x / T))
// with f softmax or log-softmax, central differences in long double on small rows.
TEST_P(Backward, MatchesLongDoubleFiniteDifferences) {
  const bool log = GetParam();
  for (std::int64_t n : {1, 2, 3, 7, 13}) {
    for (long double t : {1.0L, 0.5L, 3.0L}) {
      std::vector<long double> x(static_cast<std::size_t>(n)), g(x.size());
      std::normal_distribution<double> normal(0, 2);
      for (auto& v : x) v = normal(rng());
      for (auto& v : g) v = normal(rng());
      auto objective = [&](const std::vector<long double>& at) {
        std::vector<long double> out(at.size());
        reference::row(log ? Op::log_softmax : Op::softmax, at, out, t);
        long double sum = 0;
        for (std::size_t i = 0; i < out.size(); ++i) sum += g[i] * out[i];
        return sum;
      };
      std::vector<long double> fwd(x.size());
      reference::row(log ? Op::log_softmax : Op::softmax, x, fwd, t);
      TestTensor y = make_tensor(DType::f64, {n}, fwd);
      TestTensor dy = make_tensor(DType::f64, {n}, g);
      TestTensor dx(DType::f64, {n});
      BackwardOptions o;
      o.temperature = static_cast<double>(t);
      run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
      const long double h = 1e-6L;
      for (std::size_t i = 0; i < x.size(); ++i) {
        std::vector<long double> plus = x, minus = x;
        plus[i] += h;
        minus[i] -= h;
        const long double numeric = (objective(plus) - objective(minus)) / (2 * h);
        // Truncation ~h^2, rounding ~1e-19 / h; y and dy are rounded to f64 first.
        EXPECT_NEAR(static_cast<double>(dx.at(static_cast<std::int64_t>(i))), static_cast<double>(numeric), 1e-9)
            << "n " << n << " T " << static_cast<double>(t) << " element " << i;
      }
    }
  }
}

// The backward op in place over dy and over y gives the bits of `separate`, its
// result into a tensor of its own.
void expect_same_bits_in_place(bool log, const TestTensor& y, const TestTensor& dy, const TestTensor& separate,
                               const BackwardOptions& options) {
  TestTensor over_dy = dy;
  run_backward(log, y.view(), over_dy.view(), over_dy.mutable_view(), options);
  TestTensor over_y = y;
  run_backward(log, over_y.view(), dy.view(), over_y.mutable_view(), options);
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  for (std::int64_t i = 0; i < separate.numel(); ++i) {
    const auto expected = static_cast<double>(separate.at(i));
    ASSERT_TRUE(same(expected, static_cast<double>(over_dy.at(i)))) << "over dy, element " << i;
    ASSERT_TRUE(same(expected, static_cast<double>(over_y.at(i)))) << "over y, element " << i;
  }
}

TEST_P(Backward, InPlaceOverDyOrYGivesTheSameBits) {
  const bool log = GetParam();
  for (DType dtype : kDTypes) {
    for (Layout layout : kOutputLayouts) {
      const std::vector<std::int64_t> shape = {5, 37};
      TestTensor y = forward_output(log, dtype, shape, 1, 1, layout, rng());
      TestTensor dy(dtype, shape, layout);
      fill_normal(dy, rng(), Distribution{0, 1});
      // In the same layout: a strided axis runs across the vector lanes only where dx's
      // is strided too, and the lanes' float arithmetic need not round as the scalar
      // loops' double arithmetic does.
      TestTensor separate(dtype, shape, layout);
      run_backward(log, y.view(), dy.view(), separate.mutable_view(), {});
      TestTensor over_dy = dy;
      run_backward(log, y.view(), over_dy.view(), over_dy.mutable_view(), {});
      TestTensor over_y = y;
      run_backward(log, over_y.view(), dy.view(), over_y.mutable_view(), {});
      for (std::int64_t i = 0; i < separate.numel(); ++i) {
        ASSERT_EQ(static_cast<double>(separate.at(i)), static_cast<double>(over_dy.at(i))) << to_string(layout);
        ASSERT_EQ(static_cast<double>(separate.at(i)), static_cast<double>(over_y.at(i))) << to_string(layout);
      }
    }
  }
}

TEST_P(Backward, LengthOnePrimesRankZeroAndEmpty) {
  const bool log = GetParam();
  for (DType dtype : kDTypes) {
    // A row of one: y = 1 (log 0), so dx = 0 whatever dy is.
    TestTensor y = make_tensor(dtype, {4, 1}, {log ? 0.0L : 1.0L, log ? 0.0L : 1.0L, log ? 0.0L : 1.0L, log ? 0.0L : 1.0L});
    TestTensor dy = make_tensor(dtype, {4, 1}, {1.5L, -3, 0, 1e4L});
    TestTensor dx(dtype, {4, 1});
    run_backward(log, y.view(), dy.view(), dx.mutable_view(), {});
    for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(static_cast<double>(dx.at(i)), 0.0);
    // Rank 0 behaves as a row of one.
    TestTensor y0 = make_tensor(dtype, {}, {log ? 0.0L : 1.0L});
    TestTensor dy0 = make_tensor(dtype, {}, {2.5L});
    TestTensor dx0(dtype, {});
    run_backward(log, y0.view(), dy0.view(), dx0.mutable_view(), {});
    EXPECT_EQ(static_cast<double>(dx0.at(0)), 0.0);
    // Prime lengths along a middle axis.
    for (std::int64_t n : {2, 3, 31, 257, 1021}) {
      const std::vector<std::int64_t> shape = {2, n, 3};
      TestTensor yp = forward_output(log, dtype, shape, 1, 1, Layout::contiguous, rng());
      TestTensor dyp(dtype, shape);
      fill_normal(dyp, rng(), Distribution{0.5, 2});
      TestTensor dxp(dtype, shape, Layout::strided);
      BackwardOptions o;
      o.axis = 1;
      run_backward(log, yp.view(), dyp.view(), dxp.mutable_view(), o);
      const Reference ref = backward_reference(log, yp, dyp, 1, 1);
      EXPECT_TRUE(meets_training_bar("prime " + std::to_string(n), dxp, ref.values, ref.cancelled, compute_eps(dtype)));
    }
    // Empty tensors: nothing to write, no error.
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{0, 5}, {5, 0}, {0}}) {
      TestTensor ye(dtype, shape), dye(dtype, shape), dxe(dtype, shape);
      run_backward(log, ye.view(), dye.view(), dxe.mutable_view(), {});
      EXPECT_TRUE(dxe.untouched_outside_view());
    }
  }
}

// Non-finite values follow IEEE arithmetic on the formula, row by row: a NaN or an
// infinity in dy reaches the whole row through the sum; masked elements (y = 0,
// log_y = -inf) give dx = 0 (softmax) or dx = dy (log-softmax). On every Highway
// target: the rows are contiguous, so f32, f16 and bf16 take the vectorised kernels.
TEST_P(Backward, NonFiniteValuesAndMaskedElements) {
  const bool log = GetParam();
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : kDTypes) {
        const long double zero_y = log ? -kInf : 0.0L;
        const long double quarter = log ? std::log(0.25L) : 0.25L;
        const long double half = log ? std::log(0.5L) : 0.5L;
        const long double three_quarters = log ? std::log(0.75L) : 0.75L;
        const std::vector<long double> y_values = {quarter, zero_y, three_quarters, half, half,
                                                   zero_y,  half,   half,           zero_y};
        const std::vector<long double> dy_values = {1, 100, -2, kNaN, 1, 1, kInf, 1, 3};
        TestTensor y = make_tensor(dtype, {3, 3}, y_values);
        TestTensor dy = make_tensor(dtype, {3, 3}, dy_values);
        TestTensor dx(dtype, {3, 3});
        run_backward(log, y.view(), dy.view(), dx.mutable_view(), {});
        const Reference ref = backward_reference(log, y, dy, 1, 1);
        EXPECT_TRUE(meets_training_bar(to_string(dtype).data(), dx, ref.values, ref.cancelled, compute_eps(dtype)));
        // Row 0: the masked element.
        EXPECT_EQ(static_cast<double>(dx.at(1)), log ? static_cast<double>(round_to(dtype, 100)) : 0.0);
        for (std::int64_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(dx.at(i))) << "NaN row, element " << i;
      }
    });
  }
}

// bf16 products y * dy are formed in float, where two values of 2^70 overflow though
// their double product (the reference's) does not: a finite sum of 2^140 must not
// become infinite (an element with y = 0 would then give NaN, one with a tiny y an
// infinity). Every target, alone and in a batch of rows, and across the lanes along
// axis 1 (softmax_backward only: its sum is of products).
TEST(BackwardSoftmax, ProductsBeyondFloatsRangeKeepTheirSum) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (std::int64_t n : {3, 40, 2000}) {
        SCOPED_TRACE("n " + std::to_string(n));
        std::vector<long double> y_values(static_cast<std::size_t>(2 * n), 0x1p-100L);
        std::vector<long double> dy_values(static_cast<std::size_t>(2 * n), 1.0L);
        for (std::int64_t row = 0; row < 2; ++row) {
          y_values[static_cast<std::size_t>(row * n)] = 0x1p70L;
          dy_values[static_cast<std::size_t>(row * n)] = 0x1p70L;
          y_values[static_cast<std::size_t>(row * n + n - 1)] = 0;
        }
        TestTensor y = make_tensor(DType::bf16, {2, n}, y_values);
        TestTensor dy = make_tensor(DType::bf16, {2, n}, dy_values);
        TestTensor dx(DType::bf16, {2, n});
        softmax_backward(y.view(), dy.view(), dx.mutable_view());
        const Reference ref = backward_reference(false, y, dy, 1, 1);
        EXPECT_TRUE(meets_training_bar("bf16", dx, ref.values, ref.cancelled, compute_eps(DType::bf16)));
        for (std::int64_t row = 0; row < 2; ++row) {
          EXPECT_EQ(static_cast<double>(dx.at(row * n + n - 1)), 0.0) << "y = 0, row " << row;
          EXPECT_TRUE(std::isfinite(dx.at(row * n + 1))) << "y = 2^-100, row " << row;
        }
        // The same rows across the lanes (axis 1 of [2, n, 19]: each row in every column).
        constexpr std::int64_t kWidth = 19;
        std::vector<long double> y_columns, dy_columns;
        for (std::size_t i = 0; i < y_values.size(); ++i) {
          y_columns.insert(y_columns.end(), kWidth, y_values[i]);
          dy_columns.insert(dy_columns.end(), kWidth, dy_values[i]);
        }
        TestTensor yc = make_tensor(DType::bf16, {2, n, kWidth}, y_columns);
        TestTensor dyc = make_tensor(DType::bf16, {2, n, kWidth}, dy_columns);
        TestTensor dxc(DType::bf16, {2, n, kWidth});
        BackwardOptions along_columns;
        along_columns.axis = 1;
        softmax_backward(yc.view(), dyc.view(), dxc.mutable_view(), along_columns);
        const Reference ref_columns = backward_reference(false, yc, dyc, 1, 1);
        EXPECT_TRUE(
            meets_training_bar("bf16 columns", dxc, ref_columns.values, ref_columns.cancelled, compute_eps(DType::bf16)));
        for (std::int64_t row = 0; row < 2; ++row) {
          for (std::int64_t j = 0; j < kWidth; ++j) {
            EXPECT_EQ(static_cast<double>(dxc.at((row * n + n - 1) * kWidth + j)), 0.0) << "y = 0, row " << row;
            EXPECT_TRUE(std::isfinite(dxc.at((row * n + 1) * kWidth + j))) << "y = 2^-100, row " << row;
          }
        }
      }
    });
  }
}

// Contiguous f32, f16 and bf16 rows go to the vectorised kernels: every Highway
// target this machine supports, lengths around every vector width (whole vectors,
// unrolled groups, tails), misaligned rows, a temperature, in place over dy, and
// rows where some elements leave the float lanes for the double ones mid-row (a tiny
// y under a temperature below 1, a log_y below the float exp's range). Streaming
// stores for dx (BackwardOptions::stores) write the same bits.
TEST_P(Backward, VectorisedRowsOnEveryTargetMeetTheBar) {
  const bool log = GetParam();
  constexpr std::int64_t kLengths[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000, 4097};
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (std::int64_t n : kLengths) {
          for (Layout layout : {Layout::contiguous, Layout::misaligned}) {
            const long double t = n % 2 ? 1.0L : 0.7L;
            const std::vector<std::int64_t> shape = {3, n};
            TestTensor y = forward_output(log, dtype, shape, 1, t, layout, rng());
            if (n >= 1000) y.set_at(n + n / 2, log ? -100.0L : 1e-39L);
            TestTensor dy(dtype, shape, layout);
            fill_normal(dy, rng(), Distribution{0.5, 2});
            TestTensor dx(dtype, shape, layout);
            BackwardOptions o;
            o.temperature = static_cast<double>(t);
            o.stores = Stores::cached;
            SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n) + " " + to_string(layout));
            run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
            const Reference ref = backward_reference(log, y, dy, 1, t);
            EXPECT_TRUE(meets_training_bar("vectorised", dx, ref.values, ref.cancelled, compute_eps(dtype)));
            EXPECT_TRUE(dx.untouched_outside_view());
            TestTensor over_dy = dy;
            run_backward(log, y.view(), over_dy.view(), over_dy.mutable_view(), o);
            ASSERT_EQ(over_dy.bytes(), dx.bytes());
            o.stores = Stores::streaming;
            TestTensor streamed(dtype, shape, layout);
            run_backward(log, y.view(), dy.view(), streamed.mutable_view(), o);
            ASSERT_EQ(streamed.bytes(), dx.bytes());
            TestTensor streamed_over_dy = dy;
            run_backward(log, y.view(), streamed_over_dy.view(), streamed_over_dy.mutable_view(), o);
            ASSERT_EQ(streamed_over_dy.bytes(), dx.bytes());
          }
        }
      }
    });
  }
}

// The batch kernels (training/simd/gradient_rows.hpp's *_rows, which the API takes
// for contiguous rows of up to 1024) give each row the bits of the one-row kernels:
// every target, lengths around the vector widths, batches of one row to several
// groups, rows at irregular and misaligned offsets, temperatures below and above 1,
// NaN, infinite and masked elements, dy of a single huge value, the next rows
// fetched; in place over either input and streamed, the same bits.
template <class T>
void expect_batches_match_rows(bool log, DType dtype, Rng& rng) {
  namespace tsimd = training::simd;
  for (std::int64_t n : {1, 2, 7, 8, 9, 31, 33, 100, 129, 255, 1000}) {
    for (std::int64_t count : {1, 3, 8, 9, 19, 64}) {
      const std::int64_t stride = n + 3;
      const std::vector<std::int64_t> shape = {count, stride};
      TestTensor y = forward_output(log, dtype, shape, 1, 1, Layout::contiguous, rng);
      TestTensor dy(dtype, shape);
      fill_normal(dy, rng, Distribution{0.5, 2});
      std::vector<std::int64_t> at(static_cast<std::size_t>(count));
      for (std::int64_t j = 0; j < count; ++j) at[static_cast<std::size_t>(j)] = j * stride + j % 3;
      if (count > 3) {
        dy.set_at(at[1] + n / 2, kNaN);
        dy.set_at(at[2] + n - 1, kInf);
        y.set_at(at[3], log ? -kInf : 0.0L);
        dy.set_at(at[3] + n / 3, 3e38L);
      }
      const double inv_t = 1.0 / (count % 2 ? 0.7 : 1.5);
      const tsimd::BackwardRows rows{at.data(), at.data(), at.data(), log ? 256u : 0u};
      const auto* yp = static_cast<const T*>(y.data());
      const auto* dyp = static_cast<const T*>(dy.data());
      SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n) + " rows " + std::to_string(count));
      for (const bool stream : {false, true}) {
        TestTensor one(dtype, shape), batch(dtype, shape), over_dy = dy, over_y = y;
        auto* onep = static_cast<T*>(one.data());
        const auto length = static_cast<std::size_t>(n);
        for (std::int64_t j = 0; j < count; ++j) {
          const std::int64_t r = at[static_cast<std::size_t>(j)];
          if (log) {
            tsimd::log_softmax_backward_write(yp + r, dyp + r, onep + r, length, tsimd::sum_of(dyp + r, length).hi,
                                              inv_t, {}, stream);
          } else {
            tsimd::softmax_backward_write(yp + r, dyp + r, onep + r, length,
                                          tsimd::sum_of_products(yp + r, dyp + r, length), inv_t, {}, stream);
          }
        }
        const auto batches = [&](const T* a, const T* b, T* dx) {
          if (log) tsimd::log_softmax_backward_rows(a, b, dx, rows, length, static_cast<std::size_t>(count), inv_t, stream);
          else tsimd::softmax_backward_rows(a, b, dx, rows, length, static_cast<std::size_t>(count), inv_t, stream);
          hwy::FlushStream();
        };
        batches(yp, dyp, static_cast<T*>(batch.data()));
        ASSERT_EQ(batch.bytes(), one.bytes()) << "stream " << stream;
        batches(yp, static_cast<const T*>(over_dy.data()), static_cast<T*>(over_dy.data()));
        batches(static_cast<const T*>(over_y.data()), dyp, static_cast<T*>(over_y.data()));
        for (std::int64_t j = 0; j < count; ++j) {
          const auto r = static_cast<std::size_t>(at[static_cast<std::size_t>(j)]) * size_of(dtype);
          const std::size_t bytes = length * size_of(dtype);
          const auto* want = static_cast<const unsigned char*>(one.data()) + r;
          ASSERT_EQ(0, std::memcmp(static_cast<const unsigned char*>(over_dy.data()) + r, want, bytes)) << "over dy, row " << j;
          ASSERT_EQ(0, std::memcmp(static_cast<const unsigned char*>(over_y.data()) + r, want, bytes)) << "over y, row " << j;
        }
      }
    }
  }
}

TEST_P(Backward, RowBatchesGiveTheBitsOfARowAtATime) {
  const bool log = GetParam();
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      expect_batches_match_rows<float>(log, DType::f32, rng());
      expect_batches_match_rows<half>(log, DType::f16, rng());
      expect_batches_match_rows<bfloat16>(log, DType::bf16, rng());
    });
  }
}

// Along an axis that is not the contiguous one, f32, f16 and bf16 rows lie across
// the vector lanes (training/simd/gradient_columns.hpp): every Highway target, axis
// lengths from 1 to 300, widths around every vector width (blocks of four vectors,
// single vectors, tails; more than one thread's piece of 512), misaligned,
// temperatures below and above 1, a masked element, an input that is not a
// log-probability (1.5), NaN and infinite dy, dy of 3e38 and -3e38 in one column (softmax); in
// place over dy and over y, and on three threads, the same bits.
TEST_P(Backward, ColumnsOnEveryTargetMeetTheBar) {
  const bool log = GetParam();
  constexpr std::int64_t kLengths[] = {1, 2, 5, 17, 300};
  constexpr std::int64_t kWidths[] = {2, 3, 15, 16, 17, 33, 64, 65, 600};
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (std::int64_t n : kLengths) {
          for (std::int64_t w : kWidths) {
            const Layout layout = (n + w) % 2 ? Layout::misaligned : Layout::contiguous;
            const long double t = w % 2 ? 1.0L : w % 3 ? 0.7L : 2.5L;
            const std::vector<std::int64_t> shape = {2, n, w};
            TestTensor y = forward_output(log, dtype, shape, 1, t, layout, rng());
            TestTensor dy(dtype, shape, layout);
            fill_normal(dy, rng(), Distribution{0.5, 2});
            const std::int64_t plane = n * w;
            if (n >= 5) {
              y.set_at(plane + 2 * w + 1, log ? -kInf : 0.0L);  // a masked element
              if (log) y.set_at(plane + 3 * w + w - 1, 1.5L);   // not a log-probability
              dy.set_at(w / 2, kNaN);                          // column w / 2 of the first plane
              dy.set_at(plane + w - 1, kInf);                  // the last column of the second
              if (!log && dtype != DType::f16 && w >= 3) {
                // dy - s beyond float's range in column 1 (y * (dy - s) / T may fit).
                // (log-softmax's S = sum(dy) would lose the other terms to its plain
                // double additions, beyond the bound gradient_columns.cpp states.)
                dy.set_at(w + 1, 3e38L);
                dy.set_at(3 * w + 1, -3e38L);
              }
            }
            TestTensor dx(dtype, shape, layout);
            BackwardOptions o;
            o.axis = 1;
            o.temperature = static_cast<double>(t);
            o.threads = 1;
            SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n) + " width " + std::to_string(w) +
                         " " + to_string(layout));
            run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
            const Reference ref = backward_reference(log, y, dy, 1, t);
            EXPECT_TRUE(meets_training_bar("columns", dx, ref.values, ref.cancelled, compute_eps(dtype)));
            EXPECT_TRUE(dx.untouched_outside_view());
            TestTensor over_dy = dy;
            run_backward(log, y.view(), over_dy.view(), over_dy.mutable_view(), o);
            ASSERT_EQ(over_dy.bytes(), dx.bytes());
            TestTensor over_y = y;
            run_backward(log, over_y.view(), dy.view(), over_y.mutable_view(), o);
            ASSERT_EQ(over_y.bytes(), dx.bytes());
            o.threads = 3;
            TestTensor threaded(dtype, shape, layout);
            run_backward(log, y.view(), dy.view(), threaded.mutable_view(), o);
            ASSERT_EQ(threaded.bytes(), dx.bytes());
          }
        }
      }
    });
  }
}

// A row across the lanes gives the same bits in every column: each lane computes its
// own row, whether its column falls in a block of four vectors, a single vector or the
// tail, and in whichever thread's piece. Every column of [n, width] holds the same row
// (one with a NaN in dy, one with both infinities).
TEST_P(Backward, ColumnsGiveTheSameBitsInEveryLane) {
  const bool log = GetParam();
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (std::int64_t n : {7, 100}) {
      for (int special = 0; special < 3; ++special) {
        const std::int64_t w = 611;
        TestTensor row = forward_output(log, dtype, {n}, 0, 1, Layout::contiguous, rng());
        TestTensor dy_row(dtype, {n});
        fill_normal(dy_row, rng(), Distribution{0.5, 2});
        if (special == 1) dy_row.set_at(n / 2, kNaN);
        if (special == 2) {
          dy_row.set_at(1, kInf);
          dy_row.set_at(n - 1, -kInf);
        }
        TestTensor y(dtype, {n, w}), dy(dtype, {n, w});
        for (std::int64_t c = 0; c < n; ++c) {
          for (std::int64_t j = 0; j < w; ++j) {
            y.set_at(c * w + j, row.at(c));
            dy.set_at(c * w + j, dy_row.at(c));
          }
        }
        SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n) + " case " + std::to_string(special));
        for (std::int64_t target : simd_targets()) {
          SCOPED_TRACE(hwy::TargetName(target));
          with_target(target, [&] {
            TestTensor dx(dtype, {n, w});
            BackwardOptions o;
            o.axis = 0;
            o.threads = 2;
            run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
            const std::size_t element = size_of(dtype);
            const auto* bytes = static_cast<const unsigned char*>(dx.data());
            for (std::int64_t c = 0; c < n; ++c) {
              const unsigned char* first = bytes + static_cast<std::size_t>(c * w) * element;
              for (std::int64_t j = 1; j < w; ++j) {
                ASSERT_EQ(std::memcmp(first, first + static_cast<std::size_t>(j) * element, element), 0)
                    << "class " << c << ", column " << j;
              }
            }
          });
        }
      }
    }
  }
}

// log_softmax_backward on inputs that are not log-probabilities (positive, NaN)
// gives what the formula gives (the vectorised kernel's exp covers log_y <= 0 only
// and must hand the others to std::exp), next to valid and -inf elements in the same
// vectors.
TEST(BackwardLog, InputsThatAreNotLogProbabilitiesFollowTheFormula) {
  const std::int64_t n = 37;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        std::vector<long double> log_y(static_cast<std::size_t>(2 * n)), dy(log_y.size());
        for (std::size_t i = 0; i < log_y.size(); ++i) {
          log_y[i] = -static_cast<long double>(i % 11) * 0.75L;
          dy[i] = 0.25L * static_cast<long double>(i % 5) - 0.5L;
        }
        log_y[3] = 0.5L;
        log_y[17] = 5;
        log_y[30] = -kInf;
        log_y[n + 5] = kNaN;
        TestTensor ly = make_tensor(dtype, {2, n}, log_y);
        TestTensor g = make_tensor(dtype, {2, n}, dy);
        TestTensor dx(dtype, {2, n});
        log_softmax_backward(ly.view(), g.view(), dx.mutable_view(), {});
        const Reference ref = backward_reference(true, ly, g, 1, 1);
        EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)), dx, ref.values, ref.cancelled,
                                       compute_eps(dtype)));
        EXPECT_TRUE(std::isnan(dx.at(n + 5)));
        EXPECT_FALSE(std::isnan(dx.at(n + 4)));
        expect_same_bits_in_place(true, ly, g, dx, {});
      }
    });
  }
}

// log_y below the float exp's range (its p flushes to 0) where S is large enough that
// p S still matters: dx = dy - e^-90 S with S near 1e35 is 1e-4 - 8.2e-5, not dy. The
// float lanes must hand those elements to the double ones, whatever vector they fall
// in; elements whose p S is negligible stay in float lanes beside them.
TEST(BackwardLog, FlushedProbabilitiesThatStillMatterAreExact) {
  const std::int64_t n = 45;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::bf16}) {  // f16 cannot hold such a sum
        std::vector<long double> log_y(static_cast<std::size_t>(n)), dy(log_y.size());
        for (std::size_t i = 0; i < log_y.size(); ++i) {
          log_y[i] = i % 4 == 0 ? -120.0L : -90.0L;  // e^-120 S is 1e-17: negligible beside dy
          dy[i] = 1e-4L * static_cast<long double>(1 + i % 3);
        }
        log_y[0] = 0;
        dy[0] = 1e35L;
        TestTensor ly = make_tensor(dtype, {1, n}, log_y);
        TestTensor g = make_tensor(dtype, {1, n}, dy);
        TestTensor dx(dtype, {1, n});
        log_softmax_backward(ly.view(), g.view(), dx.mutable_view(), {});
        const Reference ref = backward_reference(true, ly, g, 1, 1);
        EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)), dx, ref.values, ref.cancelled,
                                       compute_eps(dtype)));
      }
    });
  }
}

// dy rounded from p S itself (every other element), so that dx = dy - p S is at
// most half a unit of dy's type, or from p S (1 + e) with |e| from 2^-30 to 1: |p S| /
// |dx| runs from 1 to far past each type's cancellation bound in the float lanes. The
// elements below the bound stay in float lanes, whose error grows with that ratio:
// the bar fails for a bound 16 times bf16's or 32 times f32's (checked). Each row's S is a random value in [0.5, 2), so that p S
// falls anywhere between the type's values: the first kLadder elements (their p is
// e^-30, negligible) hold what the others leave of it, each rounding what the ones
// before it left, so that sum(dy) is S to far within the type's precision.
class BackwardLogNearCancellation : public SeededTest {};

TEST_F(BackwardLogNearCancellation, StaysWithinTheBarOnEveryTarget) {
  const std::int64_t rows = 64, n = 509, kLadder = 4;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    std::uniform_real_distribution<double> log_p(-10, -5);  // p sums to about 0.2; p S is f16-normal
    std::uniform_real_distribution<double> sum_of_row(0.5, 2);
    std::vector<long double> log_y(static_cast<std::size_t>(rows * n)), p_s(log_y.size(), 0);
    for (std::int64_t i = 0; i < rows * n; ++i) log_y[static_cast<std::size_t>(i)] = i % n < kLadder ? -30 : log_p(rng());
    TestTensor ly = make_tensor(dtype, {rows, n}, log_y);
    std::vector<long double> sums(static_cast<std::size_t>(rows));
    for (long double& s : sums) s = sum_of_row(rng());
    std::uniform_real_distribution<double> log2_offset(-30, 0);
    for (std::int64_t i = 0; i < rows * n; ++i) {
      // dy = p S rounded, or p S (1 + e) rounded, |e| from 2^-30 to 1.
      const long double e = i % 2 == 0 ? 0 : (i % 4 == 1 ? 1 : -1) * std::exp2(log2_offset(rng()));
      if (i % n >= kLadder) p_s[static_cast<std::size_t>(i)] = std::exp(ly.at(i)) * sums[static_cast<std::size_t>(i / n)] * (1 + e);
    }
    TestTensor g = make_tensor(dtype, {rows, n}, p_s);
    for (std::int64_t row = 0; row < rows; ++row) {
      long double rest = sums[static_cast<std::size_t>(row)];
      for (std::int64_t j = kLadder; j < n; ++j) rest -= g.at(row * n + j);
      for (std::int64_t j = 0; j < kLadder; ++j) {
        g.set_at(row * n + j, rest);
        rest -= g.at(row * n + j);
      }
    }
    // The same rows down axis 0 of [n, rows]: across the vector lanes (gradient_columns.cpp).
    std::vector<long double> ly_down(log_y.size()), g_down(log_y.size());
    for (std::int64_t row = 0; row < rows; ++row) {
      for (std::int64_t j = 0; j < n; ++j) {
        ly_down[static_cast<std::size_t>(j * rows + row)] = ly.at(row * n + j);
        g_down[static_cast<std::size_t>(j * rows + row)] = g.at(row * n + j);
      }
    }
    const TestTensor ly_t = make_tensor(dtype, {n, rows}, ly_down);
    const TestTensor g_t = make_tensor(dtype, {n, rows}, g_down);
    for (long double t : {1.0L, 0.5L}) {
      const Reference ref = backward_reference(true, ly, g, 1, t);
      const Reference ref_down = backward_reference(true, ly_t, g_t, 0, t);
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        with_target(target, [&] {
          TestTensor dx(dtype, {rows, n});
          BackwardOptions o;
          o.temperature = static_cast<double>(t);
          log_softmax_backward(ly.view(), g.view(), dx.mutable_view(), o);
          EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)), dx, ref.values, ref.cancelled,
                                         compute_eps(dtype)));
          TestTensor dx_down(dtype, {n, rows});
          o.axis = 0;
          log_softmax_backward(ly_t.view(), g_t.view(), dx_down.mutable_view(), o);
          EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)) + " down axis 0", dx_down, ref_down.values,
                                         ref_down.cancelled, compute_eps(dtype)));
        });
      }
    }
  }
}

// dy - s (or dy - p S) beyond float's range while dx, after the division by T = 4,
// fits: the float lanes must hand such elements to the double ones, in vectors
// whose other elements stay in float lanes.
TEST_P(Backward, DifferencesThatOverflowFloatBeforeTheTemperature) {
  const bool log = GetParam();
  const std::int64_t n = 40;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::bf16}) {
        // y: 1/2 at elements 0 and 1, 0 elsewhere; dy: 3e38, -3e38, small values. s
        // (softmax: sum of y dy) is 0; S (log: sum of dy) is about -3e38 + small.
        std::vector<long double> y(static_cast<std::size_t>(n), log ? -kInf : 0.0L), dy(y.size());
        y[0] = y[1] = log ? std::log(0.5L) : 0.5L;
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.125L * static_cast<long double>(i % 7);
        dy[0] = 3e38L;
        dy[1] = -3e38L;
        if (log) dy[2] = -3e38L;  // S near -3e38: dx[0] = 3e38 + 1.5e38 before the division
        if (!log) y[0] = 1.0L;    // s = 3e38: dx[1] = 0.5 (-6e38) before the division
        if (!log) y[1] = 0.5L;
        TestTensor ty = make_tensor(dtype, {1, n}, y);
        TestTensor tdy = make_tensor(dtype, {1, n}, dy);
        TestTensor dx(dtype, {1, n});
        BackwardOptions o;
        o.temperature = 4;
        run_backward(log, ty.view(), tdy.view(), dx.mutable_view(), o);
        const Reference ref = backward_reference(log, ty, tdy, 1, 4);
        EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)), dx, ref.values, ref.cancelled,
                                       compute_eps(dtype)));
        EXPECT_TRUE(std::isfinite(dx.at(log ? 0 : 1)));
        expect_same_bits_in_place(log, ty, tdy, dx, o);
        // The same row down axis 0 of [n, 3], three times across the lanes
        // (gradient_columns.cpp's float lanes hand the same elements over).
        std::vector<long double> y3, dy3;
        for (std::size_t i = 0; i < y.size(); ++i) {
          y3.insert(y3.end(), 3, y[i]);
          dy3.insert(dy3.end(), 3, dy[i]);
        }
        TestTensor ty3 = make_tensor(dtype, {n, 3}, y3);
        TestTensor tdy3 = make_tensor(dtype, {n, 3}, dy3);
        TestTensor dx3(dtype, {n, 3});
        BackwardOptions down = o;
        down.axis = 0;
        run_backward(log, ty3.view(), tdy3.view(), dx3.mutable_view(), down);
        const Reference ref3 = backward_reference(log, ty3, tdy3, 0, 4);
        EXPECT_TRUE(meets_training_bar(std::string(to_string(dtype)) + " down axis 0", dx3, ref3.values,
                                       ref3.cancelled, compute_eps(dtype)));
        EXPECT_TRUE(std::isfinite(dx3.at(log ? 0 : 3)));
      }
    });
  }
}

TEST_P(Backward, ResultsDoNotDependOnTheThreadCount) {
  const bool log = GetParam();
  const std::vector<std::int64_t> shape = {64, 1000};
  TestTensor y = forward_output(log, DType::f32, shape, 1, 1, Layout::contiguous, rng());
  TestTensor dy(DType::f32, shape);
  fill_normal(dy, rng(), Distribution{0, 1});
  TestTensor one(DType::f32, shape), many(DType::f32, shape);
  BackwardOptions o;
  o.threads = 1;
  run_backward(log, y.view(), dy.view(), one.mutable_view(), o);
  o.threads = 3;
  run_backward(log, y.view(), dy.view(), many.mutable_view(), o);
  EXPECT_EQ(one.bytes(), many.bytes());
}

// The same rows at another address give the same bits, NaNs included: the kernels
// align their loops to the addresses, so an element meets a different lane and loop
// copy at each offset, and a NaN that meets another NaN in a product takes the one
// the compiler put first. Each row holds one kind of non-finite input: a NaN in dy,
// both infinities in dy (the sum's own NaN, negative on x86), a NaN in y, +inf in dy.
TEST_P(Backward, RowsGiveTheSameBitsWhereverTheyLie) {
  const bool log = GetParam();
  constexpr std::int64_t kRows = 5;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const std::size_t element = size_of(dtype);
    const std::int64_t offsets = static_cast<std::int64_t>(64 / element);
    for (std::int64_t n : {13, 100, 1000, 4097}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " n " + std::to_string(n));
      const std::vector<std::int64_t> shape = {kRows, n};
      TestTensor y = forward_output(log, dtype, shape, 1, 1, Layout::contiguous, rng());
      TestTensor dy(dtype, shape);
      fill_normal(dy, rng(), Distribution{0.5, 2});
      dy.set_at(0 * n + n / 3, kNaN);
      dy.set_at(1 * n + n / 4, kInf);
      dy.set_at(1 * n + n - 1, -kInf);
      y.set_at(2 * n + n / 2, kNaN);
      dy.set_at(3 * n + 2 * n / 3, kInf);
      const std::size_t bytes = static_cast<std::size_t>(kRows * n) * element;
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        with_target(target, [&] {
          std::vector<unsigned char> first;
          for (std::int64_t offset = 0; offset < offsets; ++offset) {
            const std::vector<std::int64_t> padded = {kRows * n + offsets};
            TestTensor y_at(dtype, padded), dy_at(dtype, padded), dx_at(dtype, padded);
            const std::size_t skip = static_cast<std::size_t>(offset) * element;
            std::memcpy(static_cast<unsigned char*>(y_at.data()) + skip, y.data(), bytes);
            std::memcpy(static_cast<unsigned char*>(dy_at.data()) + skip, dy.data(), bytes);
            auto* dx_bytes = static_cast<unsigned char*>(dx_at.data()) + skip;
            run_backward(log, TensorView(static_cast<const unsigned char*>(y_at.data()) + skip, dtype, shape),
                         TensorView(static_cast<const unsigned char*>(dy_at.data()) + skip, dtype, shape),
                         MutableTensorView(dx_bytes, dtype, shape), {});
            const std::vector<unsigned char> got(dx_bytes, dx_bytes + bytes);
            if (offset == 0) {
              first = got;
            } else {
              ASSERT_EQ(got, first) << "offset " << offset << " elements";
            }
          }
        });
      }
    }
  }
}
// A 256K-element row stays exact: the sums are compensated.
TEST_P(Backward, LongRowStaysExact) {
  const bool log = GetParam();
  const std::int64_t n = 262144;
  for (DType dtype : {DType::f32, DType::bf16}) {
    TestTensor y = forward_output(log, dtype, {n}, 0, 1, Layout::contiguous, rng());
    TestTensor dy(dtype, {n});
    fill_normal(dy, rng(), Distribution{1, 1});
    TestTensor dx(dtype, {n});
    run_backward(log, y.view(), dy.view(), dx.mutable_view(), {});
    const Reference ref = backward_reference(log, y, dy, 0, 1);
    EXPECT_TRUE(meets_training_bar("long row", dx, ref.values, ref.cancelled, compute_eps(dtype)));
  }
}

// Vocabulary rows, several to a thread: each row's write pass fetches the next row's
// inputs (all of them, or the head that fits beside its own three rows in L2: f32
// rows of 128256 on a 2 MiB L2). The fetches change no result.
TEST_P(Backward, VocabularyRowsAfterTheirFetchesMeetTheBar) {
  const bool log = GetParam();
  const std::vector<std::int64_t> shape = {6, 128256};
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    TestTensor y = forward_output(log, dtype, shape, 1, 1, Layout::contiguous, rng());
    TestTensor dy(dtype, shape);
    fill_normal(dy, rng(), Distribution{0, 1});
    TestTensor dx(dtype, shape), one(dtype, shape);
    BackwardOptions o;
    o.threads = 2;
    run_backward(log, y.view(), dy.view(), dx.mutable_view(), o);
    const Reference ref = backward_reference(log, y, dy, 1, 1);
    EXPECT_TRUE(meets_training_bar("vocabulary rows", dx, ref.values, ref.cancelled, compute_eps(dtype)));
    o.threads = 1;
    run_backward(log, y.view(), dy.view(), one.mutable_view(), o);
    EXPECT_EQ(one.bytes(), dx.bytes());
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, Backward, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return std::string(param.param ? "LogSoftmax" : "Softmax");
                         });

// Every bad argument: smax::Error with the right code and a message naming it, and
// nothing written.
class BackwardErrors : public SeededTest {
 protected:
  void expect_error(const std::function<void()>& call, Errc code, const std::string& fragment,
                    const TestTensor& untouched) {
    const std::vector<unsigned char> before = untouched.bytes();
    try {
      call();
      ADD_FAILURE() << "no smax::Error thrown (expected: " << fragment << ")";
    } catch (const Error& e) {
      EXPECT_EQ(to_string(e.code()), to_string(code)) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what() << " lacks " << fragment;
      EXPECT_NE(std::string(e.what()).find("softmax_backward: "), std::string::npos) << e.what();
    }
    EXPECT_EQ(untouched.bytes(), before) << "the output changed";
  }
};

TEST_F(BackwardErrors, EveryBadArgumentIsNamed) {
  TestTensor y(DType::f32, {3, 4}), dy(DType::f32, {3, 4}), dx(DType::f32, {3, 4});
  fill_normal(y, rng(), {});
  fill_normal(dy, rng(), {});
  TestTensor dx_f64(DType::f64, {3, 4}), dx_shape(DType::f32, {4, 3}), dy_shape(DType::f32, {3, 5});
  for (bool log : {false, true}) {
    auto call = [&](const TensorView& a, const TensorView& b, const MutableTensorView& c, BackwardOptions o = {}) {
      return [=] { run_backward(log, a, b, c, o); };
    };
    expect_error(call(y.view(), dy.view(), dx_f64.mutable_view()), Errc::dtype, "dx dtype f64", dx_f64);
    expect_error(call(y.view(), dy.view(), dx_shape.mutable_view()), Errc::shape, "dx shape [4, 3]", dx_shape);
    expect_error(call(y.view(), dy_shape.view(), dx.mutable_view()), Errc::shape, "dy shape [3, 5]", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.axis = 2}), Errc::axis, "axis 2", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.axis = -3}), Errc::axis, "axis -3", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.temperature = 0}), Errc::option, "temperature", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.temperature = std::nan("")}), Errc::option,
                 "temperature", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.temperature = 1e46}), Errc::option,
                 "temperature 1e+46 is too large", dx);
    expect_error(call(y.view(), dy.view(), dx.mutable_view(), {.threads = -1}), Errc::option, "threads", dx);
    expect_error(call(TensorView(nullptr, DType::f32, {3, 4}), dy.view(), dx.mutable_view()), Errc::null_data,
                 "data is null", dx);
    expect_error(call(y.view(), dy.view(), MutableTensorView(nullptr, DType::f32, {3, 4})), Errc::null_data,
                 "dx data is null", dx);
    expect_error(call(y.view(), dy.view(), MutableTensorView(dx.data(), DType::f32, {3, 4}, {0, 1})), Errc::strides,
                 "overlap each other", dx);
    // dx shifted by one element over dy: a partial overlap.
    TestTensor shared(DType::f32, {4, 4});
    fill_normal(shared, rng(), {});
    const TensorView dy_view(shared.data(), DType::f32, {3, 4});
    const MutableTensorView dx_view(static_cast<float*>(shared.data()) + 1, DType::f32, {3, 4});
    expect_error(call(y.view(), dy_view, dx_view), Errc::overlap, "overlaps dy", shared);
    // dx over y with different strides.
    const MutableTensorView y_transposed(y.data(), DType::f32, {3, 4}, {1, 3});
    expect_error(call(y.view(), dy.view(), y_transposed), Errc::overlap, "overlaps", y);
    expect_error(call(TensorView(y.data(), static_cast<DType>(9), {3, 4}), dy.view(), dx.mutable_view()),
                 Errc::dtype, "unsupported", dx);
  }
}

}  // namespace
}  // namespace smax::test
