#include <limits>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {

template <class T>
void safe_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);
  Stats<C> s;
  s.m = max_pass(row.x, row.x_stride, 0, row.n, -std::numeric_limits<C>::infinity());  // pass 1
  if (std::isfinite(s.m)) sum_exp_pass(row.x, row.x_stride, 0, row.n, s.m, inv_t, PassOrder::forward, s.d, sum_for(p.op));  // pass 2
  // pass 3
  finish_row(row, p, s, [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, PassOrder::forward, p.stores); });
}

template void safe_row(const Row<float>&, const RowParams&);
template void safe_row(const Row<double>&, const RowParams&);
template void safe_row(const Row<half>&, const RowParams&);
template void safe_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
