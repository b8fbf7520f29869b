#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "core/cache_line.hpp"
#include "cpu/passes.hpp"
#include "cpu/variants.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

namespace {

inline constexpr std::uintptr_t kPageBytes = 4096;

// The on-chip buffer of the 16-bit rows: kFusedMaxLength floats (64 KiB), one per
// thread, allocated once, and a page more, so that each call can place it where it
// wants in a page (exps_buffer). It fits the L2 of every x86-64 and Arm server core.
float* fused_buffer_base() {
  thread_local const hwy::AlignedFreeUniquePtr<float[]> buffer =
      hwy::AllocateAligned<float>(static_cast<std::size_t>(kFusedMaxLength) + kPageBytes / sizeof(float));
  return buffer.get();
}

// The buffer half a page from x's first row in a page (addresses modulo 4096), aligned
// to a cache line: the exps stored there and loaded back never overlap that row's
// loads in the low address bits. A buffer 16 or 32 bytes below x's place made f32
// 65536 x 1024 from DRAM on two threads take 1.12-1.34x as long as one 1-3 KiB away;
// where Highway's allocator put it depended on the allocations before, so that two
// builds of the same code differed by 4-8% (docs/PERFORMANCE.md, thirty-third session).
template <class T>
float* fused_buffer(const T* x) {
  constexpr std::uintptr_t kLine = detail::kCacheLineBytes;
  float* const buffer = fused_buffer_base();
  const auto base = reinterpret_cast<std::uintptr_t>(buffer);
  const std::uintptr_t want = (reinterpret_cast<std::uintptr_t>(x) + kPageBytes / 2) / kLine * kLine;
  return buffer + (want - base) % kPageBytes / sizeof(float);
}

// The float exps of a 16-bit row, or of an f32 row whose output streams (written
// once, around the cache); other f32 rows keep theirs in y (nothing else is written).
template <class T>
float* exps_buffer(Stores stores, const T* x) {
  if constexpr (std::is_same_v<T, float>) {
    return stores == Stores::streaming ? fused_buffer(x) : nullptr;
  } else {
    return fused_buffer(x);
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
                                                          exps_buffer(stores, x), stores));
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
