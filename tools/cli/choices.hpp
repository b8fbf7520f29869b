// The named values options take (--algorithm safe, --dtype f16, ...). An unknown
// name is a UsageError that lists the valid ones.
#pragma once

#include <string>

#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::cli {

Algorithm algorithm_choice(const std::string& command, const std::string& name);
PassOrder pass_order_choice(const std::string& command, const std::string& name);
AllMasked all_masked_choice(const std::string& command, const std::string& name);
Stores stores_choice(const std::string& command, const std::string& name);
DType dtype_choice(const std::string& command, const std::string& name);
// "softmax", "log-softmax" or "logsumexp": the command names of the operations.
Op op_choice(const std::string& command, const std::string& name);
std::string op_command_name(Op op);

}  // namespace smax::cli
