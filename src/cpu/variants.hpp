// The five variants of the tutorial, one function each. A call handles one row for
// softmax, log_softmax (writes the row) or logsumexp (writes y[0]).
// Each is defined in its own file and instantiated for float, double, half, bfloat16.
#pragma once

#include <cstdint>

#include "cpu/row.hpp"

namespace smax::cpu {

// exp(x/T) / sum(exp(x/T)) in the storage precision, with no max subtraction.
// Overflows on purpose; kept for comparison. No NaN/inf/all-masked rules apply.
template <class T>
void naive_row(const Row<T>& row, const RowParams& p);

// Three passes over the row: max; sum of exp(x - max); normalise.
template <class T>
void safe_row(const Row<T>& row, const RowParams& p);

// Loads the row once into a fixed buffer (n <= kFusedMaxLength), does everything
// there, writes once.
template <class T>
void fused_row(const Row<T>& row, const RowParams& p);

// fused_row's softmax or log_softmax (op) for `rows` contiguous rows of n elements at
// the given row strides, in one call into the vectorised kernels (no set-up per row).
// Returns the number of leading rows done: a row with a non-finite max stops it, for
// fused_row. f32, f16 and bf16.
template <class T>
std::int64_t fused_rows(Op op, const T* x, std::int64_t x_row_stride, T* y, std::int64_t y_row_stride,
                        std::int64_t rows, std::int64_t n, double inv_t, Stores stores);

// The three passes over blocks of p.block elements; the sum pass walks the blocks
// backward (PassOrder::reverse) so that it starts on those still in cache.
template <class T>
void tiled_row(const Row<T>& row, const RowParams& p);

// One pass of running max and rescaled running sum in several lanes, merged at the
// end (f32: a block of 2048 elements at a time, each block's pair from the vectorised
// passes); then the output pass, backward by default.
template <class T>
void online_row(const Row<T>& row, const RowParams& p);

}  // namespace smax::cpu
