// smax: the command-line front end. It translates arguments into library calls;
// the maths and the validation live in the library.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "help.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"

namespace {

using smax::cli::UsageError;

int dispatch(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("", "missing command");
  const std::string& command = args[0];
  const std::span<const std::string> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h") {
    std::cout << smax::cli::general_help();
    return 0;
  }
  if (command == "--version") {
    std::cout << "smax " << smax::version() << '\n';
    return 0;
  }
  if (command == "help") {
    if (rest.empty()) {
      std::cout << smax::cli::general_help();
      return 0;
    }
    if (rest.size() > 1) throw UsageError("help", "unexpected extra argument '" + rest[1] + "'");
    const auto text = smax::cli::command_help(rest[0]);
    if (!text) throw UsageError("", "unknown command '" + rest[0] + "'");
    std::cout << *text;
    return 0;
  }
  const auto help = smax::cli::command_help(command);
  if (!help) throw UsageError("", "unknown command '" + command + "'");
  if (smax::cli::wants_help(rest)) {
    std::cout << *help;
    return 0;
  }
  if (command == "info") return smax::cli::run_info(rest);
  if (command == "demo") return smax::cli::run_demo(rest);
  if (command == "bench") return smax::cli::run_bench(rest);
  if (smax::cli::is_training_command(command)) return smax::cli::run_training(command, rest);
  return smax::cli::run_operation(command, rest);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    const std::string help = e.command().empty() ? "smax --help" : "smax " + e.command() + " --help";
    std::cerr << "smax: error: " << e.what() << "\nRun '" << help << "' for usage.\n";
    return 2;
  } catch (const smax::Error& e) {
    std::cerr << "smax: error: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "smax: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "smax: error: " << e.what() << '\n';
    return 1;
  }
}
