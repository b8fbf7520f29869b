// Training ops: the backward passes of softmax and log-softmax, and cross-entropy
// with its gradient. Every function validates all of its arguments before it writes
// anything, and throws smax::Error naming the bad argument. Semantics in
// docs/SEMANTICS.md ("Training ops").
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

#include "smax/options.hpp"
#include "smax/tensor.hpp"

namespace smax {

struct BackwardOptions {
  int axis = -1;             // the softmax axis; negative axes count from the end
  double temperature = 1.0;  // the forward pass computed softmax(x / T); finite and > 0
  int threads = 0;           // 0 = all cores
  // How dx is written (options.hpp): automatic streams where y, dy and dx together
  // exceed a sixth of the last-level cache, counting at most 48 MiB of it. Contiguous
  // f32, f16 and bf16 rows only; never changes a bit of dx.
  Stores stores = Stores::automatic;
};

// dx = y * (dy - sum(y * dy)) / T along options.axis, where y = softmax(x / T) is the
// forward output and dy the gradient of the loss with respect to y. One pass reduces,
// one pass writes; no intermediate tensor. y, dy and dx have the same shape and dtype
// and any strides; dx may be dy or y itself (same data and strides: in place); any
// other overlap of dx with an input is an error.
void softmax_backward(const TensorView& y, const TensorView& dy, const MutableTensorView& dx,
                      const BackwardOptions& options = {});

// dx = (dy - exp(log_y) * sum(dy)) / T along options.axis, where log_y is the forward
// output of log_softmax(x / T). Same rules as softmax_backward.
void log_softmax_backward(const TensorView& log_y, const TensorView& dy, const MutableTensorView& dx,
                          const BackwardOptions& options = {});

// A read-only view of integer class indices (int64 or int32): data, shape and strides
// in elements, checked as TensorView's.
enum class IndexType : std::uint8_t { i64, i32 };
std::string_view to_string(IndexType type) noexcept;  // "i64", "i32"

class IndexView {
 public:
  IndexView() = default;
  // Row-major strides.
  IndexView(const std::int64_t* data, std::span<const std::int64_t> shape);
  IndexView(const std::int32_t* data, std::span<const std::int64_t> shape);
  IndexView(const std::int64_t* data, std::initializer_list<std::int64_t> shape)
      : IndexView(data, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  IndexView(const std::int32_t* data, std::initializer_list<std::int64_t> shape)
      : IndexView(data, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  IndexView(const void* data, IndexType type, std::span<const std::int64_t> shape,
            std::span<const std::int64_t> strides);

  const void* data() const noexcept { return data_; }
  IndexType type() const noexcept { return type_; }
  int rank() const noexcept { return rank_; }
  std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), static_cast<std::size_t>(rank_)}; }
  std::span<const std::int64_t> strides() const noexcept { return {strides_.data(), static_cast<std::size_t>(rank_)}; }
  std::int64_t numel() const;  // product of the extents (checked at construction)

 private:
  const void* data_ = nullptr;
  IndexType type_ = IndexType::i64;
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
};

enum class Reduction : std::uint8_t {
  none,  // one loss per sample: the logits' shape without the class axis
  sum,   // a scalar (rank 0)
  mean,  // a scalar: the sum divided by the sum of the weights of the non-ignored
         // targets (class indices), or by the number of samples (probabilities)
};
std::string_view to_string(Reduction reduction) noexcept;  // "none", "sum", "mean"
std::optional<Reduction> parse_reduction(std::string_view name) noexcept;

struct CrossEntropyOptions {
  int axis = 1;  // the class axis of the logits (1 as PyTorch and ONNX; -1 as LLM code)
  Reduction reduction = Reduction::mean;
  // Targets equal to this value contribute no loss and no gradient, and do not count
  // in the mean. Any value, also outside [0, C): it is never used as an index.
  // Class-index targets only. (PyTorch's default is -100; here none is ignored.)
  std::optional<std::int64_t> ignore_index = std::nullopt;
  double label_smoothing = 0.0;       // in [0, 1]: the target becomes (1 - s) * target + s / C
  std::optional<TensorView> weight = std::nullopt;  // class weights: shape (C,), the logits' dtype
  int threads = 0;                    // 0 = all cores
  // How the gradient is written (options.hpp): automatic streams where the logits and
  // the gradient together exceed the last-level cache (at most 48 MiB). Contiguous f32,
  // f16 and bf16 rows whose exps stay in cache between the passes, with a gradient
  // that does not replace the logits; never changes a bit of the gradient.
  Stores stores = Stores::automatic;
};

// Optional outputs, computed in the same call as the loss.
struct CrossEntropyOutputs {
  // log_softmax(logits) along the class axis (ONNX's second output): the logits'
  // shape and dtype. May be the logits themselves (same data and strides), unless
  // grad is.
  std::optional<MutableTensorView> log_prob = std::nullopt;
  // d(loss)/d(logits) for the reduced loss (scaled by 1 / the weight sum under mean;
  // under none, for the sum of the per-sample losses): the logits' shape and dtype.
  // May be the logits themselves (same data and strides), which saves a buffer.
  std::optional<MutableTensorView> grad = std::nullopt;
};

// Cross-entropy of logits (N, C) or (N, C, d1, ..., dk) (class axis options.axis)
// against class indices of the logits' shape without the class axis; loss as
// options.reduction says. An out-of-range target that is not ignored is an error
// naming its position and value, raised before anything is written.
void cross_entropy(const TensorView& logits, const IndexView& target, const MutableTensorView& loss,
                   const CrossEntropyOptions& options = {}, const CrossEntropyOutputs& outputs = {});

// The same against class probabilities of the logits' shape and dtype
// (options.ignore_index must be unset).
void cross_entropy(const TensorView& logits, const TensorView& target_probabilities, const MutableTensorView& loss,
                   const CrossEntropyOptions& options = {}, const CrossEntropyOutputs& outputs = {});

}  // namespace smax
