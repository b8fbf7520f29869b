// Failing runs of the smax tool: the exit code, a message that names the problem,
// and an output file that is left exactly as it was (no temporary files either).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "process.hpp"

namespace smax::cli_test {
namespace {

constexpr int kRunFailed = 1;
constexpr int kUsage = 2;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const float values[6] = {1, 2, 3, 4, 5, 6};
    const std::int64_t shape[] = {2, 3};
    npy::write(in(), "<f4", shape, values, sizeof values);
    std::ofstream(out(), std::ios::binary) << kPrevious;
  }

  std::string in() const { return (dir / "in.npy").string(); }
  std::string out() const { return (dir / "out.npy").string(); }

  // Runs the tool and checks that it failed as expected and changed nothing.
  void expect_failure(const std::vector<std::string>& args, int exit_code, const std::string& message) {
    std::string command;
    for (const std::string& arg : args) command += " " + arg;
    SCOPED_TRACE("smax" + command);
    const std::vector<std::string> files_before = dir.list();
    const RunResult result = run_cli(args);
    EXPECT_EQ(result.exit_code, exit_code) << result.err;
    EXPECT_TRUE(result.err.starts_with("smax: error: ")) << result.err;
    EXPECT_NE(result.err.find(message), std::string::npos) << "stderr: " << result.err;
    if (exit_code == kUsage) {
      EXPECT_NE(result.err.find("--help"), std::string::npos) << result.err;
    }
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(slurp(out()), kPrevious) << "the output file changed";
    EXPECT_EQ(dir.list(), files_before) << "files were created or removed";
  }

  static constexpr const char* kPrevious = "previous contents of out.npy";
  TempDir dir;
};

TEST_F(CliErrors, UnreadableInputs) {
  std::ofstream(dir / "garbage.npy") << "not numpy at all";
  expect_failure({"softmax", (dir / "garbage.npy").string(), out()}, kRunFailed,
                 (dir / "garbage.npy").string() + ": not a .npy file (bad magic)");
  expect_failure({"softmax", (dir / "missing.npy").string(), out()}, kRunFailed,
                 "missing.npy: cannot open: No such file or directory");

  const std::int64_t ints[3] = {1, 2, 3};
  const std::int64_t shape[] = {3};
  npy::write(dir / "ints.npy", "<i8", shape, ints, sizeof ints);
  expect_failure({"log-softmax", (dir / "ints.npy").string(), out()}, kRunFailed,
                 "ints.npy: dtype int64 ('<i8') is not supported; use float32, float64 or float16");

  write_raw(dir / "big.npy", 1, header_for(">f4", false, "(2,)"), std::string(8, '\0'));
  expect_failure({"softmax", (dir / "big.npy").string(), out()}, kRunFailed,
                 "big.npy: big-endian data ('>f4') is not supported; use little-endian");

  write_raw(dir / "short.npy", 1, header_for("<f4", false, "(24,)"), std::string(80, '\0'));
  expect_failure({"logsumexp", (dir / "short.npy").string(), out()}, kRunFailed,
                 "short.npy: truncated: header says 24 elements (96 bytes) but 80 bytes follow");
}

TEST_F(CliErrors, OptionsTheLibraryRejects) {
  expect_failure({"softmax", in(), out(), "--axis", "5"}, kRunFailed, "axis 5 is out of range");
  expect_failure({"logsumexp", in(), out(), "--axis=-3"}, kRunFailed, "axis -3 is out of range");
  expect_failure({"softmax", in(), out(), "--temperature", "0"}, kRunFailed, "temperature must be finite and > 0");
  expect_failure({"softmax", in(), out(), "--temperature", "-1"}, kRunFailed, "temperature must be finite and > 0");
  expect_failure({"softmax", in(), out(), "--threads", "-1"}, kRunFailed, "threads must be >= 0");

  std::vector<float> long_rows(2 * 16385, 1.0f);
  const std::int64_t shape[] = {2, 16385};
  npy::write(dir / "long.npy", "<f4", shape, long_rows.data(), long_rows.size() * sizeof(float));
  expect_failure({"softmax", (dir / "long.npy").string(), out(), "--algorithm", "fused"}, kRunFailed,
                 "fused holds rows of at most 16384 elements; the axis has length 16385");
}

TEST_F(CliErrors, MalformedCommandLines) {
  expect_failure({"softmax", in(), out(), "--axis", "abc"}, kUsage, "--axis abc: not an integer");
  expect_failure({"softmax", in(), out(), "--axis=1.5"}, kUsage, "--axis 1.5: not an integer");
  expect_failure({"softmax", in(), out(), "--temperature", "x"}, kUsage, "--temperature: expected a number, got 'x'");
  expect_failure({"softmax", in(), out(), "--frob"}, kUsage, "unknown option '--frob'");
  expect_failure({"softmax", in(), out(), "-x"}, kUsage, "unknown option '-x'");
  expect_failure({"softmax", in(), out(), "--keepdims"}, kUsage, "unknown option '--keepdims'");
  expect_failure({"logsumexp", in(), out(), "--keepdims=1"}, kUsage, "option '--keepdims' takes no value");
  expect_failure({"softmax", in(), out(), "--axis"}, kUsage, "option '--axis' needs a value");
  expect_failure({"softmax", in(), out(), "--axis", "0", "--axis", "1"}, kUsage, "option '--axis' is given twice");
  expect_failure({"softmax", in(), out(), "--algorithm", "fast"}, kUsage,
                 "--algorithm fast: unknown value (valid: auto, naive, safe, fused, tiled, online)");
  expect_failure({"softmax", in(), out(), "--pass-order", "sideways"}, kUsage, "valid: reverse, forward");
  expect_failure({"softmax", in(), out(), "--stores", "around"}, kUsage, "valid: auto, cached, streaming");
  expect_failure({"softmax", in(), out(), "--all-masked", "inf"}, kUsage, "valid: nan, zero");
  expect_failure({"softmax", in()}, kUsage, "missing OUT.npy");
  expect_failure({"softmax"}, kUsage, "missing IN.npy");
  expect_failure({"softmax", in(), out(), "third"}, kUsage, "unexpected extra argument 'third'");
  expect_failure({}, kUsage, "missing command");
  expect_failure({"softmaxx", in(), out()}, kUsage, "unknown command 'softmaxx'");
  expect_failure({"info", "--shape", "4xz"}, kUsage, "--shape 4xz: 'z' is not a non-negative integer");
  expect_failure({"info", "--dtype", "f128"}, kUsage, "valid: f32, f64, f16, bf16");
}

TEST_F(CliErrors, UnwritableOutputs) {
  const RunResult missing_dir = run_cli({"softmax", in(), (dir / "no/such/dir/out.npy").string()});
  EXPECT_EQ(missing_dir.exit_code, kRunFailed);
  EXPECT_NE(missing_dir.err.find("No such file or directory"), std::string::npos) << missing_dir.err;

  std::filesystem::create_directory(dir / "taken.npy");
  const std::vector<std::string> before = dir.list();
  const RunResult taken = run_cli({"softmax", in(), (dir / "taken.npy").string()});
  EXPECT_EQ(taken.exit_code, kRunFailed);
  EXPECT_NE(taken.err.find("taken.npy: cannot replace"), std::string::npos) << taken.err;
  EXPECT_EQ(dir.list(), before) << "the temporary file must be removed";
}

}  // namespace
}  // namespace smax::cli_test
