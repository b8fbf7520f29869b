// The text of `smax --help` and `smax COMMAND --help`.
#pragma once

#include <optional>
#include <string_view>

namespace smax::cli {

std::string_view general_help();
// nullopt for a name that is not a command.
std::optional<std::string_view> command_help(std::string_view command);

}  // namespace smax::cli
