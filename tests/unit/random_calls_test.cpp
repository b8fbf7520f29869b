// Random calls of the public N-d entry points: a dtype, op, shape, axis, input and
// output layout, variant, thread count, store mode, temperature and masking policy
// drawn together, on inputs that sometimes hold infinities, NaN and all -inf rows;
// and the same for the backward passes (without the variants and special values).
// The sweeps elsewhere cover each choice on small tensors; these draws reach the
// paths that only larger ones take (chunked rows, column panels, streamed outputs,
// rows that fetch the next one) in combinations no one listed, each call on one of
// the Highway targets the machine supports, drawn too. SMAX_RANDOM_CALLS sets
// how many calls a run makes (default 40), SMAX_RANDOM_ELEMENTS how many elements a
// call has at most (default 2^20; fewer where the long double reference is slow, as
// under qemu on aarch64); a failure prints its call and the seed.
// In place (y = x) a third of the time where the op allows it.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"
#include "smax/training.hpp"
#include "training_reference.hpp"

namespace smax::test {
namespace {

// At most this many elements a call, so that the long double reference stays quick.
std::int64_t max_elements() { return random_call_elements(std::int64_t{1} << 20); }

template <class T>
T pick(Rng& rng, const std::vector<T>& choices) {
  return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng)];
}

bool chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }

// The reduced axis's length: one the kernels treat at a boundary (vector multiples
// and their neighbours, fused's limit, the split length, primes), or any up to 2^18;
// at most max_elements().
std::int64_t axis_length(Rng& rng) {
  static const std::vector<std::int64_t> kBoundaries = {
      1,     2,     3,     7,     15,    16,    17,    31,    32,    33,     63,     64,     65,     127,
      128,   129,   255,   257,   1000,  1023,  1024,  1025,  4095,  4097,   8191,   16383,  16384, 16385,
      32767, 32769, 65535, 65536, 65537, 99991, 131071, 131073, 262147};
  const std::int64_t length =
      chance(rng, 0.6)
          ? pick(rng, kBoundaries)
          : static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(262144.0))(rng)));
  return std::min(length, max_elements());
}

std::vector<std::int64_t> random_shape_with_axis(Rng& rng, int rank, int axis, std::int64_t length) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
  shape[static_cast<std::size_t>(axis)] = length;
  std::int64_t room = std::max<std::int64_t>(1, max_elements() / length);
  for (int d = 0; d < rank; ++d) {
    if (d == axis) continue;
    // Log-uniform up to what is left, so that both a few rows and many fit.
    const double most = std::log(static_cast<double>(std::min<std::int64_t>(room, 9000)) + 1);
    const auto extent = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(0, most)(rng))) - 1);
    shape[static_cast<std::size_t>(d)] = std::min(extent, room);
    room = std::max<std::int64_t>(1, room / shape[static_cast<std::size_t>(d)]);
  }
  return shape;
}

// Puts a few infinities, NaN or very large values into x, or masks a whole row
// (every element of one line along the axis set to -inf).
void add_special_values(Rng& rng, TestTensor& x, int axis) {
  const long double inf = std::numeric_limits<long double>::infinity();
  const std::vector<long double> kSpecials = {-inf, -inf, inf, std::nanl(""), 1e30L, -1e30L, 6e4L};
  std::uniform_int_distribution<std::int64_t> element(0, x.numel() - 1);
  const int count = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int i = 0; i < count; ++i) x.set_at(element(rng), pick(rng, kSpecials));
  if (chance(rng, 0.5)) {
    std::vector<std::int64_t> index = x.unravel(element(rng));
    for (std::int64_t k = 0; k < x.shape()[static_cast<std::size_t>(axis)]; ++k) {
      index[static_cast<std::size_t>(axis)] = k;
      x.set(index, -inf);
    }
  }
}

// A layout for an input or an output, the fast ones (contiguous and misaligned rows)
// half the time.
Layout random_layout(Rng& rng, bool output) {
  if (chance(rng, 0.5)) return chance(rng, 0.5) ? Layout::contiguous : Layout::misaligned;
  return output ? pick(rng, std::vector<Layout>(std::begin(kOutputLayouts), std::end(kOutputLayouts)))
                : pick(rng, std::vector<Layout>(std::begin(kAllLayouts), std::end(kAllLayouts)));
}

// Runs f with only one Highway target enabled (with_target), drawn from those the
// machine supports, and says which in failures.
template <class F>
void on_random_target(Rng& rng, F&& f) {
  const std::int64_t target = pick(rng, simd_targets());
  SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
  with_target(target, f);
}

class RandomCalls : public SeededTest {};

TEST_F(RandomCalls, MeetTheBarAndGiveTheSameBitsOnOneThread) {
  const std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
  const std::vector<Op> ops(std::begin(kAllOps), std::end(kAllOps));
  const std::vector<Algorithm> algorithms(std::begin(kAccurateAlgorithms), std::end(kAccurateAlgorithms));
  const int calls = random_call_count(40);
  for (int call = 0; call < calls; ++call) {
    const DType dtype = pick(rng(), dtypes);
    const Op op = pick(rng(), ops);
    const int rank = pick(rng(), std::vector<int>{1, 2, 2, 2, 3, 3});
    const int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng());
    const std::int64_t length = axis_length(rng());
    const std::vector<std::int64_t> shape = random_shape_with_axis(rng(), rank, axis, length);
    const Layout input_layout = random_layout(rng(), false);
    const bool same_layouts = input_layout != Layout::broadcast && chance(rng(), 0.5);
    const Layout output_layout = same_layouts ? input_layout : random_layout(rng(), true);
    Options options;
    options.axis = chance(rng(), 0.5) ? axis : axis - rank;
    options.algorithm = pick(rng(), algorithms);
    if (!supports_length(options.algorithm, length)) options.algorithm = Algorithm::automatic;
    options.pass_order = chance(rng(), 0.5) ? PassOrder::reverse : PassOrder::forward;
    options.threads = pick(rng(), std::vector<int>{0, 1, 2, 3});
    options.stores = pick(rng(), std::vector<Stores>{Stores::automatic, Stores::cached, Stores::streaming});
    options.all_masked = chance(rng(), 0.5) ? AllMasked::nan : AllMasked::zero;
    options.keepdims = op == Op::logsumexp && chance(rng(), 0.5);
    if (chance(rng(), 0.4)) options.temperature = std::exp(std::uniform_real_distribution<double>(-3, 3)(rng()));

    TestTensor x(dtype, shape, input_layout);
    fill_normal(x, rng(), random_distribution(rng()));
    if (chance(rng(), 0.3)) add_special_values(rng(), x, axis);
    SCOPED_TRACE("call " + std::to_string(call));
    const Expected expected = reference_nd(op, x, options);
    on_random_target(rng(), [&] {
      const TestTensor y = run_and_check(op, x, options, output_layout, expected);
      if (op != Op::logsumexp && input_layout != Layout::broadcast && chance(rng(), 0.3)) {
        // In place: the output is the input itself.
        TestTensor z = x;
        run_op(op, z.view(), z.mutable_view(), options);
        EXPECT_TRUE(matches_reference(op, z, expected)) << "in place: " << describe(op, options) << ", " << z.describe();
      }
      if (options.threads != 1) {
        Options one_thread = options;
        one_thread.threads = 1;
        TestTensor y1 = make_output(op, x, one_thread, output_layout);
        run_op(op, x.view(), y1.mutable_view(), one_thread);
        EXPECT_TRUE(bitwise_equal(y, y1)) << describe(op, options) << " against one thread, input " << x.describe();
      }
    });
    if (::testing::Test::HasFailure()) return;  // the first failing call says enough
  }
}

TEST_F(RandomCalls, BackwardMeetsTheBarAndGivesTheSameBitsOnOneThread) {
  const std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
  const int calls = random_call_count(40);
  for (int call = 0; call < calls; ++call) {
    const bool log = chance(rng(), 0.5);
    const DType dtype = pick(rng(), dtypes);
    const int rank = pick(rng(), std::vector<int>{1, 2, 2, 2, 3, 3});
    const int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng());
    const std::vector<std::int64_t> shape = random_shape_with_axis(rng(), rank, axis, axis_length(rng()));
    BackwardOptions options;
    options.axis = chance(rng(), 0.5) ? axis : axis - rank;
    options.threads = pick(rng(), std::vector<int>{0, 1, 2, 3});
    options.stores = pick(rng(), std::vector<Stores>{Stores::automatic, Stores::cached, Stores::streaming});
    if (chance(rng(), 0.4)) options.temperature = std::exp(std::uniform_real_distribution<double>(-3, 3)(rng()));

    // y: the forward output of random logits, computed in long double.
    TestTensor logits(DType::f64, shape);
    fill_normal(logits, rng(), Distribution{0, std::exp(std::uniform_real_distribution<double>(-1, 2)(rng()))});
    Options forward;
    forward.axis = axis;
    forward.temperature = options.temperature;
    const Expected y_values = reference_nd(log ? Op::log_softmax : Op::softmax, logits, forward);
    const TestTensor y = make_tensor(dtype, shape, y_values.values, random_layout(rng(), false));
    TestTensor dy(dtype, shape, random_layout(rng(), false));
    fill_normal(dy, rng(), random_distribution(rng()));
    SCOPED_TRACE("call " + std::to_string(call) + (log ? " log_softmax_backward" : " softmax_backward") + " axis " +
                 std::to_string(options.axis) + " T " + std::to_string(options.temperature) + " threads " +
                 std::to_string(options.threads) + " stores " + std::string(to_string(options.stores)) + " y " +
                 y.describe() + " dy " + dy.describe());
    const Reference reference = backward_reference(log, y, dy, axis, options.temperature);
    const long double eps = dtype == DType::f64 ? 0x1p-61L : 0x1p-50L;  // as training_backward_test's

    // Into a tensor of its own, or in place over dy (a third of the time).
    const bool in_place = dy.layout() != Layout::broadcast && chance(rng(), 0.3);
    const Layout dx_layout = random_layout(rng(), true);
    on_random_target(rng(), [&] {
      TestTensor dx = in_place ? dy : TestTensor(dtype, shape, dx_layout);
      run_backward(log, y.view(), in_place ? dx.view() : dy.view(), dx.mutable_view(), options);
      EXPECT_TRUE(meets_training_bar(in_place ? "in place " + dx.describe() : dx.describe(), dx, reference.values,
                                     reference.cancelled, eps));
      EXPECT_TRUE(dx.untouched_outside_view());
      if (options.threads != 1) {
        BackwardOptions one_thread = options;
        one_thread.threads = 1;
        TestTensor dx1 = in_place ? dy : TestTensor(dtype, shape, dx.layout());
        run_backward(log, y.view(), in_place ? dx1.view() : dy.view(), dx1.mutable_view(), one_thread);
        EXPECT_TRUE(bitwise_equal(dx, dx1)) << "against one thread";
      }
    });
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace smax::test
