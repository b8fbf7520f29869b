#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

namespace {

// The on-chip buffer of the 16-bit rows: kFusedMaxLength floats (64 KiB), one per
// thread, allocated once. It fits the L2 of every x86-64 and Arm server core.
float* fused_buffer() {
  thread_local std::vector<float> buffer(static_cast<std::size_t>(kFusedMaxLength));
  return buffer.data();
}

// f32, f16 and bf16 (contiguous rows; execute.cpp gathers the others): a short
// softmax row is done in registers; otherwise the max, then one pass that stores
// exp(z) and sums it, then a scaling pass, so each element's exp is computed once. The exps go to y itself for f32 (nothing else is written), to
// the float buffer for the 16-bit types. log_softmax and logsumexp need no exps kept:
// their passes are the shared ones.
template <class T>
void fused_row_simd(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const auto n = static_cast<std::size_t>(row.n);
  if (p.op == Op::softmax && n <= simd::f32_max_register_row() &&
      simd::f32_softmax_rows_in_registers(row.x, 1, row.y, 1, 1, n, p.inv_t) == 1) {
    return;
  }
  Stats<C> s;
  s.m = static_cast<C>(simd::f32_rmax(row.x, n));
  if (p.op != Op::softmax || !std::isfinite(s.m)) {
    if (std::isfinite(s.m)) sum_exp_pass(row.x, 1, 0, row.n, s.m, static_cast<C>(p.inv_t), PassOrder::forward, s.d);
    finish_row(row, p, s, [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, PassOrder::forward); });
    return;
  }
  float* e = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    e = row.y;
  } else {
    e = fused_buffer();
  }
  add_exp_sum(s.d, simd::f32_rstore_exp_minus_max(row.x, e, n, static_cast<float>(s.m), p.inv_t));
  finish_row(row, p, s, [&](const Normalizer<C>& f) { simd::f32_vscale(e, row.y, n, static_cast<float>(f.scale)); });
}

// f64: the same structure in double lanes (cpu/simd/f64_rows.hpp), the exps kept in y.
void fused_row_f64(const Row<double>& row, const RowParams& p) {
  const auto n = static_cast<std::size_t>(row.n);
  Stats<double> s;
  s.m = simd::f64_rmax(row.x, n);
  if (p.op != Op::softmax || !std::isfinite(s.m)) {
    if (std::isfinite(s.m)) sum_exp_pass(row.x, 1, 0, row.n, s.m, p.inv_t, PassOrder::forward, s.d);
    finish_row(row, p, s, [&](const Normalizer<double>& f) { write_pass(row, 0, row.n, f, PassOrder::forward); });
    return;
  }
  simd::f64_add_store_exp_minus_max(row.x, row.y, n, s.m, p.inv_t, s.d);
  finish_row(row, p, s, [&](const Normalizer<double>& f) { simd::f64_vscale(row.y, row.y, n, f.scale); });
}

}  // namespace

template <class T>
void fused_row(const Row<T>& row, const RowParams& p) {
  if constexpr (kSimdRows<T>) {
    fused_row_simd(row, p);
  } else {
    fused_row_f64(row, p);
  }
}

template void fused_row(const Row<float>&, const RowParams&);
template void fused_row(const Row<double>&, const RowParams&);
template void fused_row(const Row<half>&, const RowParams&);
template void fused_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
