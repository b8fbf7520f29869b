#include "cpu/execute.hpp"

#include <omp.h>

#include <algorithm>
#include <array>

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
    kernel(Row<T>{x + x_offset, p.x_axis_stride, y + y_offset, p.y_axis_stride, p.length}, params);
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
