#include "cpu/execute.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/cache_line.hpp"
#include "core/parallel.hpp"
#include "cpu/cancelling_logsumexp.hpp"
#include "cpu/simd/f32_columns.hpp"
#include "cpu/passes.hpp"
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

// The vectorised kernels need unit strides. A strided row is gathered into a
// contiguous buffer, run there and scattered back, so that every layout of the same
// values runs the same code and gives the same bits (and a strided row is read from
// memory once).
template <class T>
void run_row(RowKernel<T> kernel, const Row<T>& row, const RowParams& params) {
  const bool writes_row = params.op != Op::logsumexp;
  if (row.x_stride != 1 || (writes_row && row.y_stride != 1)) {
    thread_local std::vector<T> x_buffer;
    thread_local std::vector<T> y_buffer;
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
  kernel(row, params);
}

// Contiguous softmax and log_softmax rows at one row stride (a contiguous batch:
// attention scores, classifier outputs) under fused: a thread's rows go to the
// kernels in one call (fused_rows). A row it leaves (a non-finite max) runs through
// fused_row, and the call goes on after it.
template <class T>
bool run_fused_rows(const detail::Problem& p, RowKernel<T> kernel, const RowParams& params, std::int64_t begin,
                    std::int64_t end) {
  if constexpr (kSimdRows<T>) {
    const bool has_rows_kernel = params.op == Op::softmax || params.op == Op::log_softmax;
    if (kernel != &fused_row<T> || !has_rows_kernel || p.batch_rank > 1 || p.x_axis_stride != 1 ||
        p.y_axis_stride != 1) {
      return false;
    }
    const auto* x = reinterpret_cast<const T*>(p.x);
    auto* y = reinterpret_cast<T*>(p.y);
    const std::int64_t xs = p.batch_rank == 1 ? p.x_batch_strides[0] : 0;
    const std::int64_t ys = p.batch_rank == 1 ? p.y_batch_strides[0] : 0;
    for (std::int64_t r = begin; r < end;) {
      r += fused_rows(params.op, x + r * xs, xs, y + r * ys, ys, end - r, p.length, params.inv_t, params.stores);
      if (r < end) {
        kernel(Row<T>{x + r * xs, 1, y + r * ys, 1, p.length}, params);
        ++r;
      }
    }
    return true;
  }
  return false;
}

// Rows [begin, end) of the problem, walking the batch index like an odometer.
template <class T>
void run_rows(const detail::Problem& p, RowKernel<T> kernel, const RowParams& params, std::int64_t begin,
              std::int64_t end) {
  if (run_fused_rows(p, kernel, params, begin, end)) return;
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

// ---- Non-last axes: column panels ------------------------------------------------
// A strided axis whose problem has a batch dimension of unit stride in both x and y
// (the contiguous inner dimension, detail::column_dim) runs as column panels
// (cpu/simd/f32_columns.hpp) of the plan's panel_width (planner.cpp): lanes across that
// dimension, each lane one softmax, no gather and no transpose.
// Every algorithm but naive (safe, fused, tiled, online, and auto's choice among them)
// maps to the panel kernel there: it computes what they compute (the max, the exact
// sum, the same exp), and its passes over a cache-sized panel are what suits columns,
// whose elements lie a row apart; online (and auto for panels beyond L2) takes its
// two-pass form. naive keeps its textbook rows (it overflows on purpose).

struct ColumnSplit {
  int inner = -1;                // the batch dimension of unit stride
  std::int64_t width = 0;        // columns per panel
  std::int64_t panels = 0;       // panels across the inner dimension
  std::int64_t outer_count = 0;  // the other batch dimensions' elements
  // Columns that each panel but a row's first also takes of the panel before it, so
  // that the panels own whole cache lines of y (simd::ColumnPanel::lead), or 0.
  std::int64_t lead = 0;
};

// The lead of a split's panels: a line of T where streamed rows of y would split cache
// lines between panels (the panels' first columns do not all start at a line), else 0.
// On the Zen 4 VM, streamed f32 [32, 81, 8732] along axis 1 (rows 48 bytes past a line
// apart) took about 1.15x the time an element of 8720's without it and ran 1.11x (one
// thread) and 1.06x (two) as fast with it (docs/PERFORMANCE.md, forty-third session).
// Cached rows lose less to the split lines, and f32 three-pass panels with a lead
// cannot keep their terms in y; they keep no lead.
template <class T>
std::int64_t panel_lead(const detail::Problem& p, const detail::Plan& plan, const ColumnSplit& s) {
  constexpr auto kLineBytes = static_cast<std::int64_t>(detail::kCacheLineBytes);
  constexpr std::int64_t kLine = kLineBytes / static_cast<std::int64_t>(sizeof(T));
  const std::int64_t inner_extent = p.batch_shape[static_cast<std::size_t>(s.inner)];
  // In place, a panel's lead columns would be read after the panel before it wrote
  // them (the API allows no other overlap of x and y).
  const bool in_place = p.x == p.y;
  if (in_place || !detail::panels_may_take_lead(p.op, plan, inner_extent, static_cast<std::int64_t>(sizeof(T)))) {
    return 0;
  }
  const auto at_lines = [](std::int64_t elements) {
    return elements * static_cast<std::int64_t>(sizeof(T)) % kLineBytes == 0;
  };
  bool lines_apart = reinterpret_cast<std::uintptr_t>(p.y) % kLineBytes == 0 && at_lines(p.y_axis_stride) &&
                     at_lines(s.width);
  for (int d = 0; d < p.batch_rank; ++d) {
    if (d != s.inner) lines_apart = lines_apart && at_lines(p.y_batch_strides[static_cast<std::size_t>(d)]);
  }
  return lines_apart ? 0 : kLine;
}

// The panels the plan asked for, across the problem's contiguous batch dimension.
template <class T>
std::optional<ColumnSplit> column_split(const detail::Problem& p, const detail::Plan& plan) {
  const int inner = detail::column_dim(p);
  if (plan.panel_width <= 0 || inner < 0) return std::nullopt;
  const std::int64_t extent = p.batch_shape[static_cast<std::size_t>(inner)];
  ColumnSplit s;
  s.inner = inner;
  s.width = plan.panel_width;
  s.panels = (extent + s.width - 1) / s.width;
  s.outer_count = p.rows / extent;
  s.lead = panel_lead<T>(p, plan, s);
  return s;
}

// The columns of a 16-bit logsumexp panel whose result nearly cancelled, taken again
// (cancelling_logsumexp.hpp).
template <class T>
void refine_cancelling_logsumexp(const simd::ColumnPanel<T>& panel, double inv_t) {
  const auto length = static_cast<std::int64_t>(panel.length);
  for (std::size_t j = 0; j < panel.width; ++j) {
    const double lse = Element<T>::template load<double>(panel.y[j]);
    const double checked = without_cancellation(lse, panel.x + j, panel.x_stride, length, inv_t);
    if (checked != lse) panel.y[j] = Element<T>::template store<double>(checked);
  }
}

// Panels [begin, end) of the outer_count x panels that the split makes, in order;
// with fetch_next (Plan::fetch_next_panel), each fetches the next one's input.
template <class T>
void run_panels(const detail::Problem& p, const ColumnSplit& split, const simd::ColumnParams& params,
                bool fetch_next, std::int64_t begin, std::int64_t end) {
  const auto* x = reinterpret_cast<const T*>(p.x);
  auto* y = reinterpret_cast<T*>(p.y);
  const std::int64_t inner_extent = p.batch_shape[static_cast<std::size_t>(split.inner)];
  auto panel_at = [&](std::int64_t u) {
    std::int64_t rest = u / split.panels;
    std::int64_t x_offset = 0;
    std::int64_t y_offset = 0;
    for (int d = p.batch_rank - 1; d >= 0; --d) {
      if (d == split.inner) continue;
      const auto k = static_cast<std::size_t>(d);
      const std::int64_t index = rest % p.batch_shape[k];
      rest /= p.batch_shape[k];
      x_offset += index * p.x_batch_strides[k];
      y_offset += index * p.y_batch_strides[k];
    }
    const std::int64_t first = (u % split.panels) * split.width;
    const std::int64_t lead = first > 0 ? split.lead : 0;
    const std::int64_t width = std::min(split.width, inner_extent - first) + lead;
    simd::ColumnPanel<T> panel{x + x_offset + first - lead, p.x_axis_stride, y + y_offset + first - lead,
                               p.y_axis_stride, static_cast<std::size_t>(width), static_cast<std::size_t>(p.length)};
    panel.lead = static_cast<std::size_t>(lead);
    panel.trims_end = split.lead > 0 && first + split.width < inner_extent;
    return panel;
  };
  if (begin >= end) return;
  simd::ColumnPanel<T> panel = panel_at(begin);
  for (std::int64_t u = begin; u < end; ++u) {
    const bool last = u + 1 == end;
    const simd::ColumnPanel<T> next = last ? panel : panel_at(u + 1);
    if (fetch_next && !last) {
      panel.next_x = next.x;
      panel.next_width = next.width;
    }
    simd::columns(panel, params);
    if constexpr (kSixteenBit<T>) {
      if (params.op == Op::logsumexp) refine_cancelling_logsumexp(panel, params.inv_t);
    }
    panel = next;
  }
}

template <class T>
void run_columns(const detail::Problem& p, const detail::Plan& plan, const ColumnSplit& split) {
  const simd::ColumnParams params{p.op, p.inv_temperature, p.all_masked, plan.algorithm == Algorithm::online,
                                   plan.stores};
  const std::int64_t units = split.outer_count * split.panels;
  const int threads = static_cast<int>(std::min<std::int64_t>(plan.threads, units));
  detail::for_each_share(units, threads, [&](detail::Share share) {
    run_panels<T>(p, split, params, plan.fetch_next_panel, share.begin, share.end);
  });
}

template <class T>
void execute_typed(const detail::Problem& p, const detail::Plan& plan) {
  if (const std::optional<ColumnSplit> split = column_split<T>(p, plan)) {
    run_columns<T>(p, plan, *split);
    return;
  }
  const RowKernel<T> kernel = plan.chunk > 0 ? &split_row<T> : kernel_for<T>(plan.algorithm);
  RowParams params{p.op, p.inv_temperature, p.all_masked, plan.order, plan.block, plan.chunk, 1,
                   plan.algorithm == Algorithm::fused,
                   plan.stores};
  if (plan.chunk > 0 && p.rows < plan.threads) {
    // Fewer rows than threads: the threads share each row's chunks, one row at a time.
    params.row_threads = plan.threads;
    run_rows<T>(p, kernel, params, 0, p.rows);
    return;
  }
  detail::for_each_share(p.rows, plan.threads,
                         [&](detail::Share share) { run_rows<T>(p, kernel, params, share.begin, share.end); });
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
