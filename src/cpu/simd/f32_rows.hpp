// Vectorised passes over contiguous rows (unit stride) of f32, f16 or bf16, all
// computed in f32 lanes, dispatched at run time to the best Highway target the CPU
// supports (f32_rows.cpp). Plain functions over a pointer and a length; each handles
// any n >= 0, any alignment, and its tail with masked or buffered loads and stores
// (no scalar remainder loop). T is float, half or bfloat16.
//
// Accuracy: with T == 1 (|m| <= 16384, FMA targets), x - m goes into the exp's range reduction
// without rounding (exp_minus_max-inl.h: within 2.5 ulp, exactly 1 at the max);
// otherwise the exp argument z = (x - m) / T is computed in float together with its
// rounding error z_lo (the exact error of x - m, the exact error of the product by
// 1/T, and 1/T carried as a double-float), and exp(z + z_lo) is evaluated to within
// 1.01 ulp. Sums add pairs of terms in float and accumulate them in double lanes. Results below the smallest normal float
// flush to 0, except for bf16 rows, whose outputs reach float's subnormals.
// See docs/ARCHITECTURE.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smax/dtype.hpp"
#include "smax/options.hpp"

namespace smax::cpu::simd {

// sum(exp((x[i] - m) * inv_t)), split so that d - 1 stays exact when the max
// dominates: the elements equal to the max add exactly 1 each and are counted, the
// others are summed in double. `at_max + below_max` is the sum.
struct ExpSum {
  std::int64_t at_max = 0;
  double below_max = 0;
  // The exps a pass stored (f32_rstore_exp_minus_max) are this times exp((x - m) *
  // inv_t): 2^64 for bf16 rows (never subnormal, so that their table exp keeps bf16's
  // subnormal outputs), else 1. The sum is of the exps themselves, without it.
  double stored_scale = 1;
};

// Memory a pass fetches into cache while it computes, spread over its steps: the
// span of the same length that the caller will pass over next (the next chunk or
// row; x to read, y to write; either may be null). Prefetches never fault, so the
// span may run past the end of an allocation.
template <class T>
struct Ahead {
  const T* x = nullptr;
  T* y = nullptr;
};

// max(x[0..n)), NaN if any element is NaN; -inf for n == 0.
float f32_rmax(const float* x, std::size_t n);
float f32_rmax(const half* x, std::size_t n);
float f32_rmax(const bfloat16* x, std::size_t n);

// The sum of exp((x[i] - m) * inv_t) over [0, n). m must be finite and >= every x[i];
// elements equal to -inf add 0. With count_at_max the terms at the max are counted in
// at_max (for log_softmax and logsumexp); otherwise everything is in below_max.
// `backward` walks from the end to the start.
ExpSum f32_rsum_exp_minus_max(const float* x, std::size_t n, float m, double inv_t, bool count_at_max,
                              bool backward, const Ahead<float>& ahead = {});
ExpSum f32_rsum_exp_minus_max(const half* x, std::size_t n, float m, double inv_t, bool count_at_max, bool backward,
                              const Ahead<half>& ahead = {});
ExpSum f32_rsum_exp_minus_max(const bfloat16* x, std::size_t n, float m, double inv_t, bool count_at_max,
                              bool backward, const Ahead<bfloat16>& ahead = {});

// f32_rsum_exp_minus_max forward, and beside it the max of x_next[0, n_next) (NaN if
// one is NaN; n_next <= n): a split row's next chunk, whose loads fill the cycles of
// the exps instead of taking a pass of their own.
struct ExpSumAndNextMax {
  ExpSum sum;
  float next_max = 0;
};
ExpSumAndNextMax f32_rsum_exp_minus_max_and_next_max(const float* x, std::size_t n, float m, double inv_t,
                                                     bool count_at_max, const float* x_next, std::size_t n_next);
ExpSumAndNextMax f32_rsum_exp_minus_max_and_next_max(const half* x, std::size_t n, float m, double inv_t,
                                                     bool count_at_max, const half* x_next, std::size_t n_next);
ExpSumAndNextMax f32_rsum_exp_minus_max_and_next_max(const bfloat16* x, std::size_t n, float m, double inv_t,
                                                     bool count_at_max, const bfloat16* x_next,
                                                     std::size_t n_next);
// The fused variant's middle pass: e[i] = exp((x[i] - m) * inv_t) (times the result's
// stored_scale), and their sum (all of it in below_max: softmax needs no exact d - 1).
// e may be x itself for float rows.
ExpSum f32_rstore_exp_minus_max(const float* x, float* e, std::size_t n, float m, double inv_t,
                                const Ahead<float>& ahead = {});
ExpSum f32_rstore_exp_minus_max(const half* x, float* e, std::size_t n, float m, double inv_t,
                                const Ahead<half>& ahead = {});
ExpSum f32_rstore_exp_minus_max(const bfloat16* x, float* e, std::size_t n, float m, double inv_t,
                                const Ahead<bfloat16>& ahead = {});

// The fused chunks' passes without a max pass: e[i] = exp((x[i] - g) * inv_t) with g
// the max of a first stretch of x, the sum of the e[i], and m = max(x[0..n)) found
// beside them. ok is false where that cannot stand (a NaN or an infinity in x, or m
// too far above g); e then holds anything, and the caller takes the max pass and
// f32_rstore_exp_minus_max.
struct GuessedExpSum {
  bool ok = false;
  float g = 0;
  float m = 0;
  ExpSum sum;
};
GuessedExpSum f32_rstore_exp_from_guess(const float* x, float* e, std::size_t n, double inv_t,
                                        const Ahead<float>& ahead = {});
GuessedExpSum f32_rstore_exp_from_guess(const half* x, float* e, std::size_t n, double inv_t,
                                        const Ahead<half>& ahead = {});
GuessedExpSum f32_rstore_exp_from_guess(const bfloat16* x, float* e, std::size_t n, double inv_t,
                                        const Ahead<bfloat16>& ahead = {});
// The same without the exps: their sum (softmax's d, against g) and m.
GuessedExpSum f32_rsum_exp_from_guess(const float* x, std::size_t n, double inv_t, const Ahead<float>& ahead = {});
GuessedExpSum f32_rsum_exp_from_guess(const half* x, std::size_t n, double inv_t, const Ahead<half>& ahead = {});
GuessedExpSum f32_rsum_exp_from_guess(const bfloat16* x, std::size_t n, double inv_t,
                                      const Ahead<bfloat16>& ahead = {});

// The whole softmax of contiguous rows [0, rows) at the given row strides (elements),
// in one call: rows of up to 16 vectors (256 floats with AVX-512, 128 with AVX2) are
// held in registers (each element read once and written once); longer ones take the
// fused passes (the max; the exps stored, to y for float rows or to `buffer`, of
// kFusedMaxLength floats, for 16-bit ones and for float rows with Stores::streaming,
// whose scaling pass then runs inside the next row's exp pass; then scaled).
// Rows of at most two vectors go a vector's lanes of rows at a time, a row to a lane,
// on AVX-512 and AVX2 (rows_across_lanes-inl.h), which also leaves a max beyond its
// exp's range (m / T within 600 in size on AVX-512, 16384 on AVX2).
// Returns the number of leading rows done: fewer than `rows` where a row's max is not
// finite (NaN, +inf, all -inf), which is left unwritten for the general path.
std::size_t f32_softmax_rows(const float* x, std::ptrdiff_t x_row_stride, float* y, std::ptrdiff_t y_row_stride,
                             std::size_t rows, std::size_t n, double inv_t, float* buffer,
                             Stores stores = Stores::cached);
std::size_t f32_softmax_rows(const half* x, std::ptrdiff_t x_row_stride, half* y, std::ptrdiff_t y_row_stride,
                             std::size_t rows, std::size_t n, double inv_t, float* buffer,
                             Stores stores = Stores::cached);
std::size_t f32_softmax_rows(const bfloat16* x, std::ptrdiff_t x_row_stride, bfloat16* y,
                             std::ptrdiff_t y_row_stride, std::size_t rows, std::size_t n, double inv_t,
                             float* buffer, Stores stores = Stores::cached);

// The same for log_softmax: rows of at most two vectors across lanes, rows of up to
// 16 vectors in registers (a group of rows sharing one vector log1p), others by the
// sum (the terms at the max counted apart, so that log(d) = log1p(d - 1) keeps a
// dominant max's tiny rest) and the write pass, which finds the next row's max.
std::size_t f32_log_softmax_rows(const float* x, std::ptrdiff_t x_row_stride, float* y, std::ptrdiff_t y_row_stride,
                                 std::size_t rows, std::size_t n, double inv_t, Stores stores = Stores::cached);
std::size_t f32_log_softmax_rows(const half* x, std::ptrdiff_t x_row_stride, half* y, std::ptrdiff_t y_row_stride,
                                 std::size_t rows, std::size_t n, double inv_t, Stores stores = Stores::cached);
std::size_t f32_log_softmax_rows(const bfloat16* x, std::ptrdiff_t x_row_stride, bfloat16* y,
                                 std::ptrdiff_t y_row_stride, std::size_t rows, std::size_t n, double inv_t,
                                 Stores stores = Stores::cached);

// y[i] = e[i] * scale, rounded to y's type, for e never NaN (a softmax's exps: bf16
// rounds without the NaN case). `stream`: y's whole lines with streaming stores, around
// the cache. y may be e itself for float rows that do not stream.
void f32_vscale(const float* e, float* y, std::size_t n, float scale, bool stream = false);
void f32_vscale(const float* e, half* y, std::size_t n, float scale, bool stream = false);
void f32_vscale(const float* e, bfloat16* y, std::size_t n, float scale, bool stream = false);

// y[i] = exp((x[i] - m) * inv_t) * scale, m finite and >= every x[i] (none NaN), so
// that no output is NaN (bf16 rounds without the NaN case). y may be x itself.
// Stores::streaming (see options.hpp) writes whole vectors with non-temporal stores
// and fences before returning; automatic counts as cached.
void f32_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float scale,
                           bool backward, const Ahead<float>& ahead = {}, Stores stores = Stores::cached);
void f32_softmax_normalize(const half* x, half* y, std::size_t n, float m, double inv_t, float scale, bool backward,
                           const Ahead<half>& ahead = {}, Stores stores = Stores::cached);
void f32_softmax_normalize(const bfloat16* x, bfloat16* y, std::size_t n, float m, double inv_t, float scale,
                           bool backward, const Ahead<bfloat16>& ahead = {}, Stores stores = Stores::cached);

// y[i] = (x[i] - m) * inv_t - log_d, m and x as f32_softmax_normalize's. y may be x
// itself. Stores as f32_softmax_normalize's.
void f32_log_softmax_normalize(const float* x, float* y, std::size_t n, float m, double inv_t, float log_d,
                               bool backward, Stores stores = Stores::cached);
void f32_log_softmax_normalize(const half* x, half* y, std::size_t n, float m, double inv_t, float log_d,
                               bool backward, Stores stores = Stores::cached);
void f32_log_softmax_normalize(const bfloat16* x, bfloat16* y, std::size_t n, float m, double inv_t, float log_d,
                               bool backward, Stores stores = Stores::cached);

// y[i] = exp(z[i] + z_lo[i]) with the kernels' exp (0 below the normal range); with
// `coarse`, exp(z[i]) by its coarse form (ExpFlushCoarse; z_lo unread); for tests.
void f32_exp_flush(const float* z, const float* z_lo, float* y, std::size_t n, bool coarse = false);

// The row kernels' forms of exp(x - m) below float's normal range
// (exp_minus_max-inl.h's ExpRange): flushed to 0, float's subnormals kept (bf16 rows),
// or all of them times 2^64 (bf16 softmax's stored exps).
enum class ExpMinusMaxForm { flush, gradual, times_2_64 };

// y[i] = exp(x[i] - m) (x[i] <= m, m finite) by the row kernels' exp for unit
// temperature, in `form`; with `table` false, never through the table of 2^(j / 32)
// (ExpMinusMaxTable, AVX-512); with `marks_max` false, as the passes that count no
// terms at the max take it (DirectTableExp where it applies), and with `coarse` in
// its form for 16-bit softmax outputs. Returns false, writing nothing, for
// times_2_64 where the target or m leave the rows without it (FoldsMax). For tests.
bool f32_exp_minus_max(const float* x, float* y, std::size_t n, float m, ExpMinusMaxForm form, bool table = true,
                       bool marks_max = true, bool coarse = false);

// x converted to float and back, through the kernels' loads and stores; for tests.
void f32_convert(const half* x, float* wide, half* y, std::size_t n);
void f32_convert(const bfloat16* x, float* wide, bfloat16* y, std::size_t n);

}  // namespace smax::cpu::simd
