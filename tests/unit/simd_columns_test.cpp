// The column-panel kernels (cpu/simd/f32_columns.hpp): softmax along a non-last axis,
// vectorised across the contiguous inner dimension, on every Highway target this
// machine supports. Through the public API (axes of several ranks, views, all dtypes,
// temperatures, non-finite columns) and on hand-made panels (every width around the
// vector sizes, misaligned, strided, with guards around the output), always against
// the long double reference.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "accuracy.hpp"
#include "cpu/simd/f32_columns.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "reference/reference.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

constexpr std::int64_t kWidths[] = {1, 3, 15, 16, 17, 33, 1000};
constexpr std::int64_t kLengths[] = {1, 2, 81, 1000, 4097};
constexpr double kTemperatures[] = {1.0, 0.01, 100.0, 0.7};
// Every variant but naive runs the panel kernel on a non-last axis: online its
// two-pass form (f32_columns.hpp), the others its three passes.
constexpr Algorithm kPanelAlgorithms[] = {Algorithm::automatic, Algorithm::safe, Algorithm::tiled, Algorithm::online};
// auto takes three passes on the small panels of these tests; online the two passes.
constexpr Algorithm kBothForms[] = {Algorithm::automatic, Algorithm::online};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A panel element of T (float, half or bfloat16) from v, rounded to nearest even, and
// an element's value.
template <class T>
T element_of(double v) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else {
    return to_half(static_cast<float>(v));
  }
}
template <class T>
long double value_of(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return to_float(v);
  }
}

class SimdColumns : public SeededTest {
 protected:
  // Every op and panel algorithm on x along `axis`, against the reference, on every
  // target.
  // Every variant but naive maps to one of the panel kernel's two forms, so most
  // tests run one algorithm of each.
  void check_everywhere(const TestTensor& x, int axis, double temperature,
                        Layout output_layout = Layout::contiguous, AllMasked all_masked = AllMasked::nan,
                        std::span<const Algorithm> algorithms = kBothForms) {
    Options options;
    options.axis = axis;
    options.temperature = temperature;
    options.all_masked = all_masked;
    for (Op op : kAllOps) {
      const Expected expected = reference_nd(op, x, options);
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        with_target(target, [&] {
          for (Algorithm algorithm : algorithms) {
            options.algorithm = algorithm;
            run_and_check(op, x, options, output_layout, expected);
          }
        });
      }
    }
  }
};

// [length, width] along axis 0: width columns of `length` elements.
TEST_F(SimdColumns, RandomColumnsMeetTheBarAtEveryWidthAndLength) {
  std::uniform_real_distribution<double> offset(-50.0, 50.0);
  std::uniform_int_distribution<std::size_t> pick_temperature(0, std::size(kTemperatures) - 1);
  for (std::int64_t width : kWidths) {
    for (std::int64_t length : kLengths) {
      if (width * length > (std::int64_t{1} << 18)) continue;  // runtime, under sanitizers too
      SCOPED_TRACE("length " + std::to_string(length) + " width " + std::to_string(width));
      TestTensor x(DType::f32, {length, width});
      fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
      check_everywhere(x, 0, kTemperatures[pick_temperature(rng())]);
    }
  }
}

TEST_F(SimdColumns, NonLastAxesOfEveryRankAndView) {
  struct Case {
    std::vector<std::int64_t> shape;
    int axis;
    Layout input;
    Layout output;
  };
  const Case cases[] = {
      {{4, 81, 33}, 1, Layout::contiguous, Layout::contiguous},
      {{3, 5, 7, 17}, 1, Layout::contiguous, Layout::contiguous},
      {{3, 5, 7, 17}, 2, Layout::misaligned, Layout::misaligned},
      {{17, 2, 33}, 0, Layout::contiguous, Layout::misaligned},
      {{6, 40, 2, 5}, -3, Layout::misaligned, Layout::contiguous},
      // Column-major: softmax along the last axis of a transposed matrix is a column.
      {{33, 129}, 1, Layout::transposed, Layout::transposed},
      {{5, 9, 130}, 2, Layout::transposed, Layout::transposed},
      // Strided or reversed outputs fall back to rows; they must still be right.
      {{5, 70, 19}, 1, Layout::contiguous, Layout::strided},
      {{5, 70, 19}, 1, Layout::strided, Layout::reversed},
  };
  for (const Case& c : cases) {
    TestTensor x(DType::f32, c.shape, c.input);
    SCOPED_TRACE(x.describe() + " axis " + std::to_string(c.axis) + " output " + to_string(c.output));
    fill_normal(x, rng(), Distribution{-3.0, 4.0});
    check_everywhere(x, c.axis, 1.0, c.output, AllMasked::nan, kPanelAlgorithms);
    check_everywhere(x, c.axis, 0.3, c.output);
  }
}

TEST_F(SimdColumns, SixteenBitColumnsMeetTheirOneUlpBar) {
  std::uniform_real_distribution<double> offset(-20.0, 20.0);
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::int64_t length : {1, 2, 81, 1000}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " length " + std::to_string(length));
      TestTensor x(dtype, {3, length, 33});
      fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
      check_everywhere(x, 1, 1.0);
      check_everywhere(x, 1, 0.05);
    }
  }
}

// f64 columns: double lanes, the f64 exp, a compensated sum; held to 1e-13.
TEST_F(SimdColumns, F64ColumnsMeetTheirBar) {
  std::uniform_real_distribution<double> offset(-50.0, 50.0);
  for (std::int64_t length : kLengths) {
    SCOPED_TRACE("length " + std::to_string(length));
    TestTensor x(DType::f64, {2, length, 19});
    fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
    check_everywhere(x, 1, 1.0);
    check_everywhere(x, 1, 0.01);
  }
}

// The bar holds outputs below 1e-30 to an absolute 1e-36 only; the kernels claim more:
// every normal f64 output within 1e-13 relative, however deep its argument (here z in
// [-708, -600] at T = 0.1, where the roundings of x - m and of the product by 1/T
// would cost about 1e-13 if the argument did not carry them).
TEST_F(SimdColumns, F64DeepArgumentsKeepTheirDigits) {
  constexpr double kMax = 30.3;
  std::uniform_real_distribution<double> deep(-40.5, -30.0);
  constexpr std::int64_t kLength = 300;
  constexpr std::int64_t kColumns = 37;
  TestTensor x(DType::f64, {kLength, kColumns});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_at(i, deep(rng()));
  for (std::int64_t j = 0; j < kColumns; ++j) x.set_at((j * 7 % kLength) * kColumns + j, kMax);
  Options options;
  options.axis = 0;
  options.temperature = 0.1;
  const Expected expected = reference_nd(Op::softmax, x, options);
  const long double smallest_normal = std::numeric_limits<double>::min();
  for (std::int64_t target : simd_targets()) {
    with_target(target, [&] {
      TestTensor y = make_output(Op::softmax, x, options, Layout::contiguous);
      run_op(Op::softmax, x.view(), y.mutable_view(), options);
      long double worst = 0;
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        const long double reference = expected.values[static_cast<std::size_t>(i)];
        if (reference >= smallest_normal) worst = std::max(worst, std::abs(y.at(i) - reference) / reference);
      }
      EXPECT_LE(worst, 1e-13L) << hwy::TargetName(target);
    });
  }
}

// One column per case, side by side: their results must not leak into each other.
TEST_F(SimdColumns, NonFiniteColumnsKeepTheirSemantics) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (std::int64_t length : {1, 7, 81, 1000}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " length " + std::to_string(length));
      constexpr std::int64_t kColumns = 19;  // a partial vector after 16 on AVX-512
      TestTensor x(dtype, {length, kColumns});
      fill_normal(x, rng(), Distribution{3.0, 2.0});
      auto set = [&](std::int64_t row, std::int64_t column, double value) { x.set_at(row * kColumns + column, value); };
      set(length / 2, 0, kNaN);       // a NaN
      set(length / 3, 1, kInf);       // a +inf
      for (std::int64_t i = 0; i < length; i += 2) set(i, 2, -kInf);  // some -inf
      for (std::int64_t i = 0; i < length; ++i) set(i, 3, -kInf);      // all -inf
      set(length - 1, 4, kNaN);       // a NaN in the last row
      set(0, 5, -kInf);               // +inf and -inf
      set(length - 1, 5, kInf);
      set(0, 6, kInf);                // +inf and NaN
      set(length - 1, 6, kNaN);
      for (std::int64_t i = 0; i < length; ++i) set(i, 17, -kInf);  // all -inf in the tail
      set(length / 2, 18, kNaN);      // NaN in the tail
      for (AllMasked policy : {AllMasked::nan, AllMasked::zero}) {
        check_everywhere(x, 0, 1.0, Layout::contiguous, policy);
        check_everywhere(x, 0, 0.01, Layout::contiguous, policy);
      }
    }
  }
}

// A max far above the rest of its column: d - 1 is tiny, and log_softmax's
// -log(1 + tiny) at the max is held to one ulp of the tiny value in bf16; a softmax
// far below the max lands in bf16's (float's) subnormals.
TEST_F(SimdColumns, DominantMaxAndTinyOutputsStayExact) {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (std::int64_t length : {2, 9, 81}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " length " + std::to_string(length));
      constexpr std::int64_t kColumns = 21;
      TestTensor x(dtype, {length, kColumns});
      for (std::int64_t i = 0; i < length; ++i) {
        for (std::int64_t j = 0; j < kColumns; ++j) {
          // Column j: the max at row j % length, the rest 20 + 4 j below it (exp down
          // to e^-100, past float's normal range).
          const bool at_max = i == j % length;
          x.set_at(i * kColumns + j, at_max ? 1.5 : 1.5 - 20.0 - 4.0 * static_cast<double>(j) - 0.25 * static_cast<double>(i));
        }
      }
      check_everywhere(x, 0, 1.0);
    }
  }
}

// The online form's running max: columns whose max rises in every block (each rise
// rescales the sums so far), falls, jumps from -inf, or sits beyond the folded exp's
// range (|m| > 16384), with NaN and +inf arriving late; both forms must agree with
// the reference.
TEST_F(SimdColumns, OnlineRunningMaxRisesFallsAndJumps) {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (std::int64_t length : {1, 9, 100, 4097}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " length " + std::to_string(length));
      constexpr std::int64_t kColumns = 23;
      TestTensor x(dtype, {length, kColumns});
      std::normal_distribution<double> noise(0.0, 1.0);
      const bool sixteen_bit = dtype != DType::f32;
      for (std::int64_t i = 0; i < length; ++i) {
        const double t = static_cast<double>(i) / static_cast<double>(length);
        auto set = [&](std::int64_t column, double value) { x.set_at(i * kColumns + column, value); };
        for (std::int64_t j = 0; j < kColumns; ++j) set(j, noise(rng()));
        set(0, 40.0 * t);                                     // rises in every block
        set(1, -40.0 * t);                                    // falls
        set(2, i < length / 2 ? -kInf : noise(rng()));        // -inf, then finite
        set(3, sixteen_bit ? 60000.0 * t : 20000.0 + 30.0 * t);  // beyond the folded exp's range
        set(4, 3.0 * std::sin(static_cast<double>(i)));       // small rises, often
        if (i == length - 1) set(5, kNaN);                     // a NaN in the last block
        if (i == length - 1) set(6, kInf);                     // +inf in the last block
        if (i == length / 2) set(7, 80.0);                     // one late, dominant max
        set(8, 100.0 - 0.01 * static_cast<double>(i % 7));    // near-ties at the max
      }
      check_everywhere(x, 0, 1.0);
      check_everywhere(x, 0, 0.37);
    }
  }
}

// Column maxima across the AVX-512 table exp's domain (|m| <= 600; one k = round(32 m
// log2(e)) per lane): every residue of k mod 32 near 0, maxima at and beyond the
// domain's edge (a vector holding one beyond it takes the polynomial), random ones;
// each column spans 90 below its max.
TEST_F(SimdColumns, MaximaAcrossTheTableDomainMeetTheBar) {
  std::vector<double> maxima = {600.0, -600.0, 599.99, -599.99, 0.0, 600.5, -600.5, 16384.0, -16384.0};
  for (int k = -40; k < 40; ++k) maxima.push_back(k * 0.6931471805599453 / 32);
  std::uniform_real_distribution<double> wide(-600.0, 600.0);
  while (maxima.size() % 16 != 5) maxima.push_back(wide(rng()));  // a partial vector last
  std::uniform_real_distribution<double> gap(0.0, 90.0);
  for (DType dtype : {DType::f32, DType::f16}) {
    for (std::int64_t length : {3, 81, 1000}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " length " + std::to_string(length));
      const auto columns = static_cast<std::int64_t>(maxima.size());
      TestTensor x(dtype, {length, columns});
      for (std::int64_t j = 0; j < columns; ++j) {
        const double m = maxima[static_cast<std::size_t>(j)];
        if (dtype == DType::f16 && std::abs(m) > 1000.0) continue;  // f16 holds them coarsely; the rest suffice
        for (std::int64_t i = 0; i < length; ++i) x.set_at(i * columns + j, i == j % length ? m : m - gap(rng()));
      }
      check_everywhere(x, 0, 1.0);
    }
  }
}

TEST_F(SimdColumns, InPlaceWorks) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (Op op : {Op::softmax, Op::log_softmax}) {
        for (Algorithm algorithm : kBothForms) {
          Options options;
          options.axis = 1;
          options.algorithm = algorithm;
          TestTensor x(DType::f32, {3, 101, 37});
          fill_normal(x, rng(), Distribution{1.0, 3.0});
          const Expected expected = reference_nd(op, x, options);
          run_op(op, x.view(), x.mutable_view(), options);
          EXPECT_TRUE(matches_reference(op, x, expected)) << to_string(op) << " " << to_string(algorithm);
        }
      }
    });
  }
}

// The panel kernel itself at every width, with a row stride wider than the panel and
// misaligned pointers; the output's gaps between rows must stay untouched.
TEST_F(SimdColumns, PanelsOfEveryWidthLeaveTheirSurroundingsAlone) {
  const float poison = std::numeric_limits<float>::quiet_NaN();
  std::uniform_real_distribution<double> offset(-30.0, 30.0);
  for (std::int64_t width : kWidths) {
    for (std::int64_t length : {1, 2, 81, 1000}) {
      if (width * length > (std::int64_t{1} << 17)) continue;
      const auto w = static_cast<std::size_t>(width);
      const auto n = static_cast<std::size_t>(length);
      const std::size_t x_stride = w + 5;
      const std::size_t y_stride = w + 3;
      std::vector<float> x(1 + n * x_stride);
      std::normal_distribution<double> normal(offset(rng()), 5.0);
      for (float& v : x) v = static_cast<float>(normal(rng()));
      for (double temperature : {1.0, 0.3}) {
        for (Op op : kAllOps) {
          SCOPED_TRACE(std::string(to_string(op)) + " width " + std::to_string(width) + " length " +
                       std::to_string(length) + " T " + std::to_string(temperature));
          // Reference, one column at a time.
          std::vector<long double> expected(n * w);
          std::vector<long double> column(n), out(n);
          for (std::size_t j = 0; j < w; ++j) {
            for (std::size_t i = 0; i < n; ++i) column[i] = x[1 + i * x_stride + j];
            reference::row(op, column, out, temperature);
            for (std::size_t i = 0; i < (op == Op::logsumexp ? 1 : n); ++i) expected[i * w + j] = out[i];
          }
          struct Form {
            bool online;
            Stores stores;
          };
          std::vector<std::pair<Form, std::int64_t>> runs;  // every form on every target
          for (const Form form : {Form{false, Stores::cached}, Form{false, Stores::streaming}, Form{true, Stores::cached},
                                  Form{true, Stores::streaming}}) {
            for (std::int64_t target : simd_targets()) runs.emplace_back(form, target);
          }
          std::map<std::int64_t, std::vector<float>> three_pass_cached;  // by target
          for (const auto& [form, target] : runs) {
            SCOPED_TRACE(hwy::TargetName(target) + std::string(form.online ? " online " : " three passes ") +
                         std::string(to_string(form.stores)));
            std::vector<float> y(2 + n * y_stride, poison);
            cpu::simd::ColumnPanel<float> panel{x.data() + 1, static_cast<std::ptrdiff_t>(x_stride), y.data() + 1,
                                                static_cast<std::ptrdiff_t>(y_stride), w, n};
            // A next panel to fetch (Plan::fetch_next_panel): the columns after this one's.
            panel.next_x = x.data() + 1 + w / 2;
            panel.next_width = w - w / 2 + 5;
            cpu::simd::ColumnParams params;
            params.op = op;
            params.inv_t = 1.0 / temperature;
            params.online = form.online;
            params.stores = form.stores;
            with_target(target, [&] { cpu::simd::columns(panel, params); });
            // Streamed three-pass panels (their softmax terms in a scratch panel) write
            // the bits of cached ones.
            if (!form.online && form.stores == Stores::cached) three_pass_cached[target] = y;
            if (!form.online && form.stores == Stores::streaming) {
              ASSERT_EQ(std::memcmp(y.data(), three_pass_cached.at(target).data(), y.size() * sizeof(float)), 0);
            }
            const std::size_t rows_written = op == Op::logsumexp ? 1 : n;
            int failures = 0;
            for (std::size_t k = 0; k < y.size() && failures < 5; ++k) {
              const std::size_t offset_in_panel = k - 1;
              const bool inside = k >= 1 && offset_in_panel / y_stride < rows_written && offset_in_panel % y_stride < w;
              if (!inside) {
                if (!std::isnan(y[k])) {
                  ADD_FAILURE() << "wrote outside the panel at " << k;
                  ++failures;
                }
                continue;
              }
              const std::size_t i = offset_in_panel / y_stride;
              const std::size_t j = offset_in_panel % y_stride;
              std::string why;
              if (!meets_bar(op, DType::f32, y[k], expected[i * w + j], &why)) {
                ADD_FAILURE() << "row " << i << " column " << j << ": " << why;
                ++failures;
              }
            }
          }
        }
      }
    }
  }
}

// f32 and f64 softmax panels keep their exp terms in y, but in the scratch panel where
// y's rows crowd the L1 sets of x's (rows 4 KiB apart, y at x's offset in a page;
// state_for in f32_columns.cpp): the same bits either way, within the bar, nothing
// written outside the panel, on every target.
TEST_F(SimdColumns, PanelsWriteTheSameBitsWhereRowsShareL1Sets) {
  const auto run = [&](auto type_tag) {
    using T = decltype(type_tag);
    constexpr DType dtype = std::is_same_v<T, double> ? DType::f64 : DType::f32;
    constexpr std::size_t kPage = 4096 / sizeof(T);
    constexpr std::size_t w = 203, n = 81, stride = kPage;  // rows 4 KiB apart
    const T poison = std::numeric_limits<T>::quiet_NaN();
    // x, then two outputs: one at x's offset in a page, one half a page further.
    std::vector<T> buffer((3 * n + 3) * stride);
    T* const page = buffer.data() + (kPage - reinterpret_cast<std::uintptr_t>(buffer.data()) / sizeof(T) % kPage);
    T* const x = page;
    T* const y_crowding = page + n * stride;
    T* const y_apart = page + 2 * n * stride + kPage / 2;
    std::normal_distribution<double> normal(3.0, 6.0);
    for (std::size_t i = 0; i < n * stride; ++i) x[i] = static_cast<T>(normal(rng()));
    for (double temperature : {1.0, 0.3}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " T " + std::to_string(temperature));
      std::vector<long double> expected(n * w), column(n), out(n);
      for (std::size_t j = 0; j < w; ++j) {
        for (std::size_t i = 0; i < n; ++i) column[i] = x[i * stride + j];
        reference::row(Op::softmax, column, out, temperature);
        for (std::size_t i = 0; i < n; ++i) expected[i * w + j] = out[i];
      }
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        for (T* y : {y_crowding, y_apart}) {
          std::fill_n(y, n * stride, poison);
          cpu::simd::ColumnPanel<T> panel{x, static_cast<std::ptrdiff_t>(stride), y, static_cast<std::ptrdiff_t>(stride),
                                          w, n};
          cpu::simd::ColumnParams params;
          params.inv_t = 1.0 / temperature;
          with_target(target, [&] { cpu::simd::columns(panel, params); });
        }
        ASSERT_EQ(std::memcmp(y_crowding, y_apart, n * stride * sizeof(T)), 0);
        int failures = 0;
        for (std::size_t k = 0; k < n * stride && failures < 5; ++k) {
          const std::size_t i = k / stride, j = k % stride;
          if (j >= w) {
            if (!std::isnan(y_crowding[k])) {
              ADD_FAILURE() << "wrote outside the panel at " << k;
              ++failures;
            }
            continue;
          }
          std::string why;
          if (!meets_bar(Op::softmax, dtype, static_cast<long double>(y_crowding[k]), expected[i * w + j], &why)) {
            ADD_FAILURE() << "row " << i << " column " << j << ": " << why;
            ++failures;
          }
        }
      }
    }
  };
  run(float{});
  run(double{});
}

// 16-bit softmax panels keep their float exp terms in a scratch panel (one exp per
// element), may fetch the next panel's input during their sum pass
// (Plan::fetch_next_panel) and may stream their output (whole cache lines only, rows
// of any alignment): the same bits every way, within the bar, nothing written
// outside the panel, on every target; for maxima that fold and that do not (|m| >
// 16384), at unit and other temperatures.
TEST_F(SimdColumns, SixteenBitPanelsWriteTheSameBitsFetchingOrStreaming) {
  const auto run = [&](auto type_tag) {
    using T = decltype(type_tag);
    constexpr DType dtype = std::is_same_v<T, bfloat16> ? DType::bf16 : DType::f16;
    const auto from = element_of<T>;
    constexpr std::size_t w = 77, n = 81, x_stride = 2 * w + 3, y_stride = w + 3;
    const T poison = from(-12345.0);  // no softmax output, NaN included
    for (const double offset : {0.0, 7.0, dtype == DType::bf16 ? 20000.0 : -3.0}) {
      std::vector<T> x(n * x_stride);
      std::normal_distribution<double> normal(offset, dtype == DType::bf16 ? 12.0 : 3.0);
      for (T& v : x) v = from(normal(rng()));
      for (const double temperature : {1.0, 0.3}) {
        SCOPED_TRACE(std::string(to_string(dtype)) + " offset " + std::to_string(offset) + " T " +
                     std::to_string(temperature));
        std::vector<long double> expected(n * w), column(n), out(n);
        for (std::size_t j = 0; j < w; ++j) {
          for (std::size_t i = 0; i < n; ++i) column[i] = to_float(x[i * x_stride + j]);
          reference::row(Op::softmax, column, out, temperature);
          for (std::size_t i = 0; i < n; ++i) expected[i * w + j] = out[i];
        }
        for (std::int64_t target : simd_targets()) {
          SCOPED_TRACE(hwy::TargetName(target));
          std::vector<T> first;
          for (const bool fetch : {false, true}) {
            for (const Stores stores : {Stores::cached, Stores::streaming}) {
              SCOPED_TRACE(std::string(fetch ? "fetching " : "") + std::string(to_string(stores)));
              std::vector<T> y(2 + n * y_stride, poison);  // rows start 2 bytes past y's alignment
              cpu::simd::ColumnPanel<T> panel{x.data(), static_cast<std::ptrdiff_t>(x_stride), y.data() + 1,
                                              static_cast<std::ptrdiff_t>(y_stride), w, n};
              if (fetch) {
                panel.next_x = x.data() + w;  // the columns after this panel's
                panel.next_width = w + 3;
              }
              cpu::simd::ColumnParams params;
              params.inv_t = 1.0 / temperature;
              params.stores = stores;
              with_target(target, [&] { cpu::simd::columns(panel, params); });
              if (first.empty()) {
                first = y;
              } else {
                ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(T)), 0);
                continue;
              }
              int failures = 0;
              for (std::size_t k = 0; k < y.size() && failures < 5; ++k) {
                const bool inside = k >= 1 && (k - 1) / y_stride < n && (k - 1) % y_stride < w;
                if (!inside) {
                  if (y[k].bits != poison.bits) {
                    ADD_FAILURE() << "wrote outside the panel at " << k;
                    ++failures;
                  }
                  continue;
                }
                const std::size_t i = (k - 1) / y_stride, j = (k - 1) % y_stride;
                std::string why;
                if (!meets_bar(Op::softmax, dtype, to_float(y[k]), expected[i * w + j], &why)) {
                  ADD_FAILURE() << "row " << i << " column " << j << ": " << why;
                  ++failures;
                }
              }
            }
          }
        }
      }
    }
  };
  run(bfloat16{});
  run(half{});
}

// Panels that would share their rows' end lines with the panels beside them take a
// lead (ColumnPanel::lead and trims_end; execute.cpp's panel_lead): a row of y split
// into such panels gets each element from exactly one of them, within the bar, for
// three-pass and online panels, streamed or cached, at rows of every line offset, on
// every target.
TEST_F(SimdColumns, PanelsWithALeadShareTheirRowsByWholeLines) {
  const auto run = [&](auto type_tag) {
    using T = decltype(type_tag);
    constexpr DType dtype = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, bfloat16> ? DType::bf16 : DType::f16;
    const auto from = element_of<T>;
    const auto value = value_of<T>;
    const auto bits = [](T v) {
      std::uint32_t b = 0;
      std::memcpy(&b, &v, sizeof(T));
      return b;
    };
    constexpr std::size_t kLine = 64 / sizeof(T);
    // Rows 305 elements apart (1220 or 610 bytes): their line offsets take every value.
    constexpr std::size_t inner = 301, n = 37, stride = inner + 4;
    constexpr std::size_t width = 2 * kLine + 5;
    const T poison = from(-12345.0);  // no softmax or log_softmax output here
    std::vector<T> x(n * stride);
    std::normal_distribution<double> normal(2.0, 4.0);
    for (T& v : x) v = from(normal(rng()));
    for (Op op : {Op::softmax, Op::log_softmax}) {
      std::vector<long double> expected(n * inner), column(n), out(n);
      for (std::size_t j = 0; j < inner; ++j) {
        for (std::size_t i = 0; i < n; ++i) column[i] = value(x[i * stride + j]);
        reference::row(op, column, out, 0.7);
        for (std::size_t i = 0; i < n; ++i) expected[i * inner + j] = out[i];
      }
      for (const bool online : {false, true}) {
        for (const Stores stores : {Stores::cached, Stores::streaming}) {
          for (std::int64_t target : simd_targets()) {
            SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
                         (online ? " online " : " three passes ") + std::string(to_string(stores)) + " " +
                         hwy::TargetName(target));
            std::vector<T> y(1 + n * stride, poison);  // rows start an element past y's alignment
            std::vector<T> one(y.size());
            int failures = 0;
            for (std::size_t first = 0; first < inner; first += width) {
              const std::size_t lead = first > 0 ? kLine : 0;
              std::fill(one.begin(), one.end(), poison);
              cpu::simd::ColumnPanel<T> panel{x.data() + first - lead, static_cast<std::ptrdiff_t>(stride),
                                              one.data() + 1 + first - lead, static_cast<std::ptrdiff_t>(stride),
                                              std::min(width, inner - first) + lead, n};
              panel.lead = lead;
              panel.trims_end = first + width < inner;
              cpu::simd::ColumnParams params;
              params.op = op;
              params.inv_t = 1.0 / 0.7;
              params.online = online;
              params.stores = stores;
              with_target(target, [&] { cpu::simd::columns(panel, params); });
              for (std::size_t k = 0; k < y.size() && failures < 5; ++k) {
                if (bits(one[k]) == bits(poison)) continue;
                if (bits(y[k]) != bits(poison)) {
                  ADD_FAILURE() << "the panel at column " << first << " wrote element " << k << " again";
                  ++failures;
                }
                y[k] = one[k];
              }
            }
            for (std::size_t k = 0; k < y.size() && failures < 5; ++k) {
              const bool inside = k >= 1 && (k - 1) % stride < inner;
              const std::size_t i = (k - 1) / stride, j = (k - 1) % stride;
              std::string why;
              if (!inside && bits(y[k]) != bits(poison)) {
                ADD_FAILURE() << "wrote outside the panels at " << k;
              } else if (inside && bits(y[k]) == bits(poison)) {
                ADD_FAILURE() << "row " << i << " column " << j << " was not written";
              } else if (inside && !meets_bar(op, dtype, value(y[k]), expected[i * inner + j], &why)) {
                ADD_FAILURE() << "row " << i << " column " << j << ": " << why;
              } else {
                continue;
              }
              ++failures;
            }
          }
        }
      }
    }
  };
  run(float{});
  run(bfloat16{});
  run(half{});
}

// Streamed outputs along a middle axis whose rows split cache lines between panels
// (execute.cpp's panel_lead): within the bar, and the same bits on 1 and 3 threads.
TEST_F(SimdColumns, StreamedPanelsOfMisalignedRowsAgreeOnAnyThreads) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    // Rows of 2500 elements (10000 or 5000 bytes): several panels however large L2 is.
    TestTensor x(dtype, {2, 81, 2500});
    fill_normal(x, rng(), Distribution{-1.0, 5.0});
    for (Op op : {Op::softmax, Op::log_softmax}) {
      Options options;
      options.axis = 1;
      options.stores = Stores::streaming;
      const Expected expected = reference_nd(op, x, options);
      for (Algorithm algorithm : kBothForms) {
        options.algorithm = algorithm;
        SCOPED_TRACE(std::string(to_string(dtype)) + " " + describe(op, options));
        options.threads = 1;
        const TestTensor one = run_and_check(op, x, options, Layout::contiguous, expected);
        options.threads = 3;
        const TestTensor three = run_and_check(op, x, options, Layout::contiguous, expected);
        for (std::int64_t i = 0; i < one.numel(); ++i) ASSERT_EQ(one.at(i), three.at(i)) << "at " << i;
      }
    }
  }
}

// A column holding +inf beside finite values (whose exps are NaN and whose factor is
// NaN) gives the same NaN bits in every row wherever it lies in the panel, and so does
// a column holding a NaN input: the NaN of exp * factor with both NaN is otherwise the
// operand the compiler put first (f32_columns.cpp's SetNaNColumns).
TEST_F(SimdColumns, PoisonedColumnsGiveTheSameNaNAtEveryLane) {
  constexpr std::int64_t kLength = 5, kWidth = 70;
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    for (Algorithm algorithm : kBothForms) {
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(algorithm)) + " " +
                     hwy::TargetName(target));
        std::vector<std::uint64_t> seen;  // the output bits of every poisoned element
        for (std::int64_t c = 0; c < kWidth; ++c) {
          TestTensor x(dtype, {kLength, kWidth});
          fill_normal(x, rng(), Distribution{0.0, 2.0});
          x.set_at(2 * kWidth + c, kInf);
          x.set_at(3 * kWidth + (c + kWidth / 2) % kWidth, kNaN);
          Options options;
          options.axis = 0;
          options.algorithm = algorithm;
          TestTensor y(dtype, {kLength, kWidth});
          with_target(target, [&] { run_op(Op::softmax, x.view(), y.mutable_view(), options); });
          const auto* bytes = static_cast<const unsigned char*>(y.data());
          const std::size_t size = size_of(dtype);
          for (std::int64_t i = 0; i < kLength; ++i) {
            for (std::int64_t column : {c, (c + kWidth / 2) % kWidth}) {
              std::uint64_t b = 0;
              std::memcpy(&b, bytes + static_cast<std::size_t>(i * kWidth + column) * size, size);
              ASSERT_TRUE(std::isnan(static_cast<double>(y.at(i * kWidth + column))));
              seen.push_back(b);
            }
          }
        }
        for (std::uint64_t b : seen) ASSERT_EQ(b, seen.front());
      }
    }
  }
}

TEST_F(SimdColumns, TargetsAgreeWithinTheBar) {
  const std::vector<std::int64_t> targets = simd_targets();
  TestTensor x(DType::f32, {5, 300, 70});
  fill_normal(x, rng(), Distribution{10.0, 5.0});
  for (Op op : kAllOps) {
    for (double temperature : {1.0, 0.05}) {
      Options options;
      options.axis = 1;
      options.temperature = temperature;
      std::vector<TestTensor> outputs;
      for (std::int64_t target : targets) {
        outputs.push_back(make_output(op, x, options, Layout::contiguous));
        with_target(target, [&] { run_op(op, x.view(), outputs.back().mutable_view(), options); });
      }
      for (std::size_t t = 1; t < outputs.size(); ++t) {
        for (std::int64_t i = 0; i < outputs[0].numel(); ++i) {
          const long double a = outputs[0].at(i);
          const long double b = outputs[t].at(i);
          ASSERT_LE(std::abs(a - b), 2 * tolerance(op, DType::f32, a))
              << hwy::TargetName(targets[0]) << " vs " << hwy::TargetName(targets[t]) << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace smax::test
