// Command-line parsing shared by the commands: options, positionals and numbers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace smax::cli {

// A malformed command line (exit code 2). `command` is the subcommand whose
// --help the message should point to; empty for the top level.
class UsageError : public std::runtime_error {
 public:
  UsageError(std::string command, const std::string& message)
      : std::runtime_error(message), command_(std::move(command)) {}
  const std::string& command() const noexcept { return command_; }

 private:
  std::string command_;
};

struct OptionSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value;
};

class Arguments {
 public:
  std::vector<std::string> positional;

  bool has(std::string_view name) const { return values_.contains(std::string(name)); }
  std::optional<std::string> value(std::string_view name) const;

 private:
  friend Arguments parse_arguments(const std::string& command, std::span<const std::string> args,
                                   std::span<const OptionSpec> options);
  std::map<std::string, std::string> values_;  // a flag maps to ""
};

// Accepts "--name value" and "--name=value"; a value may start with '-' ("--axis -1").
// "--" ends the options. Unknown, repeated or incomplete options throw UsageError.
Arguments parse_arguments(const std::string& command, std::span<const std::string> args,
                          std::span<const OptionSpec> options);

// True if the arguments ask for help ("--help" or "-h" before any "--").
bool wants_help(std::span<const std::string> args);

// The whole text must be the number: "--axis abc: not an integer".
int parse_int(const std::string& command, std::string_view option, const std::string& text);
double parse_number(const std::string& command, std::string_view option, const std::string& text);

// A --shape value: extents joined by 'x' ("64x128256"); "" or "scalar" is rank 0.
std::vector<std::int64_t> parse_shape(const std::string& command, const std::string& text);

// Checks the count of positional arguments; `names` lists them for the message.
void expect_positional(const std::string& command, const Arguments& arguments,
                       std::span<const std::string_view> names);

}  // namespace smax::cli
