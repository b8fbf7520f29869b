// softmax, log-softmax and logsumexp on .npy files.
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "args.hpp"
#include "choices.hpp"
#include "commands.hpp"
#include "npy.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"
#include "smax/ops.hpp"
#include "smax/tensor.hpp"

namespace smax::cli {
namespace {

constexpr std::array<OptionSpec, 7> kRowOptions{{{"axis", true},
                                                 {"temperature", true},
                                                 {"algorithm", true},
                                                 {"pass-order", true},
                                                 {"threads", true},
                                                 {"all-masked", true},
                                                 {"stores", true}}};
constexpr std::array<OptionSpec, 6> kReduceOptions{{{"axis", true},
                                                    {"keepdims", false},
                                                    {"temperature", true},
                                                    {"algorithm", true},
                                                    {"pass-order", true},
                                                    {"threads", true}}};

Options to_options(const std::string& command, const Arguments& arguments) {
  Options options;
  if (auto text = arguments.value("axis")) options.axis = parse_int(command, "axis", *text);
  if (auto text = arguments.value("temperature")) options.temperature = parse_number(command, "temperature", *text);
  if (auto text = arguments.value("algorithm")) options.algorithm = algorithm_choice(command, *text);
  if (auto text = arguments.value("pass-order")) options.pass_order = pass_order_choice(command, *text);
  if (auto text = arguments.value("threads")) options.threads = parse_int(command, "threads", *text);
  if (auto text = arguments.value("all-masked")) options.all_masked = all_masked_choice(command, *text);
  if (auto text = arguments.value("stores")) options.stores = stores_choice(command, *text);
  options.keepdims = arguments.has("keepdims");
  return options;
}

DType float_dtype(const std::string& file, const npy::Array& array) {
  if (const auto dtype = array.dtype()) return *dtype;
  throw Error(Errc::dtype, file + ": dtype " + array.type_name() + " ('" + array.descr +
                               "') is not supported; use float32, float64 or float16");
}

}  // namespace

int run_operation(const std::string& command, std::span<const std::string> args) {
  const Op op = op_choice("", command);
  const Arguments arguments =
      parse_arguments(command, args, op == Op::logsumexp ? std::span<const OptionSpec>(kReduceOptions)
                                                         : std::span<const OptionSpec>(kRowOptions));
  constexpr std::array<std::string_view, 2> kFiles{"IN.npy", "OUT.npy"};
  expect_positional(command, arguments, kFiles);
  const std::string& in_path = arguments.positional[0];
  const std::string& out_path = arguments.positional[1];
  const Options options = to_options(command, arguments);

  const npy::Array input = npy::read(in_path);
  const DType dtype = float_dtype(in_path, input);
  // Checks the axis and the options against the shape before anything is computed.
  (void)plan(op, input.shape, dtype, options);

  const std::vector<std::int64_t> in_strides = input.strides();  // Fortran order is read in place
  const TensorView x(input.data.data(), dtype, input.shape, in_strides);
  const std::vector<std::int64_t> out_shape = output_shape(op, input.shape, options);
  std::vector<std::byte> output(static_cast<std::size_t>(MutableTensorView(nullptr, dtype, out_shape).numel()) *
                                size_of(dtype));
  const MutableTensorView y(output.data(), dtype, out_shape);
  switch (op) {
    case Op::softmax: softmax(x, y, options); break;
    case Op::log_softmax: log_softmax(x, y, options); break;
    case Op::logsumexp: logsumexp(x, y, options); break;
  }
  npy::write(out_path, input.descr, out_shape, output.data(), output.size());
  return 0;
}

}  // namespace smax::cli
