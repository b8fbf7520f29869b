// The training ops in smax._smax: softmax/log-softmax backward and cross-entropy.
// A thin translation layer like smax_ext.cpp: array objects become smax views without
// copying, the kernels run with the GIL released, smax::Error becomes the Python
// exception smax_ext.cpp's translator picks. Defaults, allocation and returning the
// caller's array type live in smax/training.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "array_layout.hpp"
#include "choices.hpp"
#include "smax/smax.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using InputArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutputArray = nb::ndarray<nb::device::cpu>;

// Float arrays as smax dtypes; `bf16_bits` marks a uint16 view of bfloat16 bits
// (how the Python side passes ml_dtypes' bfloat16, which DLPack cannot carry).
smax::DType float_dtype(const std::string& op, const char* which, nb::dlpack::dtype t, bool bf16_bits) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return smax::DType::f32;
    if (code == Code::Float && t.bits == 64) return smax::DType::f64;
    if (code == Code::Float && t.bits == 16) return smax::DType::f16;
    if (code == Code::Bfloat && t.bits == 16) return smax::DType::bf16;
    if (bf16_bits && code == Code::UInt && t.bits == 16) return smax::DType::bf16;
  }
  throw smax::Error(smax::Errc::dtype, op + ": unsupported " + which + " dtype (DLPack code " + std::to_string(t.code) +
                                           ", " + std::to_string(t.bits) + " bits); use float32, float64, float16 or bfloat16");
}

using smax_python::parse_choice;
using smax_python::shape_of;
using smax_python::strides_of;

// A view and the shape/stride storage it points into.
struct Floats {
  std::vector<std::int64_t> shape, strides;
  smax::DType dtype;
  template <class Array>
  Floats(const std::string& op, const char* which, const Array& a, bool bf16_bits)
      : shape(shape_of(a)), strides(strides_of(a)), dtype(float_dtype(op, which, a.dtype(), bf16_bits)) {}
};

void backward(const std::string& op, const InputArray& y, const InputArray& dy, const OutputArray& dx, int axis,
              double temperature, int threads, const std::string& stores, bool y_bits, bool dy_bits, bool dx_bits) {
  const smax::Stores parsed_stores = parse_choice(op, "stores", stores, smax::parse_stores, "auto, cached or streaming");
  const Floats yf(op, "y", y, y_bits), dyf(op, "dy", dy, dy_bits), dxf(op, "out", dx, dx_bits);
  const smax::TensorView yv(y.data(), yf.dtype, yf.shape, yf.strides);
  const smax::TensorView dyv(dy.data(), dyf.dtype, dyf.shape, dyf.strides);
  const smax::MutableTensorView dxv(dx.data(), dxf.dtype, dxf.shape, dxf.strides);
  const smax::BackwardOptions options{
      .axis = axis, .temperature = temperature, .threads = threads, .stores = parsed_stores};
  const bool log = op == "log_softmax_backward";
  nb::gil_scoped_release no_gil;
  if (log) smax::log_softmax_backward(yv, dyv, dxv, options);
  else smax::softmax_backward(yv, dyv, dxv, options);
}

void cross_entropy(const InputArray& logits, const InputArray& target, const OutputArray& loss,
                   std::optional<InputArray> weight, std::optional<OutputArray> grad,
                   std::optional<OutputArray> log_prob, int axis, const std::string& reduction,
                   std::optional<std::int64_t> ignore_index, double label_smoothing, int threads,
                   const std::string& stores, bool logits_bits, bool target_bits, bool weight_bits, bool loss_bits,
                   bool grad_bits, bool log_prob_bits) {
  const std::string op = "cross_entropy";
  const smax::Stores parsed_stores = parse_choice(op, "stores", stores, smax::parse_stores, "auto, cached or streaming");
  const Floats lf(op, "input", logits, logits_bits), outf(op, "loss", loss, loss_bits);
  smax::CrossEntropyOptions options;
  options.axis = axis;
  const auto parsed = smax::parse_reduction(reduction);
  if (!parsed) throw smax::Error(smax::Errc::option, op + ": unknown reduction '" + reduction + "'; use none, sum or mean");
  options.reduction = *parsed;
  options.ignore_index = ignore_index;
  options.label_smoothing = label_smoothing;
  options.threads = threads;
  options.stores = parsed_stores;
  std::optional<Floats> wf, gf, lpf;
  if (weight) {
    wf.emplace(op, "weight", *weight, weight_bits);
    options.weight = smax::TensorView(weight->data(), wf->dtype, wf->shape, wf->strides);
  }
  smax::CrossEntropyOutputs outputs;
  if (grad) {
    gf.emplace(op, "grad", *grad, grad_bits);
    outputs.grad = smax::MutableTensorView(grad->data(), gf->dtype, gf->shape, gf->strides);
  }
  if (log_prob) {
    lpf.emplace(op, "log_prob", *log_prob, log_prob_bits);
    outputs.log_prob = smax::MutableTensorView(log_prob->data(), lpf->dtype, lpf->shape, lpf->strides);
  }
  const smax::TensorView lv(logits.data(), lf.dtype, lf.shape, lf.strides);
  const smax::MutableTensorView out(loss.data(), outf.dtype, outf.shape, outf.strides);
  using Code = nb::dlpack::dtype_code;
  const nb::dlpack::dtype t = target.dtype();
  const std::vector<std::int64_t> target_shape = shape_of(target), target_strides = strides_of(target);
  if (static_cast<Code>(t.code) == Code::Int && (t.bits == 64 || t.bits == 32) && t.lanes == 1) {
    const smax::IndexView indices(target.data(), t.bits == 64 ? smax::IndexType::i64 : smax::IndexType::i32,
                                  target_shape, target_strides);
    nb::gil_scoped_release no_gil;
    smax::cross_entropy(lv, indices, out, options, outputs);
    return;
  }
  const smax::DType target_dtype = float_dtype(op, "target", t, target_bits);
  const smax::TensorView probabilities(target.data(), target_dtype, target_shape, target_strides);
  nb::gil_scoped_release no_gil;
  smax::cross_entropy(lv, probabilities, out, options, outputs);
}

}  // namespace

void register_training(nb::module_& m) {
  m.def("backward", &backward, "op"_a, "y"_a.noconvert(), "dy"_a.noconvert(), "out"_a.noconvert(), "axis"_a,
        "temperature"_a, "threads"_a, "stores"_a, "y_bf16_bits"_a, "dy_bf16_bits"_a, "out_bf16_bits"_a);
  m.def("cross_entropy", &cross_entropy, "logits"_a.noconvert(), "target"_a.noconvert(), "loss"_a.noconvert(),
        "weight"_a.noconvert().none(), "grad"_a.noconvert().none(), "log_prob"_a.noconvert().none(), "axis"_a,
        "reduction"_a, "ignore_index"_a.none(), "label_smoothing"_a, "threads"_a, "stores"_a, "logits_bf16_bits"_a,
        "target_bf16_bits"_a, "weight_bf16_bits"_a, "loss_bf16_bits"_a, "grad_bf16_bits"_a, "log_prob_bf16_bits"_a);
}
