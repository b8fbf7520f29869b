// The ONNX backend node tests of SoftmaxCrossEntropyLoss (34 cases), run through the
// library. The loss and, where the case has it, the log-probability output are
// checked twice: against the stored ONNX output at a float32 bar, and against the
// long double reference at the library's own bar; the gradient (which ONNX does not
// store) against the long double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "onnx_manifest.hpp"
#include "smax/training.hpp"
#include "training_reference.hpp"

namespace smax::cli_test {
namespace {

using test::TestTensor;

std::vector<long double> values_of(const TestTensor& t) {
  std::vector<long double> values(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) values[static_cast<std::size_t>(i)] = t.at(i);
  return values;
}

long double ulp_f32(long double value) {
  const long double magnitude = std::fabs(value);
  return magnitude < 0x1p-126L ? 0x1p-149L : std::ldexp(1.0L, std::ilogb(magnitude) - 23);
}

// The stored outputs are float32 results within 1-2 ulp of float32 of a float64
// recomputation (shared/conformance/README.md).
bool meets_onnx_bar(long double got, long double expected) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= 4 * ulp_f32(expected) + 1e-7L * std::max(1.0L, std::fabs(expected));
}

void expect_onnx(const std::string& what, const std::vector<long double>& got, const std::vector<long double>& stored) {
  ASSERT_EQ(got.size(), stored.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < got.size() && failures < 5; ++i) {
    if (!meets_onnx_bar(got[i], stored[i])) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", ONNX expects " << stored[i];
      ++failures;
    }
  }
}

std::optional<Reduction> reduction_of(const OnnxCase& c) {
  const Json* value = c.attributes.find("reduction");
  return parse_reduction(value == nullptr ? "mean" : value->as_string());
}

TEST(OnnxSoftmaxCrossEntropy, EveryCaseThroughTheLibrary) {
  const std::filesystem::path dir = conformance_dir();
  ASSERT_TRUE(!dir.empty() && std::filesystem::exists(dir / "manifest.json"))
      << "The ONNX conformance data is missing: no manifest.json in '" << dir.string()
      << "' (SMAX_CONFORMANCE_DIR).";
  int ran = 0, with_log_prob = 0, with_weights = 0, with_ignore = 0;
  for (const OnnxCase& c : load_manifest(dir)) {
    if (c.op != "SoftmaxCrossEntropyLoss") continue;
    SCOPED_TRACE(c.name);
    ASSERT_GE(c.inputs.size(), 2u);
    const TestTensor scores = to_tensor(npy::read(c.inputs[0].path));
    const npy::Array labels = npy::read(c.inputs[1].path);
    ASSERT_EQ(labels.descr, "<i8");
    std::vector<std::int64_t> targets(static_cast<std::size_t>(labels.numel()));
    if (!targets.empty()) std::memcpy(targets.data(), labels.data.data(), labels.data.size());
    std::optional<TestTensor> weight;
    if (c.inputs.size() > 2) weight = to_tensor(npy::read(c.inputs[2].path));

    CrossEntropyOptions options;
    options.axis = 1;
    const std::optional<Reduction> reduction = reduction_of(c);
    ASSERT_TRUE(reduction.has_value());
    options.reduction = *reduction;
    if (c.attributes.find("ignore_index") != nullptr) options.ignore_index = c.int_attribute("ignore_index", 0);
    if (weight) options.weight = weight->view();

    const std::vector<std::int64_t> loss_shape = npy::read(c.outputs.at(0).path).shape;
    TestTensor loss(scores.dtype(), loss_shape);
    TestTensor log_prob(scores.dtype(), scores.shape());
    TestTensor grad(scores.dtype(), scores.shape());
    cross_entropy(scores.view(), IndexView(targets.data(), labels.shape), loss.mutable_view(), options,
                  {.log_prob = log_prob.mutable_view(), .grad = grad.mutable_view()});

    test::CrossEntropyCase reference_case;
    reference_case.shape = scores.shape();
    reference_case.axis = 1;
    reference_case.logits = values_of(scores);
    reference_case.indices = targets;
    if (weight) reference_case.weight = values_of(*weight);
    reference_case.ignore_index = options.ignore_index;
    reference_case.reduction = options.reduction;
    const test::CrossEntropyReference reference = test::cross_entropy_reference(reference_case);

    expect_onnx("loss vs ONNX", values_of(loss), values_of(to_tensor(npy::read(c.outputs[0].path))));
    EXPECT_TRUE(test::meets_training_bar("loss vs reference", loss, reference.loss, {}, 0));
    EXPECT_TRUE(test::meets_training_bar("grad vs reference", grad, reference.grad.values, reference.grad.cancelled,
                                         0x1p-22L));
    EXPECT_TRUE(test::matches_reference(Op::log_softmax, log_prob, test::Expected{scores.shape(), reference.log_prob}));
    if (c.outputs.size() > 1) {
      expect_onnx("log_prob vs ONNX", values_of(log_prob), values_of(to_tensor(npy::read(c.outputs[1].path))));
      ++with_log_prob;
    }
    with_weights += weight ? 1 : 0;
    with_ignore += options.ignore_index ? 1 : 0;
    ++ran;
  }
  EXPECT_EQ(ran, 34);
  std::cout << "SoftmaxCrossEntropyLoss through the library: " << ran << " cases (" << with_log_prob
            << " with log_prob, " << with_weights << " with weights, " << with_ignore << " with ignore_index)\n";
}

}  // namespace
}  // namespace smax::cli_test
