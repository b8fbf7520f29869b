// The subcommands. Each takes the arguments after its name and returns the exit
// status; errors are thrown (UsageError, smax::Error) and reported by main.
#pragma once

#include <span>
#include <string>

namespace smax::cli {

// softmax, log-softmax and logsumexp.
int run_operation(const std::string& command, std::span<const std::string> args);
int run_info(std::span<const std::string> args);
int run_demo(std::span<const std::string> args);
int run_bench(std::span<const std::string> args);

}  // namespace smax::cli
