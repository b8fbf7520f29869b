// One row of a softmax problem, as every kernel sees it: pointers, a length and
// strides in elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::cpu {

template <class T>
struct Row {
  const T* x;
  std::ptrdiff_t x_stride;
  T* y;                     // logsumexp writes y[0] only
  std::ptrdiff_t y_stride;
  std::int64_t n;
};

// What is the same for every row of one call.
struct RowParams {
  Op op = Op::softmax;
  double inv_t = 1.0;  // 1 / temperature
  AllMasked all_masked = AllMasked::nan;
  PassOrder order = PassOrder::reverse;  // second pass of tiled and online
  std::int64_t block = 0;                // tiled: elements per block
  std::int64_t chunk = 0;                // split rows: elements per chunk
  int row_threads = 1;                   // split rows: threads sharing one row
  bool store_exps = false;               // split rows: fused over chunks (split_row.hpp)
  Stores stores = Stores::cached;        // the output pass of softmax and log_softmax (never automatic)
};

}  // namespace smax::cpu
