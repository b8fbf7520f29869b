// smax bench --workload training: the backward passes and cross-entropy with its
// gradient, each beside a plain memory kernel that moves the same bytes. Separate
// from the softmax tables: the ops take two inputs (or logits and targets) and their
// outputs are gradients, not probabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "smax/dtype.hpp"

namespace smax::cli::bench {

struct TrainingSettings {
  std::vector<int> threads;
  int repeats = 5;
  std::size_t memory_budget = 0;
  std::size_t cache_bytes = 0;  // the last-level cache the rotation has to exceed
  std::uint64_t seed = 1;
  std::size_t offset = 0;  // bytes past a page where every tensor starts (see Workspace)
};

// One op on one tensor shape along one axis (the classes: the last axis, or axis 1 of
// [N, C, H, W] as PyTorch's layout has them).
struct TrainingPoint {
  std::string op;  // "softmax_backward", "log_softmax_backward", "cross_entropy"
  std::vector<std::int64_t> shape;
  int axis = -1;
  DType dtype = DType::f32;
  std::int64_t numel() const;
  std::int64_t classes() const;  // the axis's extent
  // The shape without the axis: the targets' (cross-entropy).
  std::vector<std::int64_t> batch_shape() const;
  std::size_t tensor_bytes() const;
  // The least a call must move: backward reads y and dy and writes dx; cross-entropy
  // reads the logits and writes the gradient (the targets and the loss are negligible).
  std::size_t moved_bytes() const;
  int tensors_read() const { return op == "cross_entropy" ? 1 : 2; }
  std::string label() const;  // "8x128256", "8x21x256x256:1" (the axis where not the last)
};

std::vector<TrainingPoint> training_points();

// Measures every point at every thread count, printing one table (with a progress
// line on stderr while it runs). Returns the number of runs whose output failed the
// check (not every element written and finite).
int run_training(const TrainingSettings& settings, std::ostream& out);

}  // namespace smax::cli::bench
