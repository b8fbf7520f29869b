#include <algorithm>
#include <limits>
#include <type_traits>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {

namespace {

// Pass 1 for the types whose passes are vectorised: the running (max, sum) advances a
// block at a time. Each block's pair comes from the max and exp-sum passes while the block is
// in L1. Still one read of the row from memory.
// The running sum is kept against a reference point that moves only when a block's
// max exceeds it by more than detail::kRescaleThreshold (in units of T): each
// block's sum is scaled to the reference once, and the running sum is only ever
// rescaled by e^-8 or less. Merging block by block instead rescales the running sum at
// every block whose max grew, one rounding each: on an ascending f64 row of 2^24 that
// piled up to 1.6e-13 relative, beyond the f64 bar.
inline constexpr std::int64_t kBlock = 2048;

template <class T, class C = typename Element<T>::Compute>
Stats<C> block_stats(const Row<T>& row, C inv_t, SumFor use) {
  constexpr C kRescaleThreshold = static_cast<C>(detail::kRescaleThreshold);
  Stats<C> running;  // running.d is relative to ref until the end
  C ref = -std::numeric_limits<C>::infinity();
  for (std::int64_t begin = 0; begin < row.n; begin += kBlock) {
    const std::int64_t end = std::min(row.n, begin + kBlock);
    Stats<C> block;
    block.m = max_pass(row.x, row.x_stride, begin, end, -std::numeric_limits<C>::infinity());
    running.m = nan_max(running.m, block.m);
    // An all -inf block adds 0; a NaN or +inf decides the row through running.m.
    if (!std::isfinite(block.m)) continue;
    sum_exp_pass(row.x, row.x_stride, begin, end, block.m, inv_t, PassOrder::forward, block.d, use);
    if ((block.m - ref) * inv_t > kRescaleThreshold) {
      running.d.scale(std::exp(static_cast<double>((ref - block.m) * inv_t)));
      ref = block.m;
    }
    block.d.scale(std::exp(static_cast<double>((block.m - ref) * inv_t)));  // exactly 1 when block.m == ref
    running.d.add(block.d);
  }
  if (std::isfinite(running.m)) running.d.scale(std::exp(static_cast<double>((ref - running.m) * inv_t)));
  return running;
}

}  // namespace

template <class T>
void online_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);

  // Pass 1: running max and rescaled running sum, in one read of the row.
  const Stats<C> stats = block_stats(row, inv_t, sum_for(p.op));

  // Pass 2: the output, backward by default so that it starts on the tail of the row
  // that pass 1 left in cache.
  finish_row(row, p, stats, [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, p.order, p.stores); });
}

template void online_row(const Row<float>&, const RowParams&);
template void online_row(const Row<double>&, const RowParams&);
template void online_row(const Row<half>&, const RowParams&);
template void online_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
