// Vectorised row kernels of the training ops, over contiguous (unit stride) rows of
// f32, f16 or bf16, dispatched at run time to the best Highway target the CPU
// supports (gradient_rows.cpp). Each handles any n >= 0, any alignment and its tail
// without touching memory past the row. T is float, half or bfloat16.
//
// Accuracy: the sums add their terms (products of two floats, exact in double)
// plainly in double lanes for a few steps, then join a compensated (TwoSum) total, so
// their error is a few units of double's precision times the sum of the terms'
// magnitudes; the write passes run in float lanes with the sum s carried as three
// floats (dy - s stays exact where it cancels), and softmax's f32 pass redoes in
// double every vector whose float result could have left float's normal range;
// log-softmax's write pass redoes in double every vector where dy and exp(log_y) * S
// cancel too much for 1e-6; the cross-entropy gradient computes in float lanes with
// the kernels' exp (1.01 ulp), and in double where exps leave float's normal range.
// See docs/ARCHITECTURE.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smax/dtype.hpp"
#include "training/simd/gradient_columns.hpp"

namespace smax::training::simd {

// A sum as hi + lo, lo the rounding error of hi (to about twice double's
// precision). A non-finite sum is the plain IEEE sum in hi, with lo = 0.
struct SplitSum {
  double hi = 0;
  double lo = 0;
};

// The inputs of the row a caller will do next, which a pass pulls towards L2 while it
// runs, in step with its own progress: the next row's passes find their inputs in
// cache then, and the memory system would otherwise read nothing while this row's
// passes compute. A pass fetches bytes [begin, end) of each (clamped to `bytes`), so
// that a row's two passes can share the next row between them. A hint only
// (prefetches never fault or change a result); null pointers for none.
struct NextRow {
  const void* a = nullptr;
  const void* b = nullptr;
  std::size_t bytes = 0;  // of each
  std::size_t begin = 0;
  std::size_t end = static_cast<std::size_t>(-1);
};

// sum(y[i] * dy[i]), the products exact in double lanes, the sum compensated per
// block of a few vectors; `next` as above.
SplitSum sum_of_products(const float* y, const float* dy, std::size_t n, NextRow next = {});
SplitSum sum_of_products(const half* y, const half* dy, std::size_t n, NextRow next = {});
SplitSum sum_of_products(const bfloat16* y, const bfloat16* dy, std::size_t n, NextRow next = {});

// sum(v[i]) in double lanes, compensated per block of a few vectors; `next` as above.
SplitSum sum_of(const float* v, std::size_t n, NextRow next = {});
SplitSum sum_of(const half* v, std::size_t n, NextRow next = {});
SplitSum sum_of(const bfloat16* v, std::size_t n, NextRow next = {});

// dx[i] = y[i] * (dy[i] - s) * inv_t, rounded to T, with s = s.hi + s.lo. dx may be y
// or dy itself. With `stream`, whole vectors of dx at aligned addresses go out with
// streaming stores (around the cache; the same bits), unfenced: the caller fences
// (hwy::FlushStream) once its rows are done, before anything reads dx (a fence a row
// took short rows 3 to 4.5 times as long: f32 16384 x 100 from 86 to 286 ns a row).
void softmax_backward_write(const float* y, const float* dy, float* dx, std::size_t n, SplitSum s, double inv_t,
                            NextRow next = {}, bool stream = false);
void softmax_backward_write(const half* y, const half* dy, half* dx, std::size_t n, SplitSum s, double inv_t,
                            NextRow next = {}, bool stream = false);
void softmax_backward_write(const bfloat16* y, const bfloat16* dy, bfloat16* dx, std::size_t n, SplitSum s,
                            double inv_t, NextRow next = {}, bool stream = false);

// dx[i] = (dy[i] - exp(log_y[i]) * sum) * inv_t in double, with a double exp (0
// below DBL_MIN); an element whose log_y is not <= 0 (not a log-probability: NaN,
// positive) takes std::exp. dx may be log_y or dy itself. `stream` as above.
void log_softmax_backward_write(const float* log_y, const float* dy, float* dx, std::size_t n, double sum,
                                double inv_t, NextRow next = {}, bool stream = false);
void log_softmax_backward_write(const half* log_y, const half* dy, half* dx, std::size_t n, double sum,
                                double inv_t, NextRow next = {}, bool stream = false);
void log_softmax_backward_write(const bfloat16* log_y, const bfloat16* dy, bfloat16* dx, std::size_t n, double sum,
                                double inv_t, NextRow next = {}, bool stream = false);

// The backward passes over a batch of rows of n elements in one call (short rows,
// where a call a row cost more than the row's elements): row j's y (log_y) at y +
// rows.a[j], its dy at dy + rows.b[j], its dx at dx + rows.dx[j], each computed with
// the bits of the one-row kernels above (sum_of_products or sum_of, then the write
// pass; dx may be either input). `stream` as for the write passes: the caller fences.
// With next_row_bytes, a row's write pass fetches that many bytes of each input of a
// row after it (NextRow).
struct BackwardRows {
  const std::int64_t* a;
  const std::int64_t* b;
  const std::int64_t* dx;
  std::size_t next_row_bytes = 0;
};
void softmax_backward_rows(const float* y, const float* dy, float* dx, const BackwardRows& rows, std::size_t n,
                           std::size_t count, double inv_t, bool stream);
void softmax_backward_rows(const half* y, const half* dy, half* dx, const BackwardRows& rows, std::size_t n,
                           std::size_t count, double inv_t, bool stream);
void softmax_backward_rows(const bfloat16* y, const bfloat16* dy, bfloat16* dx, const BackwardRows& rows,
                           std::size_t n, std::size_t count, double inv_t, bool stream);
void log_softmax_backward_rows(const float* log_y, const float* dy, float* dx, const BackwardRows& rows,
                               std::size_t n, std::size_t count, double inv_t, bool stream);
void log_softmax_backward_rows(const half* log_y, const half* dy, half* dx, const BackwardRows& rows, std::size_t n,
                               std::size_t count, double inv_t, bool stream);
void log_softmax_backward_rows(const bfloat16* log_y, const bfloat16* dy, bfloat16* dx, const BackwardRows& rows,
                               std::size_t n, std::size_t count, double inv_t, bool stream);

// One cross-entropy row with a finite max m, and its coefficients a_c = spread * w_c
// (the target's own share is the caller's): grad[c] = (S * exp(x[c] - m) / d - a_c) *
// scale, where inv_d = 1 / d, S = coefficient_sum.
struct CrossEntropyRow {
  float m = 0;
  double coefficient_sum = 0;
  double inv_d = 0;
  double spread = 0;
  double scale = 1;
};

// Writes grad (unless null; it may be x itself) and returns sum_c w_c * (m - x[c])
// when `want_offsets` (0 otherwise). weight: the class weights (contiguous), or null
// for all ones. Elements with x[c] - m < -87 (whose exp is below float's normal
// range) are computed in double, as the scalar code does.
double cross_entropy_row(const float* x, float* grad, const float* weight, std::size_t n,
                         const CrossEntropyRow& row, bool want_offsets);
double cross_entropy_row(const half* x, half* grad, const half* weight, std::size_t n, const CrossEntropyRow& row,
                         bool want_offsets);
double cross_entropy_row(const bfloat16* x, bfloat16* grad, const bfloat16* weight, std::size_t n,
                         const CrossEntropyRow& row, bool want_offsets);

// Cross-entropy with each exp computed once, for rows whose logits and exps stay in
// cache between the two passes. The first pass keeps, for a block of at most
// kExpBlock elements with a finite max m_b, e[i] = exp(x[i] - m_b) (0 below float's
// normal range, the kernels' exp as in cross_entropy_row) and their sum, split as the
// forward kernels split it so that d - 1 stays exact: the elements equal to m_b add
// exactly 1 each and are counted, the others are summed (pairs in float, then in
// double lanes). Blocks of 4096: a block of f32 logits and its exps (32 KiB) stay in
// L1 between the block's max and its exps; against blocks of 2048, 2.4-4.7% faster a
// call in cache and 2.6-3.7% from DRAM, where 8192 added at most 2% more
// (docs/PERFORMANCE.md, twenty-first session).
inline constexpr std::size_t kExpBlock = 4096;
struct BlockExpSum {
  std::int64_t at_max = 0;
  double below_max = 0;
};
// `write_ahead` (or null): an array of n T whose lines are fetched for writing in
// step with the pass (the block's gradient, written by the second pass).
BlockExpSum store_exps(const float* x, float* e, std::size_t n, float block_max, float* write_ahead = nullptr);
BlockExpSum store_exps(const half* x, float* e, std::size_t n, float block_max, half* write_ahead = nullptr);
BlockExpSum store_exps(const bfloat16* x, float* e, std::size_t n, float block_max,
                       bfloat16* write_ahead = nullptr);
// store_exps, and beside it the max of the next block x_next[0, n_next) (n_next <= n;
// NaN if one is NaN, as cpu/simd's f32_rmax): its loads fill the cycles of the exps
// instead of taking a pass of their own.
struct BlockExpSumAndNextMax {
  BlockExpSum sum;
  float next_max = 0;
};
BlockExpSumAndNextMax store_exps_and_next_max(const float* x, float* e, std::size_t n, float block_max,
                                              float* write_ahead, const float* x_next, std::size_t n_next);
BlockExpSumAndNextMax store_exps_and_next_max(const half* x, float* e, std::size_t n, float block_max,
                                              half* write_ahead, const half* x_next, std::size_t n_next);
BlockExpSumAndNextMax store_exps_and_next_max(const bfloat16* x, float* e, std::size_t n, float block_max,
                                              bfloat16* write_ahead, const bfloat16* x_next, std::size_t n_next);

// The second pass over one such block: grad[c] = (S * e[c] * exp(m_b - m) / d - a_c) *
// scale, the rest as cross_entropy_row (x is read for the offsets, the weights, and
// the elements whose e is 0 but whose x is not -inf, which are redone in double). e
// may be grad itself when T is float (not with `stream`); `next` is a hint as for the
// backward passes. With `stream`, whole vectors of grad at aligned addresses go out
// with streaming stores, unfenced: the caller fences (hwy::FlushStream) once its row
// is done, before anything reads grad (a fence a block cost more than the streaming
// saved).
double cross_entropy_block_from_exps(const float* x, const float* e, float* grad, const float* weight, std::size_t n,
                                     float block_max, const CrossEntropyRow& row, bool want_offsets, NextRow next = {},
                                     bool stream = false);
double cross_entropy_block_from_exps(const half* x, const float* e, half* grad, const half* weight, std::size_t n,
                                     float block_max, const CrossEntropyRow& row, bool want_offsets, NextRow next = {},
                                     bool stream = false);
double cross_entropy_block_from_exps(const bfloat16* x, const float* e, bfloat16* grad, const bfloat16* weight,
                                     std::size_t n, float block_max, const CrossEntropyRow& row, bool want_offsets,
                                     NextRow next = {}, bool stream = false);

// Cross-entropy over a batch of short rows in one call (classification's 10 to 1000
// classes, where a call a row spent more on its dispatches, scalar merge and libm
// calls than on its elements): each sample's row is one block (n <= kExpBlock),
// computed as store_exps and cross_entropy_block_from_exps compute it. Sample j's
// logits start at x + x_rows[j], its gradient at grad + grad_rows[j], its exps at e +
// j * n; its per-sample values live in CrossEntropyColumns's arrays, and its terms
// between the two kernels come from gradient_columns.hpp's cross_entropy_column_terms
// and cross_entropy_column_target_gradients, in double lanes across the samples.
//   cross_entropy_rows_stats: m[j] (NaN where a logit is NaN), at_max[j], below[j],
//     and the exps of each row whose max is finite; the rows of `fetch` (fetch +
//     fetch_rows[j], or null: none) are fetched for writing in step with the exps;
//   cross_entropy_rows_write: the gradient of each row with a finite max that is not
//     ignored, every class taken as if it were not the target (the caller stores each
//     target's own, from target_grad), and spread_offsets[j] where spread != 0 (weight
//     as for cross_entropy_row). `stream` as for cross_entropy_block_from_exps: the
//     caller fences.
void cross_entropy_rows_stats(const float* x, const std::int64_t* x_rows, float* e, float* fetch,
                              const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p);
void cross_entropy_rows_stats(const half* x, const std::int64_t* x_rows, float* e, half* fetch,
                              const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p);
void cross_entropy_rows_stats(const bfloat16* x, const std::int64_t* x_rows, float* e, bfloat16* fetch,
                              const std::int64_t* fetch_rows, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p);
// The log-probabilities of each row j, (x - m[j]) - log_d[j] in double rounded once to
// T (as the scalar rows compute them), NaN where m[j] is not finite; out may be x.
void cross_entropy_rows_log_prob(const float* x, const std::int64_t* x_rows, float* out, const std::int64_t* out_rows,
                                 std::size_t n, std::size_t rows, const double* m, const double* log_d);
void cross_entropy_rows_log_prob(const half* x, const std::int64_t* x_rows, half* out, const std::int64_t* out_rows,
                                 std::size_t n, std::size_t rows, const double* m, const double* log_d);
void cross_entropy_rows_log_prob(const bfloat16* x, const std::int64_t* x_rows, bfloat16* out,
                                 const std::int64_t* out_rows, std::size_t n, std::size_t rows, const double* m,
                                 const double* log_d);
void cross_entropy_rows_write(const float* x, const std::int64_t* x_rows, const float* e, float* grad,
                              const std::int64_t* grad_rows, const float* weight, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p, bool stream);
void cross_entropy_rows_write(const half* x, const std::int64_t* x_rows, const float* e, half* grad,
                              const std::int64_t* grad_rows, const half* weight, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p, bool stream);
void cross_entropy_rows_write(const bfloat16* x, const std::int64_t* x_rows, const float* e, bfloat16* grad,
                              const std::int64_t* grad_rows, const bfloat16* weight, std::size_t n, std::size_t rows,
                              const CrossEntropyColumns& p, bool stream);

}  // namespace smax::training::simd
