#include <cmath>

#include "cpu/element.hpp"
#include "cpu/variants.hpp"
#include "smax/dtype.hpp"

namespace smax::cpu {

template <class T>
void naive_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::NaiveCompute;
  const C inv_t = static_cast<C>(p.inv_t);
  auto load = [&](std::int64_t i) { return Element<T>::template load<C>(row.x[i * row.x_stride]) * inv_t; };
  C d = 0;
  for (std::int64_t i = 0; i < row.n; ++i) d += std::exp(load(i));
  if (p.op == Op::logsumexp) {
    row.y[0] = Element<T>::template store<C>(std::log(d));
    return;
  }
  const C log_d = std::log(d);
  for (std::int64_t i = 0; i < row.n; ++i) {
    const C x = load(i);
    row.y[i * row.y_stride] = Element<T>::template store<C>(p.op == Op::log_softmax ? x - log_d : std::exp(x) / d);
  }
}

template void naive_row(const Row<float>&, const RowParams&);
template void naive_row(const Row<double>&, const RowParams&);
template void naive_row(const Row<half>&, const RowParams&);
template void naive_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
