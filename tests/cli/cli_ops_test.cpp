// The smax tool's operations on random inputs, checked element by element against
// the long double reference at the library's accuracy bar.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "process.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "smax/info.hpp"

namespace smax::cli_test {
namespace {

using test::TestTensor;

constexpr Op kOps[] = {Op::softmax, Op::log_softmax, Op::logsumexp};

std::string command_of(Op op) { return op == Op::log_softmax ? "log-softmax" : std::string(to_string(op)); }

class CliOps : public test::SeededTest {
 protected:
  TempDir dir;

  TestTensor random_tensor(DType dtype, std::vector<std::int64_t> shape) {
    TestTensor x(dtype, std::move(shape));
    test::fill_normal(x, rng(), test::random_distribution(rng()));
    return x;
  }

  // Writes x, runs `smax COMMAND in.npy out.npy OPTIONS...`, and reads the result.
  TestTensor run(Op op, const TestTensor& x, const std::vector<std::string>& options, bool fortran_order = false) {
    write_tensor(dir / "in.npy", x, fortran_order);
    std::vector<std::string> args{command_of(op), (dir / "in.npy").string(), (dir / "out.npy").string()};
    args.insert(args.end(), options.begin(), options.end());
    const RunResult result = run_cli(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.err, "");
    const npy::Array out = npy::read(dir / "out.npy");
    EXPECT_EQ(out.descr, npy::descr_of(x.dtype())) << "the output has the input's dtype";
    EXPECT_FALSE(out.fortran_order);
    return to_tensor(out);
  }

  // Runs the tool and checks against the N-d reference for the same options.
  void check(Op op, const TestTensor& x, const Options& options, const std::vector<std::string>& args,
             bool fortran_order = false) {
    SCOPED_TRACE(command_of(op) + " " + x.describe() + (fortran_order ? " (Fortran order)" : ""));
    const TestTensor y = run(op, x, args, fortran_order);
    EXPECT_TRUE(test::matches_reference(op, y, test::reference_nd(op, x, options)));
  }
};

TEST_F(CliOps, EveryOpDtypeShapeAndAxis) {
  const std::vector<std::vector<std::int64_t>> shapes{{}, {7}, {3, 5}, {4, 1, 6}, {2, 3, 4, 5}};
  for (DType dtype : {DType::f32, DType::f64, DType::f16}) {
    for (const auto& shape : shapes) {
      const TestTensor x = random_tensor(dtype, shape);
      const int rank = static_cast<int>(shape.size());
      for (int axis = -1; axis < std::max(rank, 1); ++axis) {
        Options options;
        options.axis = axis;
        for (Op op : kOps) check(op, x, options, {"--axis", std::to_string(axis)});
      }
    }
  }
}

TEST_F(CliOps, FortranOrderInputIsReadInPlace) {
  for (DType dtype : {DType::f32, DType::f64, DType::f16}) {
    for (const auto& shape : std::vector<std::vector<std::int64_t>>{{3, 5}, {2, 3, 4}}) {
      const TestTensor x = random_tensor(dtype, shape);
      for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
        Options options;
        options.axis = axis;
        for (Op op : kOps) check(op, x, options, {"--axis=" + std::to_string(axis)}, true);
      }
    }
  }
}

TEST_F(CliOps, Temperature) {
  const TestTensor x = random_tensor(DType::f32, {4, 33});
  for (double t : {0.25, 7.5}) {
    Options options;
    options.temperature = t;
    for (Op op : kOps) check(op, x, options, {"--temperature", std::to_string(t)});
  }
}

TEST_F(CliOps, Keepdims) {
  const TestTensor x = random_tensor(DType::f64, {2, 3, 4});
  Options options;
  options.axis = 1;
  options.keepdims = true;
  const TestTensor y = run(Op::logsumexp, x, {"--axis", "1", "--keepdims"});
  EXPECT_EQ(y.shape(), (std::vector<std::int64_t>{2, 1, 4}));
  EXPECT_TRUE(test::matches_reference(Op::logsumexp, y, test::reference_nd(Op::logsumexp, x, options)));
  EXPECT_EQ(run(Op::logsumexp, x, {"--axis", "1"}).shape(), (std::vector<std::int64_t>{2, 4}));
}

TEST_F(CliOps, AllMaskedRows) {
  constexpr long double kInf = std::numeric_limits<long double>::infinity();
  const TestTensor x = test::make_tensor(DType::f32, {2, 3}, {-kInf, -kInf, -kInf, 1, 2, 3});
  for (Op op : {Op::softmax, Op::log_softmax}) {
    for (AllMasked policy : {AllMasked::nan, AllMasked::zero}) {
      Options options;
      options.all_masked = policy;
      check(op, x, options, {"--all-masked", std::string(to_string(policy))});
    }
    const TestTensor zero = run(op, x, {"--all-masked", "zero"});
    EXPECT_EQ(zero.at(0), op == Op::softmax ? 0.0L : -kInf);
    EXPECT_TRUE(std::isnan(run(op, x, {}).at(0))) << "the default is nan";
  }
}

TEST_F(CliOps, EveryAlgorithmAndPassOrder) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const TestTensor x = random_tensor(dtype, {3, 1000});
    for (const char* algorithm : {"auto", "safe", "fused", "tiled", "online"}) {
      for (const char* order : {"reverse", "forward"}) {
        Options options;
        options.algorithm = parse_algorithm(algorithm).value();
        options.pass_order = std::string_view(order) == "reverse" ? PassOrder::reverse : PassOrder::forward;
        for (Op op : kOps) check(op, x, options, {"--algorithm", algorithm, "--pass-order", order});
      }
    }
  }
}

// naive computes in the storage type without subtracting the maximum: exact enough
// in f64 on small values, and it overflows to NaN where the textbook formula does.
TEST_F(CliOps, NaiveAlgorithm) {
  const TestTensor x = test::make_tensor(DType::f64, {2, 4}, {0.5, -1, 2, 3, 1, 1, 1, 1});
  Options options;
  options.algorithm = Algorithm::naive;
  for (Op op : kOps) check(op, x, options, {"--algorithm", "naive"});

  const TestTensor big = test::make_tensor(DType::f32, {3}, {1, 100, 100000});
  const TestTensor naive = run(Op::softmax, big, {"--algorithm", "naive"});
  EXPECT_TRUE(std::isnan(naive.at(2)));
  const TestTensor safe = run(Op::softmax, big, {"--algorithm", "safe"});
  EXPECT_EQ(safe.at(0), 0.0L);
  EXPECT_EQ(safe.at(2), 1.0L);
}

TEST_F(CliOps, EmptyAxis) {
  const TestTensor x(DType::f32, {3, 0});
  const TestTensor lse = run(Op::logsumexp, x, {});
  ASSERT_EQ(lse.shape(), (std::vector<std::int64_t>{3}));
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(lse.at(i), -std::numeric_limits<long double>::infinity());
  EXPECT_EQ(run(Op::softmax, x, {}).shape(), (std::vector<std::int64_t>{3, 0}));
}

TEST_F(CliOps, ThreadCountDoesNotChangeTheResult) {
  const TestTensor x = random_tensor(DType::f32, {64, 3000});
  for (Op op : kOps) {
    const TestTensor one = run(op, x, {"--threads", "1"});
    const TestTensor two = run(op, x, {"--threads", "2"});
    EXPECT_TRUE(test::bitwise_equal(one, two));
  }
}

TEST_F(CliOps, StoresDoNotChangeTheResult) {
  const TestTensor x = random_tensor(DType::f32, {64, 3000});
  for (Op op : kOps) {
    if (op == Op::logsumexp) continue;  // takes no --stores
    const TestTensor cached = run(op, x, {"--stores", "cached"});
    const TestTensor streaming = run(op, x, {"--stores", "streaming"});
    EXPECT_TRUE(test::bitwise_equal(cached, streaming));
  }
}

TEST_F(CliOps, OutputMayReplaceTheInput) {
  const TestTensor x = random_tensor(DType::f32, {2, 9});
  write_tensor(dir / "data.npy", x);
  const std::string path = (dir / "data.npy").string();
  const RunResult result = run_cli({"softmax", path, path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  Options options;
  EXPECT_TRUE(test::matches_reference(Op::softmax, to_tensor(npy::read(path)),
                                      test::reference_nd(Op::softmax, x, options)));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"data.npy"});
}

TEST(CliHelp, EveryCommandExplainsItsOptions) {
  const RunResult top = run_cli({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* word : {"softmax", "log-softmax", "logsumexp", "info", "demo", "Exit status"}) {
    EXPECT_NE(top.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(run_cli({"help"}).out, top.out);
  const RunResult softmax = run_cli({"softmax", "--help"});
  EXPECT_EQ(softmax.exit_code, 0);
  for (const char* word : {"--axis", "--temperature", "--algorithm", "--pass-order", "--threads", "--all-masked",
                           "NaN", "+inf"}) {
    EXPECT_NE(softmax.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(run_cli({"help", "log-softmax"}).out, softmax.out);
  const RunResult lse = run_cli({"logsumexp", "-h"});
  EXPECT_NE(lse.out.find("--keepdims"), std::string::npos);
  EXPECT_NE(lse.out.find("empty axis"), std::string::npos);
  EXPECT_NE(run_cli({"info", "--help"}).out.find("--shape"), std::string::npos);
  EXPECT_EQ(run_cli({"demo", "--help"}).exit_code, 0);
  const RunResult version = run_cli({"--version"});
  EXPECT_EQ(version.out, "smax " + std::string(smax::version()) + "\n");
}

TEST(CliInfo, PrintsTheMachineAndThePlan) {
  const RunResult machine = run_cli({"info"});
  ASSERT_EQ(machine.exit_code, 0) << machine.err;
  for (const char* word : {"cpu", "architecture", "vendor", "features", "L1d", "L2", "L3", "threads"}) {
    EXPECT_NE(machine.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(machine.out.find("plan for"), std::string::npos);

  const RunResult tiled = run_cli({"info", "--shape", "64x4096", "--algorithm", "tiled", "--threads", "1"});
  ASSERT_EQ(tiled.exit_code, 0) << tiled.err;
  const PlanInfo expected = plan(Op::softmax, std::vector<std::int64_t>{64, 4096}, DType::f32,
                                 Options{.algorithm = Algorithm::tiled, .threads = 1});
  for (const std::string& line : std::vector<std::string>{"algorithm   tiled", "rows        64", "length      4096", "threads     1",
                                 "block       " + std::to_string(expected.block_length)}) {
    EXPECT_NE(tiled.out.find(line), std::string::npos) << line << "\n" << tiled.out;
  }
  const RunResult streaming = run_cli({"info", "--shape", "64x4096", "--stores", "streaming"});
  ASSERT_EQ(streaming.exit_code, 0) << streaming.err;
  EXPECT_NE(streaming.out.find("stores      streaming"), std::string::npos) << streaming.out;
  EXPECT_NE(tiled.out.find("stores      cached"), std::string::npos) << tiled.out;
  const RunResult scalar = run_cli({"info", "--shape", "scalar", "--op", "logsumexp", "--dtype", "f16"});
  EXPECT_EQ(scalar.exit_code, 0) << scalar.err;
  EXPECT_NE(scalar.out.find("length      1"), std::string::npos) << scalar.out;
}

TEST(CliDemo, ShowsNaiveOverflowAndTheOthersExact) {
  const RunResult demo = run_cli({"demo"});
  ASSERT_EQ(demo.exit_code, 0) << demo.err;
  EXPECT_NE(demo.out.find("nan"), std::string::npos);
  EXPECT_NE(demo.out.find("[0, 0, 1]"), std::string::npos);
  for (const char* variant : {"safe", "fused", "tiled reverse", "tiled forward", "online reverse", "online forward",
                              "auto"}) {
    EXPECT_NE(demo.out.find(variant), std::string::npos) << variant;
  }
}

}  // namespace
}  // namespace smax::cli_test
