// smax cross-entropy, softmax-backward and log-softmax-backward: the tool adds no
// arithmetic, so its files must hold the library's results bit for bit (the library's
// accuracy is tested in tests/unit and by the ONNX cases); flags reach the library;
// failures exit with the documented status and write no file.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "process.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "smax/training.hpp"

namespace smax::cli_test {
namespace {

using test::TestTensor;

void expect_same_bits(const TestTensor& a, const TestTensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const long double x = a.at(i), y = b.at(i);
    ASSERT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << what << ": element " << i << ": " << x << " vs " << y;
  }
}

class CliTraining : public test::SeededTest {
 protected:
  TempDir dir;

  TestTensor random(DType dtype, std::vector<std::int64_t> shape) {
    TestTensor t(dtype, std::move(shape));
    test::fill_normal(t, rng(), test::Distribution{0, 2});
    return t;
  }

  void write_indices(const std::string& name, const std::vector<std::int64_t>& shape,
                     const std::vector<std::int64_t>& values, bool as_i32) {
    if (as_i32) {
      std::vector<std::int32_t> narrow(values.begin(), values.end());
      npy::write(dir / name, "<i4", shape, narrow.data(), narrow.size() * sizeof(std::int32_t));
    } else {
      npy::write(dir / name, "<i8", shape, values.data(), values.size() * sizeof(std::int64_t));
    }
  }

  TestTensor read(const std::string& name) { return to_tensor(npy::read(dir / name)); }
};

TEST_F(CliTraining, CrossEntropyFilesHoldTheLibrarysResults) {
  for (bool as_i32 : {false, true}) {
    for (const char* reduction : {"none", "sum", "mean"}) {
      SCOPED_TRACE(std::string(reduction) + (as_i32 ? " i32" : " i64"));
      const TestTensor logits = random(DType::f32, {4, 7, 3});
      TestTensor weight(DType::f32, {7});
      for (std::int64_t c = 0; c < 7; ++c) weight.set_at(c, 0.5L + static_cast<long double>(c) / 4);
      std::vector<std::int64_t> targets(12);
      for (auto& t : targets) t = static_cast<std::int64_t>(rng()() % 7);
      targets[5] = -100;
      write_tensor(dir / "logits.npy", logits);
      write_tensor(dir / "w.npy", weight);
      write_indices("t.npy", {4, 3}, targets, as_i32);
      const RunResult run = run_cli({"cross-entropy", (dir / "logits.npy").string(), (dir / "t.npy").string(),
                                     (dir / "loss.npy").string(), "--weights", (dir / "w.npy").string(),
                                     "--ignore-index", "-100", "--reduction", reduction, "--label-smoothing=0.1",
                                     "--grad", (dir / "g.npy").string(), "--log-prob", (dir / "lp.npy").string(),
                                     "--stores", "streaming"});
      ASSERT_EQ(run.exit_code, 0) << run.err;
      EXPECT_EQ(run.err, "");

      CrossEntropyOptions options;
      options.reduction = *parse_reduction(reduction);
      options.ignore_index = -100;
      options.label_smoothing = 0.1;
      options.weight = weight.view();
      std::vector<std::int64_t> loss_shape;
      if (options.reduction == Reduction::none) loss_shape = {4, 3};
      TestTensor loss(DType::f32, loss_shape), grad(DType::f32, {4, 7, 3}), log_prob(DType::f32, {4, 7, 3});
      cross_entropy(logits.view(), IndexView(targets.data(), {4, 3}), loss.mutable_view(), options,
                    {.log_prob = log_prob.mutable_view(), .grad = grad.mutable_view()});
      expect_same_bits(read("loss.npy"), loss, "loss");
      expect_same_bits(read("g.npy"), grad, "grad");
      expect_same_bits(read("lp.npy"), log_prob, "log_prob");
    }
  }
}

TEST_F(CliTraining, CrossEntropyWithProbabilitiesOnTheLastAxis) {
  for (DType dtype : {DType::f64, DType::f16}) {
    const TestTensor logits = random(dtype, {5, 11});
    TestTensor probabilities(dtype, {5, 11});
    for (std::int64_t i = 0; i < probabilities.numel(); ++i) probabilities.set_at(i, (i % 3) / 4.0L);
    write_tensor(dir / "logits.npy", logits);
    write_tensor(dir / "p.npy", probabilities);
    const RunResult run = run_cli({"cross-entropy", (dir / "logits.npy").string(), (dir / "p.npy").string(),
                                   (dir / "loss.npy").string(), "--axis", "-1", "--reduction", "sum"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    TestTensor loss(dtype, {});
    cross_entropy(logits.view(), probabilities.view(), loss.mutable_view(), {.axis = -1, .reduction = Reduction::sum});
    expect_same_bits(read("loss.npy"), loss, "loss");
  }
}

TEST_F(CliTraining, BackwardFilesHoldTheLibrarysResults) {
  for (bool log : {false, true}) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16}) {
      const TestTensor y = random(dtype, {3, 6, 5});
      const TestTensor dy = random(dtype, {3, 6, 5});
      write_tensor(dir / "y.npy", y);
      write_tensor(dir / "dy.npy", dy, /*fortran_order=*/true);
      const RunResult run = run_cli({log ? "log-softmax-backward" : "softmax-backward", (dir / "y.npy").string(),
                                     (dir / "dy.npy").string(), (dir / "dx.npy").string(), "--axis", "1",
                                     "--temperature", "0.5", "--stores", "streaming"});
      ASSERT_EQ(run.exit_code, 0) << run.err;
      // The library on dy as the file holds it, column-major: which kernels a strided
      // axis takes depends on every tensor's strides, and their roundings may differ.
      TestTensor dy_as_read(dtype, {3, 6, 5}, test::Layout::transposed);
      for (std::int64_t i = 0; i < dy.numel(); ++i) dy_as_read.set_at(i, dy.at(i));
      TestTensor dx(dtype, {3, 6, 5});
      const BackwardOptions options{.axis = 1, .temperature = 0.5};
      if (log) log_softmax_backward(y.view(), dy_as_read.view(), dx.mutable_view(), options);
      else softmax_backward(y.view(), dy_as_read.view(), dx.mutable_view(), options);
      expect_same_bits(read("dx.npy"), dx, log ? "log_softmax_backward" : "softmax_backward");
    }
  }
}

TEST_F(CliTraining, FailuresExitWithTheirStatusAndWriteNothing) {
  const TestTensor logits = random(DType::f32, {3, 4});
  write_tensor(dir / "logits.npy", logits);
  write_indices("t.npy", {3}, {0, 9, 1}, false);
  const std::string l = (dir / "logits.npy").string(), t = (dir / "t.npy").string(), out = (dir / "out.npy").string(),
                    g = (dir / "g.npy").string();
  RunResult run = run_cli({"cross-entropy", l, t, out, "--grad", g});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("target [1] is 9"), std::string::npos) << run.err;
  run = run_cli({"cross-entropy", l, t, out, "--reduction", "average"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--reduction average"), std::string::npos) << run.err;
  run = run_cli({"cross-entropy", l, t, out, "--ignore-index", "1.5"});
  EXPECT_EQ(run.exit_code, 2);
  run = run_cli({"cross-entropy", l, t});
  EXPECT_EQ(run.exit_code, 2);
  run = run_cli({"cross-entropy", l, t, out, "--label-smoothing", "2"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("label_smoothing"), std::string::npos) << run.err;
  run = run_cli({"softmax-backward", l, t, out});  // int64 dy
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("int64"), std::string::npos) << run.err;
  run = run_cli({"log-softmax-backward", l, l, out, "--axis", "2"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("axis 2"), std::string::npos) << run.err;
  run = run_cli({"softmax-backward", l, l, out, "--stores", "around"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stores around"), std::string::npos) << run.err;
  run = run_cli({"cross-entropy", l, t, out, "--stores", "around"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--stores around"), std::string::npos) << run.err;
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"logits.npy", "t.npy"}));
  run = run_cli({"cross-entropy", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("--label-smoothing"), std::string::npos);
}

}  // namespace
}  // namespace smax::cli_test
