#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {

namespace {

// Element i goes to lane i % kLanes, as a SIMD register's lanes would; the lanes'
// partial (max, sum) pairs merge pairwise in a fixed order.
inline constexpr int kLanes = 8;

// Pass 1 as the tutorial writes it: running max and rescaled running sum per lane.
template <class T, class C = typename Element<T>::Compute>
Stats<C> lane_stats(const Row<T>& row, C inv_t) {
  std::array<detail::OnlineLane<C>, kLanes> lanes{};
  for (std::int64_t i = 0; i < row.n; ++i) {
    lanes[static_cast<std::size_t>(i % kLanes)].add(Element<T>::template load<C>(row.x[i * row.x_stride]), inv_t);
  }
  std::array<Stats<C>, kLanes> partial;
  for (int l = 0; l < kLanes; ++l) partial[static_cast<std::size_t>(l)] = lanes[static_cast<std::size_t>(l)].stats(inv_t);
  for (int width = 1; width < kLanes; width *= 2) {
    for (int l = 0; l + width < kLanes; l += 2 * width) {
      partial[static_cast<std::size_t>(l)] =
          detail::merge(partial[static_cast<std::size_t>(l)], partial[static_cast<std::size_t>(l + width)], inv_t);
    }
  }
  return partial[0];
}

// Pass 1 for f32, whose passes are vectorised: the running (max, sum) advances a block
// at a time. Each block's pair comes from the max and exp-sum passes while the block is
// in L1, and merges into the running pair. Still one read of the row from memory.
inline constexpr std::int64_t kBlock = 2048;

Stats<double> block_stats(const Row<float>& row, double inv_t) {
  Stats<double> running;
  for (std::int64_t begin = 0; begin < row.n; begin += kBlock) {
    const std::int64_t end = std::min(row.n, begin + kBlock);
    Stats<double> block;
    block.m = max_pass(row.x, row.x_stride, begin, end, -std::numeric_limits<double>::infinity());
    if (std::isfinite(block.m)) sum_exp_pass(row.x, row.x_stride, begin, end, block.m, inv_t, PassOrder::forward, block.d);
    running = detail::merge(running, block, inv_t);
  }
  return running;
}

}  // namespace

template <class T>
void online_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);

  // Pass 1: running max and rescaled running sum, in one read of the row.
  Stats<C> stats;
  if constexpr (std::is_same_v<T, float>) {
    stats = block_stats(row, inv_t);
  } else {
    stats = lane_stats(row, inv_t);
  }

  // Pass 2: the output, backward by default so that it starts on the tail of the row
  // that pass 1 left in cache.
  finish_row(row, p, stats, [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, p.order); });
}

template void online_row(const Row<float>&, const RowParams&);
template void online_row(const Row<double>&, const RowParams&);
template void online_row(const Row<half>&, const RowParams&);
template void online_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
