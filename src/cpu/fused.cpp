#include <limits>
#include <type_traits>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

namespace {

// The on-chip buffer of the 16-bit rows: kFusedMaxLength floats (64 KiB), one per
// thread, allocated once. It fits the L2 of every x86-64 and Arm server core. Aligned
// to the vector, so that no store of an exp crosses a cache line (a heap block of
// std::vector lies 16 bytes off).
float* fused_buffer() {
  thread_local const hwy::AlignedFreeUniquePtr<float[]> buffer =
      hwy::AllocateAligned<float>(static_cast<std::size_t>(kFusedMaxLength));
  return buffer.get();
}

// The float exps of a 16-bit row, or of an f32 row whose output streams (written
// once, around the cache); other f32 rows keep theirs in y (nothing else is written).
template <class T>
float* exps_buffer(Stores stores) {
  if constexpr (std::is_same_v<T, float>) {
    return stores == Stores::streaming ? fused_buffer() : nullptr;
  } else {
    return fused_buffer();
  }
}

// Streaming needs the buffer, which holds kFusedMaxLength floats.
Stores stores_for(std::int64_t n, Stores stores) {
  return n <= kFusedMaxLength ? stores : Stores::cached;
}

// f32, f16 and bf16 (contiguous rows; execute.cpp gathers the others): softmax and
// log_softmax rows with a finite max go to the vectorised kernels (fused_rows).
// logsumexp and rows with a non-finite max take the shared passes.
template <class T>
void fused_row_simd(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const auto n = static_cast<std::size_t>(row.n);
  if ((p.op == Op::softmax || p.op == Op::log_softmax) &&
      fused_rows(p.op, row.x, 1, row.y, 1, 1, row.n, p.inv_t, p.stores) == 1) {
    return;
  }
  Stats<C> s;
  s.m = static_cast<C>(simd::f32_rmax(row.x, n));
  if (std::isfinite(s.m)) sum_exp_pass(row.x, 1, 0, row.n, s.m, static_cast<C>(p.inv_t), PassOrder::forward, s.d);
  finish_row(row, p, s, [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, PassOrder::forward, p.stores); });
}

// f64: the same structure in double lanes (cpu/simd/f64_rows.hpp), the exps kept in y.
void fused_row_f64(const Row<double>& row, const RowParams& p) {
  const auto n = static_cast<std::size_t>(row.n);
  Stats<double> s;
  s.m = simd::f64_rmax(row.x, n);
  if (p.op != Op::softmax || !std::isfinite(s.m)) {
    if (std::isfinite(s.m)) sum_exp_pass(row.x, 1, 0, row.n, s.m, p.inv_t, PassOrder::forward, s.d);
    finish_row(row, p, s,
               [&](const Normalizer<double>& f) { write_pass(row, 0, row.n, f, PassOrder::forward, p.stores); });
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

template <class T>
std::int64_t fused_rows(Op op, const T* x, std::int64_t x_row_stride, T* y, std::int64_t y_row_stride,
                        std::int64_t rows, std::int64_t n, double inv_t, Stores stores) {
  stores = stores_for(n, stores);
  const auto count = static_cast<std::size_t>(rows);
  const auto length = static_cast<std::size_t>(n);
  if (op == Op::log_softmax) {
    return static_cast<std::int64_t>(
        simd::f32_log_softmax_rows(x, x_row_stride, y, y_row_stride, count, length, inv_t, stores));
  }
  return static_cast<std::int64_t>(simd::f32_softmax_rows(x, x_row_stride, y, y_row_stride, count, length, inv_t,
                                                          exps_buffer<T>(stores), stores));
}

template std::int64_t fused_rows(Op, const float*, std::int64_t, float*, std::int64_t, std::int64_t, std::int64_t,
                                 double, Stores);
template std::int64_t fused_rows(Op, const half*, std::int64_t, half*, std::int64_t, std::int64_t, std::int64_t,
                                 double, Stores);
template std::int64_t fused_rows(Op, const bfloat16*, std::int64_t, bfloat16*, std::int64_t, std::int64_t,
                                 std::int64_t, double, Stores);

template void fused_row(const Row<float>&, const RowParams&);
template void fused_row(const Row<double>&, const RowParams&);
template void fused_row(const Row<half>&, const RowParams&);
template void fused_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
