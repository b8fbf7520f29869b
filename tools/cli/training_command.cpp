// cross-entropy, softmax-backward and log-softmax-backward on .npy files.
#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "choices.hpp"
#include "commands.hpp"
#include "npy.hpp"
#include "smax/error.hpp"
#include "smax/training.hpp"

namespace smax::cli {
namespace {

constexpr std::array<OptionSpec, 4> kBackwardOptions{
    {{"axis", true}, {"temperature", true}, {"threads", true}, {"stores", true}}};
constexpr std::array<OptionSpec, 9> kCrossEntropyOptions{{{"weights", true},
                                                          {"ignore-index", true},
                                                          {"reduction", true},
                                                          {"label-smoothing", true},
                                                          {"axis", true},
                                                          {"grad", true},
                                                          {"log-prob", true},
                                                          {"threads", true},
                                                          {"stores", true}}};

constexpr std::string_view kCrossEntropyHelp =
    R"(Usage: smax cross-entropy LOGITS.npy TARGETS.npy OUT.npy [options]

Computes the cross-entropy of the logits in LOGITS.npy, shape (N, C) or
(N, C, d1, ..., dk), against TARGETS.npy, as PyTorch's CrossEntropyLoss and
ONNX's SoftmaxCrossEntropyLoss do, and writes the loss to OUT.npy: one value per
sample with --reduction none (the logits' shape without the class axis), else a
scalar. TARGETS.npy holds class indices (int64 or int32, the logits' shape
without the class axis) or class probabilities (the logits' shape and dtype).
Float files are float32, float64 or float16; the outputs take the logits' dtype.

Options:
  --axis A              the class axis (default 1; -1 for (..., C))
  --reduction R         none, sum or mean (default mean: divided by the sum of the
                        weights of the non-ignored targets)
  --ignore-index I      targets equal to I add no loss and no gradient (any
                        integer; default: none is ignored)
  --label-smoothing S   in [0, 1] (default 0)
  --weights W.npy       class weights, shape (C,), the logits' dtype
  --grad GRAD.npy       also write the gradient of the loss with respect to the
                        logits (the logits' shape)
  --log-prob LP.npy     also write the log-softmax of the logits along the class axis
  --threads N           threads to use; 0 means all cores (default 0)
  --stores MODE         auto, cached or streaming: how GRAD is written, through
                        the cache or around it; auto streams where the logits and
                        the gradient exceed the last-level cache (at most 48
                        MiB; default auto)
  -h, --help            show this text

A target outside [0, C) that is not the ignore index is an error naming its
position; no file is written then.
)";

constexpr std::string_view kBackwardHelp = R"(Usage: smax softmax-backward Y.npy DY.npy DX.npy [options]
       smax log-softmax-backward LOG_Y.npy DY.npy DX.npy [options]

The backward pass of softmax (or log-softmax) along one axis: from the forward
output Y (or LOG_Y) and the gradient DY with respect to it, writes the gradient
with respect to the forward input, with Y's shape and dtype, to DX.npy:
  softmax:      dx = y * (dy - sum(y * dy)) / T
  log-softmax:  dx = (dy - exp(log_y) * sum(dy)) / T
Y and DY hold float32, float64 or float16 data of the same shape and dtype.

Options:
  --axis A            the softmax axis; negative counts from the end (default -1)
  --temperature T     the forward pass's temperature; finite and > 0 (default 1)
  --threads N         threads to use; 0 means all cores (default 0)
  --stores MODE       auto, cached or streaming: how DX is written, through the
                      cache or around it; auto streams where Y, DY and DX exceed a
                      sixth of the last-level cache, counting at most 48 MiB of it
                      (default auto)
  -h, --help          show this text
)";

DType float_dtype(const std::string& file, const npy::Array& array) {
  if (const auto dtype = array.dtype()) return *dtype;
  throw Error(Errc::dtype, file + ": dtype " + array.type_name() + " ('" + array.descr +
                               "') is not supported; use float32, float64 or float16");
}

TensorView view_of(const std::string& file, const npy::Array& array, const std::vector<std::int64_t>& strides) {
  return TensorView(array.data.data(), float_dtype(file, array), array.shape, strides);
}

// An output buffer of `shape` in `dtype`, C order.
struct OutputFile {
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
  DType dtype;
  OutputFile(DType type, std::vector<std::int64_t> extents) : shape(std::move(extents)), dtype(type) {
    bytes.resize(static_cast<std::size_t>(MutableTensorView(nullptr, dtype, shape).numel()) * size_of(dtype));
  }
  MutableTensorView view() { return MutableTensorView(bytes.data(), dtype, shape); }
  void write(const std::string& path, const std::string& descr) const {
    npy::write(path, descr, shape, bytes.data(), bytes.size());
  }
};

int run_backward(const std::string& command, std::span<const std::string> args) {
  const Arguments arguments = parse_arguments(command, args, kBackwardOptions);
  const bool log = command == "log-softmax-backward";
  constexpr std::array<std::string_view, 3> kSoftmaxFiles{"Y.npy", "DY.npy", "DX.npy"};
  constexpr std::array<std::string_view, 3> kLogFiles{"LOG_Y.npy", "DY.npy", "DX.npy"};
  expect_positional(command, arguments, log ? kLogFiles : kSoftmaxFiles);
  BackwardOptions options;
  if (auto text = arguments.value("axis")) options.axis = parse_int(command, "axis", *text);
  if (auto text = arguments.value("temperature")) options.temperature = parse_number(command, "temperature", *text);
  if (auto text = arguments.value("threads")) options.threads = parse_int(command, "threads", *text);
  if (auto text = arguments.value("stores")) options.stores = stores_choice(command, *text);

  const npy::Array y = npy::read(arguments.positional[0]);
  const npy::Array dy = npy::read(arguments.positional[1]);
  const std::vector<std::int64_t> y_strides = y.strides();
  const std::vector<std::int64_t> dy_strides = dy.strides();
  const TensorView y_view = view_of(arguments.positional[0], y, y_strides);
  const TensorView dy_view = view_of(arguments.positional[1], dy, dy_strides);
  OutputFile dx(y_view.dtype(), y.shape);
  if (log) log_softmax_backward(y_view, dy_view, dx.view(), options);
  else softmax_backward(y_view, dy_view, dx.view(), options);
  dx.write(arguments.positional[2], y.descr);
  return 0;
}

int run_cross_entropy(const std::string& command, std::span<const std::string> args) {
  const Arguments arguments = parse_arguments(command, args, kCrossEntropyOptions);
  constexpr std::array<std::string_view, 3> kFiles{"LOGITS.npy", "TARGETS.npy", "OUT.npy"};
  expect_positional(command, arguments, kFiles);
  CrossEntropyOptions options;
  if (auto text = arguments.value("axis")) options.axis = parse_int(command, "axis", *text);
  if (auto text = arguments.value("reduction")) {
    const auto reduction = parse_reduction(*text);
    if (!reduction) throw UsageError(command, "--reduction " + *text + ": use none, sum or mean");
    options.reduction = *reduction;
  }
  if (auto text = arguments.value("ignore-index")) {
    try {
      std::size_t used = 0;
      options.ignore_index = std::stoll(*text, &used);
      if (used != text->size()) throw std::invalid_argument(*text);
    } catch (const std::logic_error&) {
      throw UsageError(command, "--ignore-index " + *text + ": not an integer");
    }
  }
  if (auto text = arguments.value("label-smoothing")) {
    options.label_smoothing = parse_number(command, "label-smoothing", *text);
  }
  if (auto text = arguments.value("threads")) options.threads = parse_int(command, "threads", *text);
  if (auto text = arguments.value("stores")) options.stores = stores_choice(command, *text);

  const std::string& logits_path = arguments.positional[0];
  const std::string& targets_path = arguments.positional[1];
  const npy::Array logits = npy::read(logits_path);
  const npy::Array targets = npy::read(targets_path);
  std::optional<npy::Array> weights;
  if (auto path = arguments.value("weights")) weights = npy::read(*path);

  const std::vector<std::int64_t> logits_strides = logits.strides();
  const TensorView logits_view = view_of(logits_path, logits, logits_strides);
  const std::vector<std::int64_t> weight_strides = weights ? weights->strides() : std::vector<std::int64_t>{};
  if (weights) options.weight = view_of(*arguments.value("weights"), *weights, weight_strides);

  // The loss's shape; an axis out of range is left for the library to report.
  std::vector<std::int64_t> loss_shape;
  const auto rank = static_cast<int>(logits.shape.size());
  if (options.reduction == Reduction::none && options.axis >= -rank && options.axis < rank) {
    loss_shape = logits.shape;
    loss_shape.erase(loss_shape.begin() + (options.axis < 0 ? options.axis + rank : options.axis));
  }
  OutputFile loss(logits_view.dtype(), loss_shape);
  std::optional<OutputFile> grad, log_prob;
  CrossEntropyOutputs outputs;
  if (arguments.has("grad")) outputs.grad = grad.emplace(logits_view.dtype(), logits.shape).view();
  if (arguments.has("log-prob")) outputs.log_prob = log_prob.emplace(logits_view.dtype(), logits.shape).view();

  const std::vector<std::int64_t> target_strides = targets.strides();
  if (targets.descr == "<i8" || targets.descr == "<i4") {
    const IndexView indices(targets.data.data(), targets.descr == "<i8" ? IndexType::i64 : IndexType::i32,
                            targets.shape, target_strides);
    cross_entropy(logits_view, indices, loss.view(), options, outputs);
  } else if (targets.dtype()) {
    cross_entropy(logits_view, view_of(targets_path, targets, target_strides), loss.view(), options, outputs);
  } else {
    throw Error(Errc::dtype, targets_path + ": dtype " + targets.type_name() + " ('" + targets.descr +
                                 "') is not supported; use int64 or int32 class indices, or probabilities "
                                 "in the logits' float dtype");
  }
  loss.write(arguments.positional[2], logits.descr);
  if (grad) grad->write(*arguments.value("grad"), logits.descr);
  if (log_prob) log_prob->write(*arguments.value("log-prob"), logits.descr);
  return 0;
}

}  // namespace

bool is_training_command(std::string_view command) {
  return command == "cross-entropy" || command == "softmax-backward" || command == "log-softmax-backward";
}

std::optional<std::string_view> training_help(std::string_view command) {
  if (command == "cross-entropy") return kCrossEntropyHelp;
  if (command == "softmax-backward" || command == "log-softmax-backward") return kBackwardHelp;
  return std::nullopt;
}

int run_training(const std::string& command, std::span<const std::string> args) {
  if (command == "cross-entropy") return run_cross_entropy(command, args);
  return run_backward(command, args);
}

}  // namespace smax::cli
