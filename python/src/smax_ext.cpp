// smax._smax: the compiled half of the Python package. It turns array objects
// (NumPy arrays, PyTorch tensors, anything that speaks DLPack) into smax views without
// copying, runs the library with the GIL released, and turns smax::Error into Python
// exceptions. Allocating outputs, defaults and returning the caller's array type live
// in smax/__init__.py, so this file stays a thin translation layer.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

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

// Any dtype, any strides, CPU only. nb::ro lets read-only inputs in (a broadcast
// NumPy view is read-only). The dtype is checked here, not by nanobind, so that an
// unsupported one gets a TypeError that names it instead of an overload mismatch.
using InputArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutputArray = nb::ndarray<nb::device::cpu>;

std::string dtype_name(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  std::string base;
  switch (static_cast<Code>(t.code)) {
    case Code::Int: base = "int"; break;
    case Code::UInt: base = "uint"; break;
    case Code::Float: base = "float"; break;
    case Code::Bfloat: base = "bfloat"; break;
    case Code::Complex: base = "complex"; break;
    case Code::Bool: return "bool";
    default: base = "dlpack-code-" + std::to_string(t.code) + "-"; break;
  }
  std::string name = base + std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

// `bf16_bits`: the Python side passes an ml_dtypes bfloat16 NumPy array as a uint16
// view of its bits (NumPy cannot export that dtype through DLPack or the buffer
// protocol), and says so with this flag.
std::optional<smax::DType> to_dtype(nb::dlpack::dtype t, bool bf16_bits) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<Code>(t.code);
  if (code == Code::Float && t.bits == 32) return smax::DType::f32;
  if (code == Code::Float && t.bits == 64) return smax::DType::f64;
  if (code == Code::Float && t.bits == 16) return smax::DType::f16;
  if (code == Code::Bfloat && t.bits == 16) return smax::DType::bf16;
  if (bf16_bits && code == Code::UInt && t.bits == 16) return smax::DType::bf16;
  return std::nullopt;
}

smax::DType checked_dtype(std::string_view op, std::string_view which, nb::dlpack::dtype t, bool bf16_bits) {
  if (auto dtype = to_dtype(t, bf16_bits)) return *dtype;
  throw smax::Error(smax::Errc::dtype, std::string(op) + ": unsupported " + std::string(which) + " dtype " +
                                           dtype_name(t) + "; use float32, float64, float16 or bfloat16");
}

using smax_python::parse_choice;
using smax_python::shape_of;
using smax_python::strides_of;

smax::Op parse_op(const std::string& name) {
  if (name == "softmax") return smax::Op::softmax;
  if (name == "log_softmax") return smax::Op::log_softmax;
  if (name == "logsumexp") return smax::Op::logsumexp;
  throw smax::Error(smax::Errc::option, "unknown op '" + name + "'; use softmax, log_softmax or logsumexp");
}

smax::Options make_options(std::string_view op, int axis, double temperature, const std::string& algorithm,
                           const std::string& pass_order, const std::string& all_masked, const std::string& stores,
                           int threads, bool keepdims) {
  smax::Options o;
  o.axis = axis;
  o.temperature = temperature;
  o.algorithm = parse_choice(op, "algorithm", algorithm, smax::parse_algorithm, "auto, naive, safe, fused, tiled or online");
  o.pass_order = parse_choice(op, "pass_order", pass_order, smax::parse_pass_order, "reverse or forward");
  o.all_masked = parse_choice(op, "all_masked", all_masked, smax::parse_all_masked, "nan or zero");
  o.stores = parse_choice(op, "stores", stores, smax::parse_stores, "auto, cached or streaming");
  o.threads = threads;
  o.keepdims = keepdims;
  return o;
}

// Runs `op` from x into out. Both views are built (and checked) with the GIL held;
// the kernel runs without it, so other Python threads go on meanwhile. The ndarray
// handles keep both buffers alive for the whole call.
void run(const std::string& op_name, const InputArray& x, const OutputArray& out, int axis, double temperature,
         const std::string& algorithm, const std::string& pass_order, const std::string& all_masked,
         const std::string& stores, int threads, bool keepdims, bool x_bf16_bits, bool out_bf16_bits) {
  const smax::Op op = parse_op(op_name);
  const std::string_view name = smax::to_string(op);
  const smax::DType x_dtype = checked_dtype(name, "input", x.dtype(), x_bf16_bits);
  const smax::DType out_dtype = checked_dtype(name, "output", out.dtype(), out_bf16_bits);
  const smax::Options options =
      make_options(name, axis, temperature, algorithm, pass_order, all_masked, stores, threads, keepdims);
  const std::vector<std::int64_t> x_shape = shape_of(x), x_strides = strides_of(x);
  const std::vector<std::int64_t> out_shape = shape_of(out), out_strides = strides_of(out);
  const smax::TensorView xv(x.data(), x_dtype, x_shape, x_strides);
  const smax::MutableTensorView yv(out.data(), out_dtype, out_shape, out_strides);

  nb::gil_scoped_release no_gil;
  switch (op) {
    case smax::Op::softmax: smax::softmax(xv, yv, options); break;
    case smax::Op::log_softmax: smax::log_softmax(xv, yv, options); break;
    case smax::Op::logsumexp: smax::logsumexp(xv, yv, options); break;
  }
}

// The shape and dtype name of any array object, so that Python can allocate an
// output for a DLPack producer it does not know.
nb::tuple describe(const InputArray& x) {
  return nb::make_tuple(nb::tuple(nb::cast(shape_of(x))), dtype_name(x.dtype()));
}

std::vector<std::int64_t> output_shape(const std::string& op_name, const std::vector<std::int64_t>& shape, int axis,
                                       bool keepdims) {
  smax::Options options;
  options.axis = axis;
  options.keepdims = keepdims;
  return smax::output_shape(parse_op(op_name), shape, options);
}

nb::dict plan(const std::string& op_name, const std::vector<std::int64_t>& shape, const std::string& dtype_name_,
              int axis, double temperature, const std::string& algorithm, const std::string& pass_order,
              const std::string& all_masked, const std::string& stores, int threads) {
  const smax::Op op = parse_op(op_name);
  const std::string_view name = smax::to_string(op);
  const std::optional<smax::DType> dtype = smax::parse_dtype(dtype_name_);
  if (!dtype) {
    throw smax::Error(smax::Errc::dtype, std::string(name) + ": unsupported dtype " + dtype_name_ +
                                             "; use float32, float64, float16 or bfloat16");
  }
  const smax::PlanInfo p =
      smax::plan(op, shape, *dtype,
                 make_options(name, axis, temperature, algorithm, pass_order, all_masked, stores, threads, false));
  nb::dict d;
  d["op"] = std::string(name);
  d["shape"] = shape;
  d["dtype"] = std::string(smax::to_string(*dtype));
  d["algorithm"] = std::string(smax::to_string(p.algorithm));
  d["pass_order"] = std::string(smax::to_string(p.pass_order));
  d["rows"] = p.rows;
  d["length"] = p.length;
  d["block_length"] = p.block_length;
  d["chunk_length"] = p.chunk_length;
  d["panel_width"] = p.panel_width;
  d["threads"] = p.threads;
  d["stores"] = std::string(smax::to_string(p.stores));
  d["reason"] = p.reason;
  return d;
}

nb::dict machine_info() {
  const smax::MachineInfo& m = smax::machine();
  nb::dict d;
  d["version"] = std::string(smax::version());
  d["cpu_model"] = m.cpu_model;
  d["architecture"] = m.architecture;
  d["vendor"] = m.vendor;
  d["features"] = m.features;
  d["l1d_bytes"] = m.l1d_bytes;
  d["l2_bytes"] = m.l2_bytes;
  d["l3_bytes"] = m.l3_bytes;
  d["threads"] = m.threads;
  d["assumed"] = m.assumed;
  return d;
}

// smax::Error -> the Python exception its code() stands for, with the C++ message.
// A bad axis raises NumPy's AxisError (a ValueError and an IndexError), as NumPy does.
void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const smax::Error& e) {
    switch (e.code()) {
      case smax::Errc::dtype: PyErr_SetString(PyExc_TypeError, e.what()); return;
      case smax::Errc::axis: {
        nb::object axis_error;
        try {
          axis_error = nb::module_::import_("numpy").attr("exceptions").attr("AxisError");
        } catch (const nb::python_error&) {  // no NumPy (or one older than 1.25)
          PyErr_SetString(PyExc_ValueError, e.what());
          return;
        }
        PyErr_SetString(axis_error.ptr(), e.what());
        return;
      }
      default: PyErr_SetString(PyExc_ValueError, e.what()); return;
    }
  }
}

}  // namespace

// The training ops (training_ext.cpp).
void register_training(nb::module_& m);

NB_MODULE(_smax, m) {
  m.doc() = "The compiled core of smax; use the functions of the smax package instead.";
  nb::register_exception_translator(translate_error);

  // noconvert: never let nanobind copy an argument into a converted temporary;
  // the caller's memory is read and written in place, or the call fails.
  m.def("run", &run, "op"_a, "x"_a.noconvert(), "out"_a.noconvert(), "axis"_a, "temperature"_a, "algorithm"_a,
        "pass_order"_a, "all_masked"_a, "stores"_a, "threads"_a, "keepdims"_a, "x_bf16_bits"_a, "out_bf16_bits"_a);
  m.def("describe", &describe, "x"_a.noconvert());
  m.def("output_shape", &output_shape, "op"_a, "shape"_a, "axis"_a, "keepdims"_a);
  m.def("plan", &plan, "op"_a, "shape"_a, "dtype"_a, "axis"_a, "temperature"_a, "algorithm"_a, "pass_order"_a,
        "all_masked"_a, "stores"_a, "threads"_a);
  m.def("machine", &machine_info);
  m.def("version", [] { return std::string(smax::version()); });
  register_training(m);
}
