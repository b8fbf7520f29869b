#include <limits>
#include <vector>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

// The on-chip buffer: kFusedMaxLength values of the compute type (128 KiB of double
// for f32 rows, 64 KiB of float for f16/bf16), one per thread, allocated once. It
// fits the L2 of every x86-64 and Arm server core.
template <class C>
C* fused_buffer() {
  thread_local std::vector<C> buffer(static_cast<std::size_t>(kFusedMaxLength));
  return buffer.data();
}

template <class T>
void fused_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);
  const std::int64_t n = row.n;
  C* buf = fused_buffer<C>();

  // The only read of the row.
  for (std::int64_t i = 0; i < n; ++i) buf[i] = Element<T>::template load<C>(row.x[i * row.x_stride]);

  Stats<C> s;
  s.m = max_pass(buf, 1, 0, n, -std::numeric_limits<C>::infinity());
  if (std::isfinite(s.m) && p.op == Op::softmax) {
    // Keep exp(z) in the buffer: the write below only scales it.
    for (std::int64_t i = 0; i < n; ++i) {
      buf[i] = std::exp((buf[i] - s.m) * inv_t);
      s.d.add(static_cast<double>(buf[i]));
    }
  } else if (std::isfinite(s.m)) {
    sum_exp_pass(buf, 1, 0, n, s.m, inv_t, PassOrder::forward, s.d);
  }

  // The only write of the row.
  finish_row(row, p, s, [&](const Normalizer<C>& f) {
    for (std::int64_t i = 0; i < n; ++i) {
      const C v = p.op == Op::softmax ? buf[i] * f.scale : f(buf[i]);
      row.y[i * row.y_stride] = Element<T>::template store<C>(v);
    }
  });
}

template void fused_row(const Row<float>&, const RowParams&);
template void fused_row(const Row<double>&, const RowParams&);
template void fused_row(const Row<half>&, const RowParams&);
template void fused_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
