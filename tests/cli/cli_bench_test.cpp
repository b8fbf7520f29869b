// smax bench on tiny workloads: the JSON and CSV it writes (fields, every
// implementation, accuracy of the exact variants), --list, and the errors of a
// malformed command line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "json.hpp"
#include "process.hpp"

namespace smax::cli_test {
namespace {

constexpr int kUsage = 2;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::vector<std::string> kSmaxImpls{"smax:auto",          "smax:auto-cached", "smax:online",
                                          "smax:online-forward", "smax:tiled",       "smax:tiled-forward",
                                          "smax:safe",           "smax:fused",       "smax:naive"};

// Runs the tool and returns its result; the command line is in the failure message.
RunResult bench(const std::vector<std::string>& args) {
  std::vector<std::string> full{"bench"};
  full.insert(full.end(), args.begin(), args.end());
  return run_cli(full);
}

class CliBench : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(CliBench, JsonAndCsvHoldEveryMeasurement) {
  const std::string json_path = (dir / "out.json").string();
  const std::string csv_path = (dir / "out.csv").string();
  const RunResult result = bench({"--workload", "classify", "--repeats", "2", "--bytes", "1M", "--memory", "16M",
                                  "--threads", "1", "--json", json_path, "--csv", csv_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("== classify"), std::string::npos) << result.out;

  const Json json = Json::parse(slurp(json_path));
  const Json& machine = json.at("machine");
  EXPECT_FALSE(machine.at("cpu_model").as_string().empty());
  EXPECT_GE(machine.at("threads").as_int(), 1);
  EXPECT_GT(machine.at("l1d_bytes").as_int(), 0);
  EXPECT_FALSE(machine.at("smax_version").as_string().empty());
  const Json& libraries = machine.at("libraries");

  std::set<std::string> impls;
  const auto& results = json.at("results").as_array();
  for (const Json& r : results) {
    const std::string impl = r.at("impl").as_string();
    SCOPED_TRACE(impl);
    impls.insert(impl);
    EXPECT_EQ(r.at("workload").as_string(), "classify");
    ASSERT_EQ(r.at("shape").as_array().size(), 2u);
    EXPECT_EQ(r.at("shape").as_array()[0].as_int(), 256);
    EXPECT_EQ(r.at("shape").as_array()[1].as_int(), 1000);
    EXPECT_EQ(r.at("axis").as_int(), 1);
    EXPECT_EQ(r.at("dtype").as_string(), "f32");
    EXPECT_EQ(r.at("threads").as_int(), 1);
    EXPECT_EQ(r.at("repeats").as_int(), 2);
    EXPECT_GT(r.at("median_s").as_number(), 0);
    EXPECT_GT(r.at("gbps").as_number(), 0);
    EXPECT_TRUE(r.at("ok").as_bool());
    EXPECT_EQ(r.at("bytes").as_int(), 256 * 1000 * 4 * 2);
    if (impl == "copy" || impl == "copy-nt") {
      EXPECT_EQ(r.at("max_rel_err").kind(), Json::Kind::null);
    } else {
      // Exact variants are within a few ulp of the long double reference; naive
      // computes a float exp and is still close on these benign inputs.
      const double bar = impl.starts_with("smax:") && impl != "smax:naive" ? 1e-6 : 1e-4;
      EXPECT_LT(r.at("max_rel_err").as_number(), bar);
    }
  }
  EXPECT_TRUE(impls.contains("copy"));
#if defined(__SSE2__)
  EXPECT_TRUE(impls.contains("copy-nt"));
#endif
  for (const std::string& impl : kSmaxImpls) EXPECT_TRUE(impls.contains(impl)) << impl;
  // The libraries this build has are measured; the others are null in the machine.
  for (const char* library : {"onednn", "xnnpack", "pytorch"}) {
    EXPECT_EQ(libraries.at(library).kind() != Json::Kind::null, impls.contains(library)) << library;
  }

  const std::vector<std::string> csv = lines_of(slurp(csv_path));
  ASSERT_EQ(csv.size(), results.size() + 1);
  EXPECT_TRUE(csv[0].starts_with("workload,op,shape,axis,dtype,threads,impl,median_s,")) << csv[0];
  EXPECT_NE(csv[0].find(",gbps,"), std::string::npos);
  EXPECT_NE(csv[0].find(",max_rel_err,"), std::string::npos);
  for (std::size_t i = 1; i < csv.size(); ++i) EXPECT_TRUE(csv[i].starts_with("classify,softmax,256x1000,1,f32,1,")) << csv[i];
}

TEST_F(CliBench, HalfPrecisionAndSkips) {
  const std::string json_path = (dir / "half.json").string();
  const RunResult result = bench({"--workload", "half", "--impl", "smax:auto,smax:fused,xnnpack", "--repeats", "1",
                                  "--bytes", "64K", "--memory", "0", "--threads", "1", "--json", json_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json json = Json::parse(slurp(json_path));
  const std::int64_t cache = json.at("settings").at("cache_bytes").as_int();
  std::set<std::string> dtypes;
  for (const Json& r : json.at("results").as_array()) {
    dtypes.insert(r.at("dtype").as_string());
    EXPECT_NE(r.at("impl").as_string(), "xnnpack") << "XNNPACK has no 16-bit softmax";
    if (r.at("bytes").as_int() < cache) {
      EXPECT_EQ(r.at("data").as_string(), "cache") << "--memory 0 keeps one set, which fits in the cache";
    }
    const double bar = r.at("dtype").as_string() == "f16" ? 1e-3 : 8e-3;  // about one ulp
    EXPECT_LT(r.at("max_rel_err").as_number(), bar);
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"bf16", "f16"}));
  // fused skips the 128256-long rows, with the reason.
  bool fused_skipped = false;
  for (const Json& s : json.at("skipped").as_array()) {
    if (s.at("impl").as_string() == "smax:fused") {
      fused_skipped = true;
      EXPECT_NE(s.at("reason").as_string().find("16384"), std::string::npos);
    }
  }
  EXPECT_TRUE(fused_skipped);
}

TEST_F(CliBench, ListShowsThePointsSizedByBytes) {
  const RunResult result = bench({"--workload", "sweep,axis", "--bytes", "1M", "--list"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string& out = result.out;
  // 1 MiB moved at 128 f32 columns is 1024 rows; 2^20 columns is one row.
  EXPECT_NE(out.find("1024x128 f32"), std::string::npos) << out;
  EXPECT_NE(out.find("1x1048576 f32"), std::string::npos) << out;
  EXPECT_NE(out.find("3x50257 f32"), std::string::npos) << out;  // 3.6 rows round to 3
  EXPECT_NE(out.find("32x[81]x8732 f32"), std::string::npos) << out;
  EXPECT_NE(out.find("[4096]x4096 f32"), std::string::npos) << out;
  EXPECT_NE(out.find("smax:online-forward"), std::string::npos) << out;
}

// Tensors 16 bytes past a page, as NumPy's: the kernels and the check read the same
// shifted buffers (an input left unshifted would be read unfilled and fail the check).
TEST_F(CliBench, OffsetTensorsPassTheCheck) {
  const std::string json_path = (dir / "offset.json").string();
  const RunResult result = bench({"--workload", "classify", "--impl", "copy,smax:auto,smax:online", "--repeats", "1",
                                  "--bytes", "64K", "--memory", "16M", "--threads", "1", "--offset", "16", "--json",
                                  json_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("every tensor starts 16 bytes past a page"), std::string::npos) << result.out;
  const Json json = Json::parse(slurp(json_path));
  EXPECT_EQ(json.at("settings").at("offset_bytes").as_int(), 16);
  const auto& results = json.at("results").as_array();
  EXPECT_EQ(results.size(), 3u);
  for (const Json& r : results) {
    SCOPED_TRACE(r.at("impl").as_string());
    EXPECT_TRUE(r.at("ok").as_bool());
    if (r.at("impl").as_string() != "copy") {
      EXPECT_LT(r.at("max_rel_err").as_number(), 1e-6);
    }
  }
}

// --shape times the user's own tensors: each shape in each dtype, along --axis, in a
// table of their own; alone, it runs no other workload.
TEST_F(CliBench, ShapesGivenOnTheCommandLine) {
  const std::string json_path = (dir / "shapes.json").string();
  const RunResult result = bench({"--shape", "6x40x3,2x33x5", "--axis", "-2", "--dtype", "f32,bf16", "--impl",
                                  "copy,smax:auto", "--repeats", "1", "--memory", "16M", "--threads", "1", "--json",
                                  json_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("== shape"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("== classify"), std::string::npos) << result.out;
  const Json json = Json::parse(slurp(json_path));
  std::set<std::string> points;
  for (const Json& r : json.at("results").as_array()) {
    SCOPED_TRACE(r.at("impl").as_string());
    EXPECT_EQ(r.at("workload").as_string(), "shape");
    EXPECT_EQ(r.at("axis").as_int(), 1);
    EXPECT_TRUE(r.at("ok").as_bool());
    std::ostringstream label;
    label << r.at("dtype").as_string();
    for (const Json& extent : r.at("shape").as_array()) label << ' ' << extent.as_int();
    points.insert(label.str());
    if (r.at("impl").as_string() == "smax:auto") {
      EXPECT_LT(r.at("max_rel_err").as_number(), r.at("dtype").as_string() == "f32" ? 1e-6 : 8e-3);
    }
  }
  EXPECT_EQ(points, (std::set<std::string>{"f32 6 40 3", "bf16 6 40 3", "f32 2 33 5", "bf16 2 33 5"}));

  const RunResult listed = bench({"--workload", "classify", "--shape", "16x16", "--list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("256x1000 f32"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("shape: the shapes given by --shape"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("16x16 f32"), std::string::npos) << listed.out;
}

// --op log-softmax times log_softmax beside softmax: every variant's output checked
// against the log_softmax reference (all <= 0), the op named in the table, the JSON
// and the CSV.
TEST_F(CliBench, LogSoftmaxPointsAreCheckedAgainstTheirOwnReference) {
  const std::string json_path = (dir / "ops.json").string();
  const std::string csv_path = (dir / "ops.csv").string();
  const RunResult result = bench({"--shape", "300x10,3x33,4x1000", "--axis", "-1", "--op", "log-softmax,softmax",
                                  "--impl", "copy,smax", "--repeats", "1", "--memory", "0", "--threads", "1",
                                  "--json", json_path, "--csv", csv_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("log-softmax 300x10"), std::string::npos) << result.out;
  std::map<std::string, int> ops;
  const Json json = Json::parse(slurp(json_path));
  for (const Json& r : json.at("results").as_array()) {
    const std::string op = r.at("op").as_string();
    const std::string impl = r.at("impl").as_string();
    SCOPED_TRACE(op + " " + impl);
    ++ops[op];
    EXPECT_TRUE(r.at("ok").as_bool());
    if (impl != "copy" && impl != "copy-nt" && impl != "smax:naive") {
      EXPECT_LT(r.at("max_rel_err").as_number(), 1e-6);
    }
  }
  EXPECT_GT(ops["log_softmax"], 0);
  EXPECT_EQ(ops["log_softmax"], ops["softmax"]);
  EXPECT_EQ(ops.size(), 2u);
  EXPECT_NE(slurp(csv_path).find("shape,log_softmax,300x10,1,f32,1,smax:auto,"), std::string::npos);
}

TEST_F(CliBench, HelpNamesTheWorkloads) {
  const RunResult result = run_cli({"bench", "--help"});
  ASSERT_EQ(result.exit_code, 0);
  for (const char* word : {"--workload", "sweep", "vocab", "attention", "classify", "long-row", "axis", "half",
                           "--bytes", "--offset", "--json", "--plot", "--shape", "--dtype", "--op"}) {
    EXPECT_NE(result.out.find(word), std::string::npos) << word;
  }
}

TEST_F(CliBench, MalformedCommandLines) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"--workload", "nope"}, "--workload nope: unknown workload (valid: sweep, vocab"},
      {{"--workload", "classify,"}, "--workload : unknown workload"},
      {{"--threads", "0"}, "--threads 0: a thread count must be >= 1"},
      {{"--threads", "two"}, "--threads two: not an integer"},
      {{"--bytes", "12Q"}, "--bytes 12Q: expected a size"},
      {{"--bytes", "100"}, "--bytes must be at least 1K"},
      {{"--repeats", "0"}, "--repeats must be at least 1"},
      {{"--offset", "4096"}, "--offset 4096: must be less than a page (4096 bytes)"},
      {{"--workload", "classify", "--offset", "2"}, "--offset 2: not a multiple of the 4-byte elements of f32"},
      {{"--impl", "torch"}, "--impl torch: unknown implementation"},
      {{"--shape", "64x0"}, "--shape 64x0: every extent must be at least 1"},
      {{"--shape", "64xx8"}, "--shape 64xx8: '' is not a non-negative integer"},
      {{"--shape", "scalar"}, "--shape scalar: a bench point needs at least one axis"},
      {{"--shape", "64x8,5", "--axis", "1"}, "--axis 1 is out of range for --shape 5 of rank 1 (valid: -1 to 0)"},
      {{"--shape", "64x8", "--dtype", "f8"}, "--dtype f8: unknown value"},
      {{"--axis", "0"}, "--axis applies to --shape, which is missing"},
      {{"--op", "log-softmax"}, "--op applies to --shape, which is missing"},
      {{"--shape", "64x8", "--op", "exp"}, "--op exp: unknown value"},
      {{"--shape", "64x8", "--op", "logsumexp"}, "--op logsumexp: the bench times ops whose output has the input's"},
      {{"--shape", "64x8", "--offset", "2"}, "--offset 2: not a multiple of the 4-byte elements of f32"},
      {{"--frobnicate"}, "unknown option '--frobnicate'"},
      {{"extra"}, "unexpected extra argument 'extra'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const RunResult result = bench(c.args);
    EXPECT_EQ(result.exit_code, kUsage) << result.err;
    EXPECT_NE(result.err.find("smax: error: " + c.message), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("smax bench --help"), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

TEST_F(CliBench, UnwritableOutputFailsBeforeMeasuring) {
  const RunResult result = bench({"--workload", "classify", "--json", (dir / "missing" / "out.json").string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("does not exist"), std::string::npos) << result.err;
  EXPECT_EQ(result.out, "");
}

}  // namespace
}  // namespace smax::cli_test
