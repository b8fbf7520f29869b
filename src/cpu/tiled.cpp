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
  // starts where pass 1 stopped and ends where pass 3 starts.
  if (std::isfinite(s.m)) {
    for (std::int64_t k = 0; k < blocks; ++k) {
      const std::int64_t b = p.order == PassOrder::reverse ? blocks - 1 - k : k;
      sum_exp_pass(row.x, row.x_stride, begin(b), end(b), s.m, inv_t, p.order, s.d, sum_for(p.op));
    }
  }
  // Pass 3, forward: normalise.
  finish_row(row, p, s, [&](const Normalizer<C>& f) {
    for (std::int64_t b = 0; b < blocks; ++b) write_pass(row, begin(b), end(b), f, PassOrder::forward);
  });
}

template void tiled_row(const Row<float>&, const RowParams&);
template void tiled_row(const Row<double>&, const RowParams&);
template void tiled_row(const Row<half>&, const RowParams&);
template void tiled_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
