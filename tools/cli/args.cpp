#include "args.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace smax::cli {

std::optional<std::string> Arguments::value(std::string_view name) const {
  const auto found = values_.find(std::string(name));
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

Arguments parse_arguments(const std::string& command, std::span<const std::string> args,
                          std::span<const OptionSpec> options) {
  Arguments result;
  bool options_ended = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_ended || arg.size() < 2 || arg[0] != '-') {
      result.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_ended = true;
      continue;
    }
    if (!arg.starts_with("--")) throw UsageError(command, "unknown option '" + arg + "'");
    const std::size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const auto spec = std::find_if(options.begin(), options.end(),
                                   [&](const OptionSpec& option) { return option.name == name; });
    if (spec == options.end()) throw UsageError(command, "unknown option '--" + name + "'");
    if (result.values_.contains(name)) throw UsageError(command, "option '--" + name + "' is given twice");
    std::string value;
    if (!spec->takes_value) {
      if (equals != std::string::npos) throw UsageError(command, "option '--" + name + "' takes no value");
    } else if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw UsageError(command, "option '--" + name + "' needs a value");
    }
    result.values_[name] = value;
  }
  return result;
}

bool wants_help(std::span<const std::string> args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

int parse_int(const std::string& command, std::string_view option, const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) {
    throw UsageError(command, "--" + std::string(option) + " " + text + ": out of range");
  }
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw UsageError(command, "--" + std::string(option) + " " + text + ": not an integer");
  }
  return value;
}

double parse_number(const std::string& command, std::string_view option, const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw UsageError(command, "--" + std::string(option) + ": expected a number, got '" + text + "'");
  }
  return value;
}

void expect_positional(const std::string& command, const Arguments& arguments,
                       std::span<const std::string_view> names) {
  const std::size_t got = arguments.positional.size();
  if (got < names.size()) throw UsageError(command, "missing " + std::string(names[got]));
  if (got > names.size()) {
    throw UsageError(command, "unexpected extra argument '" + arguments.positional[names.size()] + "'");
  }
}

// "64x128256" -> {64, 128256}; "" and "scalar" -> {} (rank 0).
std::vector<std::int64_t> parse_shape(const std::string& command, const std::string& text) {
  std::vector<std::int64_t> shape;
  if (text.empty() || text == "scalar") return shape;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find('x', begin), text.size());
    const std::string piece = text.substr(begin, end - begin);
    std::int64_t extent = 0;
    const auto [stop, error] = std::from_chars(piece.data(), piece.data() + piece.size(), extent);
    if (error != std::errc() || stop != piece.data() + piece.size() || piece.empty() || extent < 0) {
      throw UsageError(command, "--shape " + text + ": '" + piece +
                                    "' is not a non-negative integer (write extents as 64x128256)");
    }
    shape.push_back(extent);
    if (end == text.size()) return shape;
    begin = end + 1;
  }
}

}  // namespace smax::cli
