// smax info: the machine as the library sees it, and the plan for a shape.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "choices.hpp"
#include "commands.hpp"
#include "smax/info.hpp"

namespace smax::cli {
namespace {

constexpr std::array<OptionSpec, 8> kInfoOptions{{{"shape", true},
                                                  {"axis", true},
                                                  {"dtype", true},
                                                  {"op", true},
                                                  {"threads", true},
                                                  {"algorithm", true},
                                                  {"pass-order", true},
                                                  {"stores", true}}};

std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string joined;
  for (std::size_t i = 0; i < items.size(); ++i) joined += (i ? separator : "") + items[i];
  return joined;
}

void print_machine() {
  const MachineInfo& m = machine();
  auto cache = [&](const char* label, std::int64_t bytes, const std::string& field) {
    const bool assumed = std::find(m.assumed.begin(), m.assumed.end(), field) != m.assumed.end();
    return std::string(label) + " " + kib(bytes) + (assumed ? " (assumed)" : "");
  };
  std::cout << "smax          " << version() << '\n'
            << "cpu           " << m.cpu_model << '\n'
            << "architecture  " << m.architecture << '\n'
            << "vendor        " << (m.vendor.empty() ? "(not detected)" : m.vendor) << '\n'
            << "features      " << (m.features.empty() ? "(none detected)" : join(m.features, " ")) << '\n'
            << "caches        "
            << join({cache("L1d", m.l1d_bytes, "l1d_bytes"), cache("L2", m.l2_bytes, "l2_bytes"),
                     cache("L3", m.l3_bytes, "l3_bytes")},
                    ", ")
            << '\n'
            << "threads       " << m.threads << '\n';
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  std::vector<std::string> extents;
  for (std::int64_t extent : shape) extents.push_back(std::to_string(extent));
  std::string text = "[";
  text += join(extents, ", ");
  text += "]";
  return text;
}

}  // namespace

int run_info(std::span<const std::string> args) {
  const Arguments arguments = parse_arguments("info", args, kInfoOptions);
  constexpr std::array<std::string_view, 0> kNone{};
  expect_positional("info", arguments, kNone);
  Options options;
  if (auto text = arguments.value("axis")) options.axis = parse_int("info", "axis", *text);
  if (auto text = arguments.value("threads")) options.threads = parse_int("info", "threads", *text);
  if (auto text = arguments.value("algorithm")) options.algorithm = algorithm_choice("info", *text);
  if (auto text = arguments.value("pass-order")) options.pass_order = pass_order_choice("info", *text);
  if (auto text = arguments.value("stores")) options.stores = stores_choice("info", *text);
  const DType dtype = dtype_choice("info", arguments.value("dtype").value_or("f32"));
  const Op op = op_choice("info", arguments.value("op").value_or("softmax"));
  const auto shape_text = arguments.value("shape");
  const std::vector<std::int64_t> shape = shape_text ? parse_shape("info", *shape_text) : std::vector<std::int64_t>{};

  // Plan first, so that a rejected request prints nothing but the error.
  PlanInfo p;
  if (shape_text) p = plan(op, shape, dtype, options);
  print_machine();
  if (!shape_text) return 0;
  std::cout << "\nplan for " << op_command_name(op) << " of " << to_string(dtype) << ' ' << format_shape(shape)
            << " along axis " << options.axis << '\n'
            << "  algorithm   " << to_string(p.algorithm) << '\n'
            << "  pass order  " << to_string(p.pass_order) << '\n'
            << "  rows        " << p.rows << '\n'
            << "  length      " << p.length << '\n'
            << "  block       " << (p.block_length > 0 ? std::to_string(p.block_length) : "-") << '\n'
            << "  chunks of   " << (p.chunk_length > 0 ? std::to_string(p.chunk_length) : "- (rows are not split)") << '\n'
            << "  panels of   " << (p.panel_width > 0 ? std::to_string(p.panel_width) + " columns" : "- (the axis runs as rows)") << '\n'
            << "  threads     " << p.threads << '\n'
            << "  stores      " << to_string(p.stores) << '\n'
            << "  reason      " << p.reason << '\n';
  return 0;
}

}  // namespace smax::cli
