// A long row as fixed chunks: the online algorithm at chunk granularity, which lets
// several threads share one row.
#pragma once

#include "cpu/row.hpp"

namespace smax::cpu {

// Pass 1: each chunk of p.chunk elements gets its (max, sum) from a max pass and an
// exp-sum pass over the chunk, the second reading it from cache. The pairs merge in a
// fixed (pairwise) order. Pass 2 writes each chunk, last chunk first within each
// thread's share, so that it starts on what that thread's cache still holds.
// p.row_threads threads share the chunks; the arithmetic is the same for any count.
//
// With p.store_exps (fused over chunks: contiguous f32, f16 and bf16 softmax rows that
// fit in cache), pass 1 also stores each chunk's exp(x - chunk max), in y for f32 rows
// and in a float buffer for 16-bit ones, and pass 2 only scales each chunk by
// exp(chunk max - row max) / sum into y: one exp per element, not two.
template <class T>
void split_row(const Row<T>& row, const RowParams& p);

}  // namespace smax::cpu
