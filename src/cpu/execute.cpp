#include "cpu/execute.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "cpu/split_row.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {
namespace {

template <class T>
using RowKernel = void (*)(const Row<T>&, const RowParams&);

template <class T>
RowKernel<T> kernel_for(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::naive: return &naive_row<T>;
    case Algorithm::fused: return &fused_row<T>;
    case Algorithm::tiled: return &tiled_row<T>;
    case Algorithm::online: return &online_row<T>;
    case Algorithm::safe:
    case Algorithm::automatic: break;  // the planner never leaves automatic
  }
  return &safe_row<T>;
}

// The vectorised f32 kernels need unit strides. A strided f32 row is gathered into a
// contiguous buffer, run there and scattered back, so that every layout of the same
// values runs the same code and gives the same bits (and a strided row is read from
// memory once).
template <class T>
void run_row(RowKernel<T> kernel, const Row<T>& row, const RowParams& params) {
  if constexpr (std::is_same_v<T, float>) {
    const bool writes_row = params.op != Op::logsumexp;
    if (row.x_stride != 1 || (writes_row && row.y_stride != 1)) {
      thread_local std::vector<float> x_buffer;
      thread_local std::vector<float> y_buffer;
      const auto n = static_cast<std::size_t>(row.n);
      x_buffer.resize(n);
      for (std::size_t i = 0; i < n; ++i) x_buffer[i] = row.x[static_cast<std::ptrdiff_t>(i) * row.x_stride];
      if (!writes_row) {
        kernel(Row<T>{x_buffer.data(), 1, row.y, 0, row.n}, params);
        return;
      }
      y_buffer.resize(n);
      kernel(Row<T>{x_buffer.data(), 1, y_buffer.data(), 1, row.n}, params);
      for (std::size_t i = 0; i < n; ++i) row.y[static_cast<std::ptrdiff_t>(i) * row.y_stride] = y_buffer[i];
      return;
    }
  }
  kernel(row, params);
}

// Rows [begin, end) of the problem, walking the batch index like an odometer.
template <class T>
void run_rows(const detail::Problem& p, RowKernel<T> kernel, const RowParams& params, std::int64_t begin,
              std::int64_t end) {
  const auto* x = reinterpret_cast<const T*>(p.x);
  auto* y = reinterpret_cast<T*>(p.y);
  std::array<std::int64_t, kMaxRank> index{};
  std::int64_t x_offset = 0;
  std::int64_t y_offset = 0;
  std::int64_t rest = begin;
  for (int d = p.batch_rank - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    index[k] = rest % p.batch_shape[k];
    rest /= p.batch_shape[k];
    x_offset += index[k] * p.x_batch_strides[k];
    y_offset += index[k] * p.y_batch_strides[k];
  }
  for (std::int64_t r = begin; r < end; ++r) {
    run_row(kernel, Row<T>{x + x_offset, p.x_axis_stride, y + y_offset, p.y_axis_stride, p.length}, params);
    for (int d = p.batch_rank - 1; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      x_offset += p.x_batch_strides[k];
      y_offset += p.y_batch_strides[k];
      if (++index[k] < p.batch_shape[k]) break;
      x_offset -= index[k] * p.x_batch_strides[k];
      y_offset -= index[k] * p.y_batch_strides[k];
      index[k] = 0;
    }
  }
}

template <class T>
void execute_typed(const detail::Problem& p, const detail::Plan& plan) {
  const RowKernel<T> kernel = plan.chunk > 0 ? &split_row<T> : kernel_for<T>(plan.algorithm);
  RowParams params{p.op, p.inv_temperature, p.all_masked, plan.order, plan.block, plan.chunk, 1};
  if (plan.chunk > 0 && p.rows < plan.threads) {
    // Fewer rows than threads: the threads share each row's chunks, one row at a time.
    params.row_threads = plan.threads;
    run_rows<T>(p, kernel, params, 0, p.rows);
    return;
  }
  if (plan.threads <= 1) {
    run_rows<T>(p, kernel, params, 0, p.rows);
    return;
  }
#pragma omp parallel num_threads(plan.threads)
  {
    // A fixed contiguous share of the rows per thread.
    const std::int64_t t = omp_get_thread_num();
    const std::int64_t nt = omp_get_num_threads();
    const std::int64_t share = p.rows / nt;
    const std::int64_t extra = p.rows % nt;
    const std::int64_t begin = t * share + std::min(t, extra);
    const std::int64_t end = begin + share + (t < extra ? 1 : 0);
    run_rows<T>(p, kernel, params, begin, end);
  }
}

}  // namespace

void execute(const detail::Problem& p, const detail::Plan& plan) {
  if (p.rows == 0 || (p.length == 0 && p.op != Op::logsumexp)) return;
  switch (p.dtype) {
    case DType::f32: return execute_typed<float>(p, plan);
    case DType::f64: return execute_typed<double>(p, plan);
    case DType::f16: return execute_typed<half>(p, plan);
    case DType::bf16: return execute_typed<bfloat16>(p, plan);
  }
}

}  // namespace smax::cpu
