// Vectorised softmax along a non-last axis, without transposing: the lanes run across
// the contiguous inner dimension, so each lane is one column (one softmax) and each
// vector load takes one element of Lanes() neighbouring columns. The unit of work is a
// panel: `width` adjacent columns by `length` elements along the axis, whose rows are
// contiguous; execute.cpp sizes it so that its input and output stay in L2 between
// the passes where the axis is short enough.
//
// Per panel (f32_columns.cpp), each pass walking the panel a row at a time, in blocks
// of kColumnBlockRows rows whose per-column state stays in registers:
//  1. The max of every column (NaNs noted apart).
//  2. The sum of exp((x - m) / T): elements equal to the max add exactly 1 and are
//     counted apart from the others, which are summed in double lanes (compensated
//     for f64), so d - 1 is exact where the max dominates its column (as
//     ExactSum::minus_one keeps it for rows). Softmax stores each exp term: f32 and
//     f64 in y; 16-bit outputs (which cannot hold them), f32 outputs that stream and
//     f32 and f64 outputs whose rows crowd L1 sets with x's (rows a multiple of 4 KiB
//     apart) in a scratch panel of the thread's (bf16's times 2^64, for its output
//     pass's subnormal results); a panel with a lead or a trimmed end
//     (ColumnPanel::lead) never keeps them in y. With ColumnPanel::next_x, this pass
//     also fetches the next panel's input into L2.
//  3. Per column, vectorised: finish_row's non-finite cases (a NaN or +inf: NaN; all
//     -inf: the AllMasked policy), 1/d, or log(d) = log1p(d - 1) in double;
//     logsumexp writes m / T + log(d) here and stops.
//  4. Output, last row first (the rows read last are the likeliest still in cache):
//     softmax scales its terms by 1/d (one exp per element); log-softmax writes
//     (x - m) / T - log(d). Softmax's columns whose factor is NaN then get that NaN
//     in every row (the NaN of a product of two NaNs depends on operand order).
// The exp argument carries its rounding error (argument-inl.h), as in the row kernels.
//
// Panels too tall for L2 (ColumnParams::online, float lanes) take two passes instead,
// so that memory is read twice, not three times:
//  1. Online statistics (Milakov & Gimelshein's running (max, sum) per column): each
//     block of kColumnBlockRows rows is read from memory once (its max first, then
//     its terms from L1); where its max
//     raises a column's running max, the column's sums so far are scaled by
//     exp((m_old - m_new) / T) in double lanes (once per block, so the factor's
//     rounding, 1e-16, stays far below float's), then the block's terms are added.
//  2. Finish as above, then the output pass computes exp((x - m) / T) / d (or
//     log-softmax's difference) from x, last row first, optionally with streaming
//     stores (f32, f16 and bf16 outputs, whole cache lines).
// f64 panels keep the three passes: their bar leaves no room for a rounding per
// rescale.
//
// Every lane does the same arithmetic whatever panel, vector width or thread it lands
// in, so results do not depend on the panel width or the thread count (they may
// differ between Highway targets, within the bar).
#pragma once

#include <cstddef>

#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::cpu::simd {

// Rows of a panel that the statistics pass holds in registers at once.
inline constexpr std::size_t kColumnBlockRows = 8;

// `width` columns of `length` elements: column j's element i is x[i * x_stride + j].
// Softmax and log-softmax write y[i * y_stride + j]; logsumexp writes y[j].
// Any alignment and any strides (in elements); width and length >= 1.
template <class T>
struct ColumnPanel {
  const T* x;
  std::ptrdiff_t x_stride;
  T* y;
  std::ptrdiff_t y_stride;
  std::size_t width;
  std::size_t length;
  // The input of the panel the caller runs next (`next_width` columns of as many rows,
  // x_stride apart), or null: a three-pass panel fetches it into L2 during its sum
  // pass, so that the next panel's first pass, which reads memory, finds it there.
  const T* next_x = nullptr;
  std::size_t next_width = 0;
  // Where y's rows do not start at cache lines, the panels beside each other in a row
  // split lines between them: a streamed row stores its part lines through the cache,
  // read first from memory, and two threads may write one line. Panels can own whole
  // lines instead: a panel with a `lead` (at least a cache line of T) starts that many
  // columns before its own, computes their statistics again, and writes each row from
  // the last line boundary of y at or before its own first column (column `lead`);
  // with trims_end, up to the last line boundary at or before its end (the next
  // panel's row starts there), else to its end. Softmax and log-softmax only.
  std::size_t lead = 0;
  bool trims_end = false;
};

// What is the same for every panel of one call.
struct ColumnParams {
  Op op = Op::softmax;
  double inv_t = 1.0;  // 1 / temperature
  AllMasked all_masked = AllMasked::nan;
  bool online = false;             // two passes (see above); float lanes only
  Stores stores = Stores::cached;  // the output pass of f32, f16 and bf16 panels (never automatic)
};

// One panel, computed in f32 lanes (16-bit types are widened on load and rounded to
// nearest even on store; bf16 outputs keep float's subnormal results), or for f64 in
// f64 lanes (exp_f64-inl.h's exp, a compensated sum).
void columns(const ColumnPanel<float>& panel, const ColumnParams& params);
void columns(const ColumnPanel<half>& panel, const ColumnParams& params);
void columns(const ColumnPanel<bfloat16>& panel, const ColumnParams& params);
void columns(const ColumnPanel<double>& panel, const ColumnParams& params);

}  // namespace smax::cpu::simd
