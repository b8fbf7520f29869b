// Running the smax executable and a scratch directory for its files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace smax::cli_test {

struct RunResult {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};

// The CLI under test, from the SMAX_CLI environment variable (set by CMake).
std::filesystem::path cli_path();

// Runs the CLI with `args` (no shell), waiting for it to finish.
RunResult run_cli(const std::vector<std::string>& args);

// A fresh directory under the system temp directory, removed with its contents.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // The names of the files in it, sorted.
  std::vector<std::string> list() const;

 private:
  std::filesystem::path path_;
};

}  // namespace smax::cli_test
