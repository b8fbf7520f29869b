// The vectorised row kernels (contiguous f32, f16 and bf16 rows, computed in float
// lanes) through the public API, on every Highway target this machine supports: the
// accuracy bar and the non-finite semantics at lengths around every vector width,
// misaligned pointers, and agreement between targets.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "cpu/simd/misaligned_loads.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

constexpr std::int64_t kLengths[] = {1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000, 4097, 65537};
constexpr Algorithm kSimdAlgorithms[] = {Algorithm::safe, Algorithm::fused, Algorithm::tiled, Algorithm::online};
constexpr PassOrder kOrders[] = {PassOrder::reverse, PassOrder::forward};

class SimdRows : public SeededTest, public ::testing::WithParamInterface<DType> {
 protected:
  // Every op, algorithm and pass order on x, checked against the reference, on
  // every target.
  void check_everywhere(const TestTensor& x, double temperature, Layout output_layout = Layout::contiguous) {
    for (std::int64_t target : simd_targets()) {
      SCOPED_TRACE(hwy::TargetName(target));
      with_target(target, [&] {
        for (Op op : kAllOps) {
          Options options;
          options.temperature = temperature;
          const Expected expected = reference_nd(op, x, options);
          for (Algorithm algorithm : kSimdAlgorithms) {
            if (algorithm == Algorithm::fused && x.shape().back() > kFusedMaxLength) continue;
            for (PassOrder order : kOrders) {
              options.algorithm = algorithm;
              options.pass_order = order;
              run_and_check(op, x, options, output_layout, expected);
            }
          }
        }
      });
    }
  }
};

TEST_P(SimdRows, RandomRowsAtEveryLengthMeetTheBar) {
  std::uniform_real_distribution<double> offset(-50.0, 50.0);
  for (std::int64_t n : kLengths) {
    SCOPED_TRACE("n=" + std::to_string(n));
    for (double temperature : {1.0, 0.01, 100.0, 0.7}) {
      TestTensor x(GetParam(), {2, n});
      fill_normal(x, rng(), Distribution{offset(rng()), random_distribution(rng()).scale});
      check_everywhere(x, temperature);
    }
  }
}

TEST_P(SimdRows, OutputsBelowTheNormalRangeMeetTheBar) {
  // One element at the max, the others 85 to 104 below it: outputs below FLT_MIN,
  // which bf16 keeps as subnormals (the fused rows build those exps 2^64 too large),
  // and log_softmax's -log(1 + tiny) at the max. Rows of 5 and 12 go across lanes.
  std::uniform_real_distribution<double> below(-104.0, -85.0);
  for (std::int64_t n : {5, 12, 17, 300, 1000, 4097}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    TestTensor x(GetParam(), {2, n});
    for (std::int64_t i = 0; i < 2 * n; ++i) x.set_at(i, 7.0 + below(rng()));
    x.set_at(n / 3, 7.0);
    x.set_at(n + n - 1, 7.0);
    check_everywhere(x, 1.0);
  }
}

TEST_P(SimdRows, DominantMaximaAreCountedWhereverTheyLie) {
  // Row r holds its max at element r (and row r + n at r and at n - 1 - r), the
  // others about 12 or 30 below: log_softmax's -log(1 + tiny) at the max and
  // logsumexp's m + tiny need every term at the max counted apart (a float sum that
  // held the max's 1 would round the rest), wherever a pass's group of vectors,
  // single vector or tail puts it, and whatever the exp's z there. (The 16-bit bars,
  // relative at any size, see a rest lost so: f16 and bf16 failed with the split off;
  // f32's log bar, 2e-6 absolute below 1, does not.)
  for (double gap : {12.0, 30.0}) {
    for (std::int64_t n : {64, 100, 301}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " gap " + std::to_string(gap));
      TestTensor x(GetParam(), {2 * n, n});
      std::uniform_real_distribution<double> below(-gap - 1.0, -gap + 1.0);
      for (std::int64_t r = 0; r < 2 * n; ++r) {
        for (std::int64_t i = 0; i < n; ++i) x.set_at(r * n + i, 5.0 + below(rng()));
        x.set_at(r * n + r % n, 5.0);
        if (r >= n) x.set_at(r * n + (n - 1 - r % n), 5.0);
      }
      for (double temperature : {1.0, 0.7}) check_everywhere(x, temperature);
    }
  }
}

TEST_P(SimdRows, LongRowsCountEveryTermAtTheMax) {
  // log_softmax and logsumexp count the terms at the max in integer lanes, which a
  // pass moves into a 64-bit count from time to time (every 2^20 elements with
  // AVX-512's 16 lanes) before they can wrap; safe counts a whole row in one pass. A
  // third of this row sits at the max.
  const std::int64_t n = (std::int64_t{1} << 20) + 4099;
  TestTensor x(GetParam(), {1, n});
  std::uniform_real_distribution<double> below(-8.0, -0.5);
  for (std::int64_t i = 0; i < n; ++i) x.set_at(i, i % 3 == 1 ? 2.0 : 2.0 + below(rng()));
  Options options;
  options.algorithm = Algorithm::safe;
  for (Op op : {Op::log_softmax, Op::logsumexp}) {
    const Expected expected = reference_nd(op, x, options);
    for (std::int64_t target : simd_targets()) {
      SCOPED_TRACE(hwy::TargetName(target));
      with_target(target, [&] { run_and_check(op, x, options, Layout::contiguous, expected); });
    }
  }
}

TEST_P(SimdRows, NonFiniteRowsKeepTheirSemantics) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t n : {1, 7, 16, 17, 33, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // Rows: a NaN, a +inf, some -inf, all -inf, a NaN in the tail, +inf and -inf.
    TestTensor x(GetParam(), {6, n});
    fill_normal(x, rng(), Distribution{3.0, 2.0});
    x.set_at(0 * n + n / 2, nan);
    x.set_at(1 * n + n / 3, inf);
    for (std::int64_t i = 0; i < n; i += 2) x.set_at(2 * n + i, -inf);
    for (std::int64_t i = 0; i < n; ++i) x.set_at(3 * n + i, -inf);
    x.set_at(4 * n + n - 1, nan);
    x.set_at(5 * n, -inf);
    x.set_at(5 * n + n - 1, inf);
    check_everywhere(x, 1.0);
    check_everywhere(x, 0.01);
  }
}

// The same kinds of rows, each after a finite row: the fused passes find a row's max
// beside the previous row's scaling, and rows in registers (up to 16 vectors: 200, 256
// on AVX-512) beside the previous row's exps, so its NaN must be seen there too.
TEST_P(SimdRows, NonFiniteRowsAfterFiniteRowsKeepTheirSemantics) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t n : {17, 200, 256, 300, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    TestTensor x(GetParam(), {10, n});
    fill_normal(x, rng(), Distribution{3.0, 2.0});
    x.set_at(1 * n + n / 2, nan);
    x.set_at(3 * n + n - 1, nan);
    x.set_at(5 * n + n / 3, inf);
    x.set_at(7 * n, nan);
    x.set_at(7 * n + 1, inf);
    for (std::int64_t i = 0; i < n; ++i) x.set_at(9 * n + i, -inf);
    check_everywhere(x, 1.0);
  }
}

// Short rows run a block of 16 (or 8) rows at a time, a row to a lane, where the
// target allows (rows_across_lanes-inl.h): a row's bits must not depend on the rows
// beside it, on its lane or on where a call starts (a thread's share), and the rows
// that form leaves to the general path (a NaN, +inf, all -inf, a max beyond the exp's
// range) keep their semantics wherever they lie in a block. Every dtype: the property
// holds for all of them. Softmax and log_softmax, at unit temperature and not.
TEST_P(SimdRows, ShortRowsGiveTheSameBitsWhereverTheyLie) {
  const DType dtype = GetParam();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::size_t element = size_of(dtype);
  for (std::int64_t n : {1, 5, 8, 9, 16, 17, 24, 32, 33, 64}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    constexpr std::int64_t kRows = 37;
    TestTensor x(dtype, {kRows, n});
    fill_normal(x, rng(), Distribution{-2.0, 3.0});
    x.set_at(3 * n + n / 2, nan);
    x.set_at(16 * n, inf);  // the first row of the second block
    for (std::int64_t i = 0; i < n; ++i) x.set_at(20 * n + i, -inf);
    x.set_at(31 * n + n - 1, 700.0);
    for (std::int64_t i = 0; i < n; ++i) x.set_at(33 * n + i, -650.0 + 0.5 * static_cast<double>(i % 3));
    // A row dominated by its max: log_softmax's -log(1 + tiny) there.
    for (std::int64_t i = 0; i < n; ++i) x.set_at(12 * n + i, i == n / 2 ? 4.0 : -80.0 - static_cast<double>(i));
    for (Op op : {Op::softmax, Op::log_softmax}) {
      for (double temperature : {1.0, 0.7}) {
        Options options;
        options.temperature = temperature;
        SCOPED_TRACE(describe(op, options));
        const Expected expected = reference_nd(op, x, options);
        for (std::int64_t target : simd_targets()) {
          SCOPED_TRACE(hwy::TargetName(target));
          with_target(target, [&] {
            TestTensor all(dtype, {kRows, n});
            run_op(op, x.view(), all.mutable_view(), options);
            ASSERT_TRUE(matches_reference(op, all, expected));
            const auto* in = static_cast<const unsigned char*>(x.data());
            const auto* out = static_cast<const unsigned char*>(all.data());
            for (std::int64_t first : {1, 7, 15, 36}) {
              const std::int64_t rows = kRows - first;
              const std::size_t offset = static_cast<std::size_t>(first * n) * element;
              TestTensor part(dtype, {rows, n});
              run_op(op, TensorView(in + offset, dtype, {rows, n}), part.mutable_view(), options);
              EXPECT_EQ(std::memcmp(part.data(), out + offset, static_cast<std::size_t>(rows * n) * element), 0)
                  << "rows from " << first;
            }
          });
        }
      }
    }
  }
}

TEST_P(SimdRows, MisalignedPointersWork) {
  for (std::int64_t n : {3, 17, 129, 4097}) {
    TestTensor x(GetParam(), {3, n}, Layout::misaligned);
    fill_normal(x, rng(), Distribution{-7.0, 4.0});
    check_everywhere(x, 1.0, Layout::misaligned);
    check_everywhere(x, 0.3, Layout::misaligned);
  }
}

// For the address tests below: rows of every kind (in registers, fused, split rows) of
// 4 x n random elements, a buffer that holds them at any offset below 64 bytes from a
// 64-byte boundary, `base`, and every target: f(x, bytes, base) per length and target.
template <class F>
void for_each_length_buffer_and_target(DType dtype, Rng& gen, F&& f) {
  for (std::int64_t n : {17, 100, 256, 300, 1000, 4097, 70001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    TestTensor x(dtype, {4, n});
    fill_normal(x, gen, Distribution{-2.0, 3.0});
    const std::size_t bytes = static_cast<std::size_t>(4 * n) * size_of(dtype);
    std::vector<std::uint64_t> buffer((bytes + 128) / sizeof(std::uint64_t) + 1);
    auto* base = reinterpret_cast<unsigned char*>(buffer.data());
    while (reinterpret_cast<std::uintptr_t>(base) % 64 != 0) base += sizeof(std::uint64_t);
    for (std::int64_t target : simd_targets()) {
      SCOPED_TRACE(hwy::TargetName(target));
      with_target(target, [&] { f(x, bytes, base); });
    }
  }
}

// The output's address changes no bit: the scaling pass starts its whole vectors
// where the output is aligned to them, but the exp pass (whose sums depend on how
// lanes group the elements) walks from the row's start whatever the output's address.
// Every output offset within a vector.
TEST_P(SimdRows, OutputAddressChangesNoBit) {
  const DType dtype = GetParam();
  for_each_length_buffer_and_target(dtype, rng(), [&](const TestTensor& x, std::size_t bytes, unsigned char* base) {
    std::vector<unsigned char> first;
    for (std::size_t offset = 0; offset < 64; offset += size_of(dtype)) {
      softmax(x.view(), MutableTensorView(base + offset, dtype, x.shape()), Options{});
      if (offset == 0) {
        first.assign(base, base + bytes);
      } else {
        ASSERT_EQ(std::memcmp(base + offset, first.data(), bytes), 0) << "output offset " << offset << " bytes";
      }
    }
  });
}

// Nor does the input's: where it is not aligned to the vector, the exp pass may read
// it by aligned loads and join their lanes (walk-inl.h's ShiftedLoads), which must put
// every element in the lane an unaligned load would. Softmax and log_softmax, every
// input offset within a vector, with the joins and without (whichever this machine's
// vendor takes, misaligned_loads.hpp).
TEST_P(SimdRows, InputAddressChangesNoBit) {
  const DType dtype = GetParam();
  const bool vendors_choice = cpu::simd::joins_misaligned_loads();
  for (const bool joins : {true, false}) {
    SCOPED_TRACE(joins ? "joined loads" : "unaligned loads");
    cpu::simd::set_joins_misaligned_loads(joins);
    for_each_length_buffer_and_target(dtype, rng(), [&](const TestTensor& x, std::size_t bytes, unsigned char* base) {
      for (Op op : {Op::softmax, Op::log_softmax}) {
        TestTensor first(dtype, x.shape());
        for (std::size_t offset = 0; offset < 64; offset += size_of(dtype)) {
          std::memcpy(base + offset, x.data(), bytes);
          TestTensor y(dtype, x.shape());
          run_op(op, TensorView(base + offset, dtype, x.shape()), y.mutable_view(), Options{});
          if (offset == 0) {
            first = y;
          } else {
            ASSERT_TRUE(bitwise_equal(y, first)) << "input offset " << offset << " bytes";
          }
        }
      }
    });
  }
  cpu::simd::set_joins_misaligned_loads(vendors_choice);
}

TEST_P(SimdRows, InPlaceWorks) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (Op op : {Op::softmax, Op::log_softmax}) {
        TestTensor x(GetParam(), {2, 1001});
        fill_normal(x, rng(), Distribution{1.0, 3.0});
        const Expected expected = reference_nd(op, x, Options{});
        run_op(op, x.view(), x.mutable_view(), Options{});
        EXPECT_TRUE(matches_reference(op, x, expected));
      }
    });
  }
}

// Streaming stores (softmax and log_softmax rows of every dtype here) write the same
// bits as cached stores, on every target, for
// every variant and pass order, lengths around every vector width, misaligned rows
// and in place.
TEST_P(SimdRows, StreamingStoresWriteTheCachedBits) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (std::int64_t n : {1, 15, 16, 17, 33, 129, 1000, 4097, 65537}) {
        for (Layout layout : {Layout::contiguous, Layout::misaligned}) {
          SCOPED_TRACE("n=" + std::to_string(n) + (layout == Layout::misaligned ? " misaligned" : ""));
          TestTensor x(GetParam(), {3, n}, layout);
          fill_normal(x, rng(), Distribution{2.0, 4.0});
          for (Op op : {Op::softmax, Op::log_softmax}) {
            const Expected expected = reference_nd(op, x, Options{});
            // automatic: 65537 runs softmax fused over chunks (16-bit: streamed).
            for (Algorithm algorithm : {Algorithm::safe, Algorithm::fused, Algorithm::tiled, Algorithm::online,
                                        Algorithm::automatic}) {
              if (algorithm == Algorithm::fused && n > kFusedMaxLength) continue;
              for (PassOrder order : kOrders) {
                SCOPED_TRACE(std::string(to_string(op)) + ' ' + std::string(to_string(algorithm)) + ' ' +
                             std::string(to_string(order)));
                Options options{.algorithm = algorithm, .pass_order = order, .stores = Stores::cached};
                const TestTensor cached = run_and_check(op, x, options, layout, expected);
                options.stores = Stores::streaming;
                const TestTensor streamed = run_and_check(op, x, options, layout, expected);
                TestTensor in_place = x;
                run_op(op, in_place.view(), in_place.mutable_view(), options);
                ASSERT_TRUE(bitwise_equal(streamed, cached));
                // In place, fused over chunks cannot take its exps against a guess (they
                // overwrite the input): a max pass first, other bits within the bar
                // (docs/SEMANTICS.md promises the same bits to views that take the same path).
                if (algorithm != Algorithm::automatic) {
                  ASSERT_TRUE(bitwise_equal(in_place, cached));
                }
              }
            }
          }
        }
      }
    });
  }
}

// Streamed rows take one of three paths by their output's address: from registers or
// with each row's scaling pass inside the next row's exp pass (f32_rows.hpp) where
// every row is aligned to the vector, else the fused passes with streamed whole
// vectors between two cached pieces. Each writes the bits of cached stores and
// nothing outside the output, also around a row with a non-finite max, which leaves
// the batch. Inputs also lie 16 bytes past the output's place in a page, where the
// pipelined scaling takes the previous row's vectors in a rotated order. log_softmax's
// float rows pipeline their write pass the same way (but never rotated).
TEST_P(SimdRows, StreamingRowsWriteTheCachedBitsAtAnyOutputOffset) {
  const DType dtype = GetParam();
  const std::size_t size = size_of(dtype);
  constexpr std::size_t kAlign = 256;  // every target's vector
  constexpr std::size_t kGuard = 256;
  constexpr unsigned char kFill = 0xA5;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      // 40000: fused over chunks under automatic (16-bit: its scaling pass streamed).
      for (std::int64_t n : {48, 128, 272, 1000, 1024, 4096, 4097, 8192, 40000}) {
        constexpr std::int64_t kRows = 5;
        TestTensor x(dtype, {kRows, n});
        fill_normal(x, rng(), Distribution{1.0, 5.0});
        if (n == 128 || n == 1024 || n == 4097) x.set_at(2 * n + 7, std::numeric_limits<double>::quiet_NaN());
        const Options cached_options{.algorithm = n > kFusedMaxLength ? Algorithm::automatic : Algorithm::fused,
                                     .stores = Stores::cached};
        for (Op op : {Op::softmax, Op::log_softmax}) {
          const TestTensor cached =
              run_and_check(op, x, cached_options, Layout::contiguous, reference_nd(op, x, Options{}));
          const auto bytes = static_cast<std::size_t>(kRows * n) * size;
          constexpr std::size_t kPage = 4096;
          std::vector<unsigned char> storage(2 * bytes + 3 * kAlign + 2 * kGuard + 2 * kPage);
          unsigned char* in_aligned = storage.data();
          while (reinterpret_cast<std::uintptr_t>(in_aligned) % kAlign != 0) ++in_aligned;
          unsigned char* const out_aligned =
              in_aligned + (bytes + kGuard + 2 * kPage + kAlign - 1) / kAlign * kAlign;
          for (std::size_t offset : {std::size_t{0}, size, std::size_t{16}, std::size_t{40}}) {
            unsigned char* out = out_aligned + offset;
            for (bool near : {false, true}) {  // near: the input 16 bytes past the output's place in a page
              unsigned char* in = in_aligned;
              if (near) {
                const auto out_address = reinterpret_cast<std::uintptr_t>(out);
                in += (out_address + 16 - reinterpret_cast<std::uintptr_t>(in_aligned)) % kPage;
              }
              std::memcpy(in, x.data(), bytes);
              for (Algorithm algorithm : {Algorithm::fused, Algorithm::automatic}) {
                if (algorithm == Algorithm::fused && n > kFusedMaxLength) continue;
                SCOPED_TRACE(std::string(to_string(op)) + " n=" + std::to_string(n) + " output offset " +
                             std::to_string(offset) +
                             (near ? " input 16 bytes past it in a page " : " ") + std::string(to_string(algorithm)));
                std::fill(out - kGuard, out + bytes + kGuard, kFill);
                const Options streaming{.algorithm = algorithm, .stores = Stores::streaming};
                const TensorView input(in, dtype, {kRows, n});
                const MutableTensorView output(out, dtype, {kRows, n});
                if (op == Op::softmax) softmax(input, output, streaming);
                else log_softmax(input, output, streaming);
                for (std::size_t i = 0; i < bytes; i += size) {
                  ASSERT_EQ(std::memcmp(out + i, static_cast<const unsigned char*>(cached.data()) + i, size), 0)
                      << "element " << i / size;
                }
                for (std::size_t i = 0; i < kGuard; ++i) {
                  ASSERT_EQ(out[-1 - static_cast<std::ptrdiff_t>(i)], kFill) << "written " << i + 1 << " bytes before";
                  ASSERT_EQ(out[bytes + i], kFill) << "written " << i << " bytes past the end";
                }
              }
            }
          }
        }
      }
    });
  }
}

TEST_P(SimdRows, TargetsAgreeWithinTheBar) {
  const std::vector<std::int64_t> targets = simd_targets();
  TestTensor x(GetParam(), {4, 4099});
  fill_normal(x, rng(), Distribution{10.0, 5.0});
  for (Op op : kAllOps) {
    for (double temperature : {1.0, 0.05}) {
      Options options;
      options.temperature = temperature;
      options.algorithm = Algorithm::safe;
      std::vector<TestTensor> outputs;
      for (std::int64_t target : targets) {
        outputs.push_back(make_output(op, x, options, Layout::contiguous));
        with_target(target, [&] { run_op(op, x.view(), outputs.back().mutable_view(), options); });
      }
      for (std::size_t t = 1; t < outputs.size(); ++t) {
        for (std::int64_t i = 0; i < outputs[0].numel(); ++i) {
          const long double a = outputs[0].at(i);
          const long double b = outputs[t].at(i);
          ASSERT_LE(std::abs(a - b), 2 * tolerance(op, GetParam(), a))
              << hwy::TargetName(targets[0]) << " vs " << hwy::TargetName(targets[t]) << " at " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, SimdRows, ::testing::Values(DType::f32, DType::f16, DType::bf16), dtype_test_name);

}  // namespace
}  // namespace smax::test
