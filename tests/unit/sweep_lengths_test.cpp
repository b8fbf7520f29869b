// Row lengths around every power of two up to 2^14 + 1 (past the fused limit), for
// every variant, dtype and op, in both pass orders of tiled and online.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "op_runner.hpp"
#include "random_data.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

std::vector<std::int64_t> lengths_to_sweep() {
  std::set<std::int64_t> lengths{1, 2, 3, 5, 7, 13, 31, 127, 257, 1021};
  for (int k = 1; k <= 14; ++k) {
    lengths.insert((std::int64_t{1} << k) - 1);
    lengths.insert((std::int64_t{1} << k) + 1);
  }
  return {lengths.begin(), lengths.end()};
}

bool has_pass_order(Algorithm algorithm) { return algorithm == Algorithm::tiled || algorithm == Algorithm::online; }

class LengthSweep : public SeededTest, public ::testing::WithParamInterface<DType> {};

// Two rows per tensor; the layout cycles so that long rows are also read strided,
// reversed and column-major, and written the same way.
TEST_P(LengthSweep, EveryLengthVariantAndPassOrderMeetsTheBar) {
  const DType dtype = GetParam();
  const std::vector<std::int64_t> lengths = lengths_to_sweep();
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const std::int64_t length = lengths[i];
    const Layout layout = kOutputLayouts[i % std::size(kOutputLayouts)];
    TestTensor x(dtype, {2, length}, layout);
    fill_normal(x, rng(), random_distribution(rng()));
    for (Op op : kAllOps) {
      Options options;
      const Expected expected = reference_nd(op, x, options);
      for (Algorithm algorithm : kAccurateAlgorithms) {
        if (!supports_length(algorithm, length)) continue;
        options.algorithm = algorithm;
        for (PassOrder order : {PassOrder::reverse, PassOrder::forward}) {
          if (order == PassOrder::forward && !has_pass_order(algorithm)) continue;
          options.pass_order = order;
          run_and_check(op, x, options, layout, expected);
        }
      }
    }
  }
}

// Fused takes a row of exactly kFusedMaxLength elements.
TEST_P(LengthSweep, FusedTakesItsMaximumLength) {
  const DType dtype = GetParam();
  TestTensor x(dtype, {kFusedMaxLength});
  fill_normal(x, rng(), random_distribution(rng()));
  Options options;
  options.algorithm = Algorithm::fused;
  for (Op op : kAllOps) run_and_check(op, x, options, Layout::contiguous, reference_nd(op, x, options));
}

INSTANTIATE_TEST_SUITE_P(DTypes, LengthSweep, ::testing::ValuesIn(kAllDTypes), dtype_test_name);

}  // namespace
}  // namespace smax::test
