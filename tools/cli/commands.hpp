// The subcommands. Each takes the arguments after its name and returns the exit
// status; errors are thrown (UsageError, smax::Error) and reported by main.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace smax::cli {

// softmax, log-softmax and logsumexp.
int run_operation(const std::string& command, std::span<const std::string> args);
int run_info(std::span<const std::string> args);
int run_demo(std::span<const std::string> args);
int run_bench(std::span<const std::string> args);
// cross-entropy, softmax-backward and log-softmax-backward (training_command.cpp).
bool is_training_command(std::string_view command);
std::optional<std::string_view> training_help(std::string_view command);
int run_training(const std::string& command, std::span<const std::string> args);

}  // namespace smax::cli
