#include "choices.hpp"

#include <array>
#include <optional>

#include "args.hpp"

namespace smax::cli {
namespace {

// Looks `name` up among the spellings `to_string` gives each candidate.
template <class T, std::size_t N, class Spell>
std::optional<T> find_by_name(const std::array<T, N>& candidates, const std::string& name, Spell spell) {
  for (T candidate : candidates) {
    if (spell(candidate) == name) return candidate;
  }
  return std::nullopt;
}

template <class T, std::size_t N, class Spell>
[[noreturn]] void reject(const std::string& command, const std::string& option, const std::string& name,
                         const std::array<T, N>& candidates, Spell spell) {
  std::string valid;
  for (std::size_t i = 0; i < N; ++i) valid += (i ? ", " : "") + std::string(spell(candidates[i]));
  throw UsageError(command, "--" + option + " " + name + ": unknown value (valid: " + valid + ")");
}

constexpr std::array kAlgorithms{Algorithm::automatic, Algorithm::naive, Algorithm::safe,
                                 Algorithm::fused,     Algorithm::tiled, Algorithm::online};
constexpr std::array kPassOrders{PassOrder::reverse, PassOrder::forward};
constexpr std::array kAllMasked{AllMasked::nan, AllMasked::zero};
constexpr std::array kStores{Stores::automatic, Stores::cached, Stores::streaming};
constexpr std::array kDTypes{DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr std::array kOps{Op::softmax, Op::log_softmax, Op::logsumexp};

auto library_name = [](auto value) { return to_string(value); };

}  // namespace

Algorithm algorithm_choice(const std::string& command, const std::string& name) {
  if (const auto algorithm = parse_algorithm(name)) return *algorithm;
  reject(command, "algorithm", name, kAlgorithms, library_name);
}

PassOrder pass_order_choice(const std::string& command, const std::string& name) {
  if (const auto order = parse_pass_order(name)) return *order;
  reject(command, "pass-order", name, kPassOrders, library_name);
}

AllMasked all_masked_choice(const std::string& command, const std::string& name) {
  if (const auto policy = parse_all_masked(name)) return *policy;
  reject(command, "all-masked", name, kAllMasked, library_name);
}

Stores stores_choice(const std::string& command, const std::string& name) {
  if (const auto stores = parse_stores(name)) return *stores;
  reject(command, "stores", name, kStores, library_name);
}

DType dtype_choice(const std::string& command, const std::string& name) {
  if (const auto dtype = parse_dtype(name)) return *dtype;
  reject(command, "dtype", name, kDTypes, library_name);
}

std::string op_command_name(Op op) { return op == Op::log_softmax ? "log-softmax" : std::string(to_string(op)); }

Op op_choice(const std::string& command, const std::string& name) {
  if (const auto op = find_by_name(kOps, name, op_command_name)) return *op;
  reject(command, "op", name, kOps, op_command_name);
}

}  // namespace smax::cli
