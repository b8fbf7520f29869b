#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

namespace {

// The on-chip buffer: kFusedMaxLength values (64 KiB of float for f32, f16 and bf16
// rows, 128 KiB of double for f64), one per thread, allocated once. It fits the L2 of
// every x86-64 and Arm server core.
template <class C>
C* fused_buffer() {
  thread_local std::vector<C> buffer(static_cast<std::size_t>(kFusedMaxLength));
  return buffer.data();
}

// f32: the buffer holds the row as loaded, and the vectorised passes (passes.hpp)
// run over it: max, sum of exp, then the write from the buffer.
void fused_row_f32(const Row<float>& row, const RowParams& p) {
  using C = Element<float>::Compute;
  const std::int64_t n = row.n;
  float* buf = fused_buffer<float>();
  for (std::int64_t i = 0; i < n; ++i) buf[i] = row.x[i * row.x_stride];  // the only read of the row

  Stats<C> s;
  s.m = max_pass(buf, 1, 0, n, -std::numeric_limits<C>::infinity());
  if (std::isfinite(s.m)) sum_exp_pass(buf, 1, 0, n, s.m, static_cast<C>(p.inv_t), PassOrder::forward, s.d);
  const Row<float> from_buffer{buf, 1, row.y, row.y_stride, n};
  finish_row(row, p, s, [&](const Normalizer<C>& f) { write_pass(from_buffer, 0, n, f, PassOrder::forward); });
}

// f64, f16, bf16: the buffer holds the compute type, and keeps exp(z) for the write.
template <class T>
void fused_row_scalar(const Row<T>& row, const RowParams& p) {
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

}  // namespace

template <class T>
void fused_row(const Row<T>& row, const RowParams& p) {
  if constexpr (std::is_same_v<T, float>) {
    fused_row_f32(row, p);
  } else {
    fused_row_scalar(row, p);
  }
}

template void fused_row(const Row<float>&, const RowParams&);
template void fused_row(const Row<double>&, const RowParams&);
template void fused_row(const Row<half>&, const RowParams&);
template void fused_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
