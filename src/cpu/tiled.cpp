#include <algorithm>
#include <limits>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {

template <class T>
void tiled_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);
  const std::int64_t block = std::max<std::int64_t>(p.block, 1);
  const std::int64_t blocks = (row.n + block - 1) / block;
  auto begin = [&](std::int64_t b) { return b * block; };
  auto end = [&](std::int64_t b) { return std::min(row.n, (b + 1) * block); };

  // Pass 1, forward: the max. It ends on the last blocks, which stay in cache.
  Stats<C> s;
  for (std::int64_t b = 0; b < blocks; ++b) s.m = max_pass(row.x, row.x_stride, begin(b), end(b), s.m);
  // Pass 2: the sum, from the last block back to the first when reversed, so that it
  // starts where pass 1 stopped and ends where pass 3 starts. Reversed, each block is
  // read from its end too: the whole pass descends, which the hardware prefetches as
  // well as an ascending one, where blocks taken in descending order but each read
  // ascending ran at half the speed from memory (AMD Zen 5: docs/PERFORMANCE.md).
  // Each block fetches the block read next into cache meanwhile (contiguous rows).
  const bool contiguous = row.x_stride == 1 && row.y_stride == 1;
  auto block_at = [&](std::int64_t k) { return p.order == PassOrder::reverse ? blocks - 1 - k : k; };
  auto ahead = [&](std::int64_t k, bool with_y) {
    simd::Ahead<T> a;
    if (contiguous && k < blocks) a = {row.x + begin(block_at(k)), with_y ? row.y + begin(block_at(k)) : nullptr};
    return a;
  };
  if (std::isfinite(s.m)) {
    for (std::int64_t k = 0; k < blocks; ++k) {
      const std::int64_t b = block_at(k);
      sum_exp_pass(row.x, row.x_stride, begin(b), end(b), s.m, inv_t, p.order, s.d, sum_for(p.op),
                   ahead(k + 1, false));
    }
  }
  // Pass 3, forward: normalise.
  finish_row(row, p, s, [&](const Normalizer<C>& f) {
    for (std::int64_t b = 0; b < blocks; ++b) {
      simd::Ahead<T> next;
      if (contiguous && b + 1 < blocks) next = {row.x + begin(b + 1), row.y + begin(b + 1)};
      write_pass(row, begin(b), end(b), f, PassOrder::forward, p.stores, next);
    }
  });
}

template void tiled_row(const Row<float>&, const RowParams&);
template void tiled_row(const Row<double>&, const RowParams&);
template void tiled_row(const Row<half>&, const RowParams&);
template void tiled_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
