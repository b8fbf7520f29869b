// Long double references for the training ops (softmax/log-softmax backward and
// cross-entropy), straight from their definitions (PyTorch's formulas for the
// cross-entropy), and the accuracy bar they are held to.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smax/training.hpp"
#include "test_tensor.hpp"

namespace smax::test {

// A reference value with the magnitude of the terms that cancel in it: where the
// result is much smaller than those (a gradient passing through zero), no algorithm
// working in precision eps can be closer than eps times that magnitude.
struct Reference {
  std::vector<long double> values;     // row-major
  std::vector<long double> cancelled;  // same size
};

// dx of softmax_backward (log = false: y is the softmax output) or log_softmax_backward
// (log = true: y is the log-softmax output), over `axis` (normalised), row-major.
Reference backward_reference(bool log, const TestTensor& y, const TestTensor& dy, int axis, long double temperature);

// One cross-entropy call, as plain values.
struct CrossEntropyCase {
  std::vector<std::int64_t> shape;  // the logits'
  int axis = 1;                     // normalised class axis
  std::vector<long double> logits;  // row-major over shape
  bool index_targets = true;
  std::vector<std::int64_t> indices;         // row-major over shape without the axis
  std::vector<long double> probabilities;    // row-major over shape
  std::vector<long double> weight;           // empty: none
  std::optional<std::int64_t> ignore_index;
  long double label_smoothing = 0;
  Reduction reduction = Reduction::mean;
};

struct CrossEntropyReference {
  std::vector<long double> loss;  // one value (sum, mean) or one per sample (none)
  Reference grad;                 // of the reduced loss (none: of the sum), row-major over shape
  std::vector<long double> log_prob;
};

CrossEntropyReference cross_entropy_reference(const CrossEntropyCase& c);

// The scalar a gradient is the derivative of: the reduced loss (none: the sum of the
// per-sample losses), in long double; for finite differences.
long double cross_entropy_objective(const CrossEntropyCase& c);

// The bar: f32 relative 1e-6 (f64 1e-13; f16/bf16 one unit in the last place) of the
// reference, plus the smallest subnormal step of the type, plus
// `cancellation_eps` * the cancelled magnitude. NaN must match NaN, an infinity the
// same infinity; a result beyond the type's range (f16's 65504) its infinity.
::testing::AssertionResult meets_training_bar(const std::string& what, const TestTensor& out,
                                              const std::vector<long double>& expected,
                                              const std::vector<long double>& cancelled,
                                              long double cancellation_eps);

}  // namespace smax::test
