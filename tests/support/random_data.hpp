// Random inputs: normal values with a per-test offset and scale, rounded to the
// element type when stored (the reference then reads the rounded values back).
#pragma once

#include <cstdint>
#include <vector>

#include "seed.hpp"
#include "test_tensor.hpp"

namespace smax::test {

struct Distribution {
  double offset = 0;
  double scale = 1;
};

// An offset in [-50, 50] and a scale in [0.1, 10] (log-uniform); both small enough
// that f16 neither overflows nor loses the row to rounding.
Distribution random_distribution(Rng& rng);

// Fills every element of the view with offset + scale * N(0, 1).
void fill_normal(TestTensor& tensor, Rng& rng, Distribution distribution);

// linspace(0, 1, n) in f64, ascending or descending: online's running maximum
// moves with nearly every element of the ascending one.
TestTensor linspace_ramp(std::int64_t n, bool ascending);

// A shape of `rank` extents in [1, max_extent].
std::vector<std::int64_t> random_shape(Rng& rng, int rank, std::int64_t max_extent);

// How many random calls a test makes: SMAX_RANDOM_CALLS where set, else `fallback`.
int random_call_count(int fallback);

// The most elements a random call's tensor may have: SMAX_RANDOM_ELEMENTS where set
// (fewer where the long double reference is slow, as under qemu on aarch64), else
// `fallback`.
std::int64_t random_call_elements(std::int64_t fallback);

}  // namespace smax::test
