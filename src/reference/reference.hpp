// The long double reference every test and the CLI's checks compare against.
// Straight from the definitions, with the semantics of docs/SEMANTICS.md, and no
// concern for speed. On x86-64 long double has a 64-bit significand.
#pragma once

#include <span>

#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::reference {

// One row: softmax or log_softmax write out[0..n), logsumexp writes out[0].
// x holds the row's values exactly as the kernel will see them (already rounded to
// the storage type).
void row(Op op, std::span<const long double> x, std::span<long double> out, long double temperature = 1.0L,
         AllMasked all_masked = AllMasked::nan);

}  // namespace smax::reference
