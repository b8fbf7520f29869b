// The ONNX backend node tests of Softmax, LogSoftmax and ReduceLogSumExp, run
// through the library and through the smax tool. Each result is checked twice:
// against the stored ONNX output at a float32 bar, and against the long double
// reference at the library's own accuracy bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "nd_reference.hpp"
#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "onnx_manifest.hpp"
#include "process.hpp"
#include "reference/reference.hpp"
#include "smax/ops.hpp"

namespace smax::cli_test {
namespace {

using test::TestTensor;

// What a case asks for, in smax's terms.
struct Request {
  Op op = Op::softmax;
  std::vector<std::int64_t> shape;  // the input's shape as smax sees it
  std::vector<int> axes;            // softmax: the one axis; logsumexp: the reduced axes, ascending
  bool keepdims = true;             // logsumexp only
};

std::int64_t product(std::span<const std::int64_t> extents) {
  return std::accumulate(extents.begin(), extents.end(), std::int64_t{1}, std::multiplies<>());
}

Request request_for(const OnnxCase& c) {
  const std::vector<std::int64_t>& shape = c.inputs.at(0).shape;
  const int rank = static_cast<int>(shape.size());
  auto normalize = [&](std::int64_t axis) { return static_cast<int>(axis < 0 ? axis + rank : axis); };
  Request r;
  if (c.op == "Softmax" || c.op == "LogSoftmax") {
    r.op = c.op == "Softmax" ? Op::softmax : Op::log_softmax;
    const int axis = normalize(c.int_attribute("axis", c.opset >= 13 ? -1 : 1));
    if (c.opset >= 13) {
      r.shape = shape;
      r.axes = {axis};
    } else {
      // Before opset 13 the input is coerced to 2-D at `axis` and normalised over
      // the flattened trailing dimensions.
      const auto split = shape.begin() + axis;
      r.shape = {product({shape.begin(), split}), product({split, shape.end()})};
      r.axes = {1};
    }
    return r;
  }
  r.op = Op::logsumexp;
  r.shape = shape;
  r.keepdims = c.int_attribute("keepdims", 1) != 0;
  std::vector<std::int64_t> axes;
  if (c.inputs.size() > 1) {  // opset 18: the axes are a second, int64 input
    const npy::Array given = npy::read(c.inputs[1].path);
    EXPECT_EQ(given.descr, "<i8");
    axes.resize(static_cast<std::size_t>(given.numel()));
    if (!axes.empty()) std::memcpy(axes.data(), given.data.data(), given.data.size());  // memcpy of null is UB
  } else if (auto attribute = c.ints_attribute("axes")) {
    axes = *attribute;
  }
  if (axes.empty() && c.int_attribute("noop_with_empty_axes", 0) == 0) {
    for (int axis = 0; axis < rank; ++axis) r.axes.push_back(axis);
  }
  for (std::int64_t axis : axes) r.axes.push_back(normalize(axis));
  std::sort(r.axes.begin(), r.axes.end());
  return r;
}

// The input as the request sees it: the file's values in C order, reshaped.
TestTensor load_input(const OnnxCase& c, const Request& r) {
  const TestTensor file = to_tensor(npy::read(c.inputs.at(0).path));
  std::vector<long double> values(static_cast<std::size_t>(file.numel()));
  for (std::int64_t i = 0; i < file.numel(); ++i) values[static_cast<std::size_t>(i)] = file.at(i);
  return test::make_tensor(file.dtype(), r.shape, values);
}

std::vector<long double> values_of(const TestTensor& t) {
  std::vector<long double> values(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) values[static_cast<std::size_t>(i)] = t.at(i);
  return values;
}

// The shape after reducing `axes` with keepdims.
std::vector<std::int64_t> kept_shape(std::vector<std::int64_t> shape, const std::vector<int>& axes) {
  for (int axis : axes) shape[static_cast<std::size_t>(axis)] = 1;
  return shape;
}

// logsumexp over several axes is logsumexp over one axis at a time: the inner
// results are the logs of partial sums, so composing them is exact maths.
std::vector<long double> run_library(const Request& r, const TestTensor& x) {
  if (r.op != Op::logsumexp) {
    TestTensor y(x.dtype(), r.shape);
    Options options;
    options.axis = r.axes.at(0);
    if (r.op == Op::softmax) softmax(x.view(), y.mutable_view(), options);
    else log_softmax(x.view(), y.mutable_view(), options);
    return values_of(y);
  }
  TestTensor current = x;
  for (int axis : r.axes) {
    TestTensor next(x.dtype(), kept_shape(current.shape(), {axis}));
    Options options;
    options.axis = axis;
    options.keepdims = true;
    logsumexp(current.view(), next.mutable_view(), options);
    current = std::move(next);
  }
  return values_of(current);  // keepdims or not, the C-order values are the same
}

std::vector<long double> run_tool(const Request& r, const TestTensor& x) {
  const TempDir dir;
  write_tensor(dir / "in.npy", x);
  std::string current = (dir / "in.npy").string();
  if (r.op != Op::logsumexp) {
    const std::string out = (dir / "out.npy").string();
    const RunResult run = run_cli({r.op == Op::softmax ? "softmax" : "log-softmax", current, out, "--axis",
                                   std::to_string(r.axes.at(0))});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    current = out;
  }
  for (std::size_t k = 0; k < (r.op == Op::logsumexp ? r.axes.size() : 0); ++k) {
    const std::string next = (dir / ("step" + std::to_string(k) + ".npy")).string();
    const RunResult run = run_cli({"logsumexp", current, next, "--axis=" + std::to_string(r.axes[k]), "--keepdims"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    current = next;
  }
  return values_of(to_tensor(npy::read(current)));
}

// The long double reference: softmax through the N-d reference, logsumexp over all
// reduced axes at once (one row per output element).
std::vector<long double> strict_reference(const Request& r, const TestTensor& x) {
  if (r.op != Op::logsumexp) {
    Options options;
    options.axis = r.axes.at(0);
    return test::reference_nd(r.op, x, options).values;
  }
  const std::vector<std::int64_t> out_shape = kept_shape(r.shape, r.axes);
  std::vector<std::vector<long double>> rows(static_cast<std::size_t>(product(out_shape)));
  for (std::int64_t linear = 0; linear < x.numel(); ++linear) {
    const std::vector<std::int64_t> index = x.unravel(linear);
    std::int64_t out = 0;
    for (std::size_t k = 0; k < index.size(); ++k) out = out * out_shape[k] + (out_shape[k] == 1 ? 0 : index[k]);
    rows[static_cast<std::size_t>(out)].push_back(x.at(linear));
  }
  std::vector<long double> reference;
  for (const auto& row : rows) {
    long double value = 0;
    reference::row(Op::logsumexp, row, std::span<long double>(&value, 1));
    reference.push_back(value);
  }
  return reference;
}

long double ulp_f32(long double value) {
  const long double magnitude = std::fabs(value);
  return magnitude < 0x1p-126L ? 0x1p-149L : std::ldexp(1.0L, std::ilogb(magnitude) - 23);
}

// The stored outputs are float32 (or float64) results within 1-2 ulp of float32
// of a float64 recomputation.
bool meets_onnx_bar(long double got, long double expected) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= 4 * ulp_f32(expected) + 1e-7L * std::max(1.0L, std::fabs(expected));
}

void check_result(const std::string& path, const Request& r, DType dtype, const std::vector<long double>& got,
                  const std::vector<long double>& expected, const std::vector<long double>& reference) {
  ASSERT_EQ(got.size(), expected.size()) << path;
  ASSERT_EQ(got.size(), reference.size()) << path;
  int failures = 0;
  for (std::size_t i = 0; i < got.size() && failures < 5; ++i) {
    std::string why;
    if (!meets_onnx_bar(got[i], expected[i])) {
      ADD_FAILURE() << path << ": element " << i << " is " << got[i] << ", ONNX expects " << expected[i];
      ++failures;
    }
    if (!test::meets_bar(r.op, dtype, got[i], reference[i], &why)) {
      ADD_FAILURE() << path << ": element " << i << " is " << got[i] << ", reference " << reference[i] << ": " << why;
      ++failures;
    }
  }
}

// Runs `check` on every Softmax, LogSoftmax and ReduceLogSumExp case and prints a
// summary; the SoftmaxCrossEntropyLoss cases are tests/cli/onnx_sce_test.cpp's.
void for_each_case(const std::string& path, const std::function<void(const OnnxCase&)>& check) {
  const std::filesystem::path dir = conformance_dir();
  ASSERT_TRUE(!dir.empty() && std::filesystem::exists(dir / "manifest.json"))
      << "The ONNX conformance data is missing: no manifest.json in '" << dir.string()
      << "' (SMAX_CONFORMANCE_DIR). It is expected in ../shared/conformance/onnx next to the repository; "
         "configure with -DSMAX_CONFORMANCE_DIR=/path/to/conformance/onnx.";
  const std::vector<OnnxCase> cases = load_manifest(dir);
  std::map<std::string, int> ran;
  for (const OnnxCase& c : cases) {
    SCOPED_TRACE(c.name + " (" + c.op + ", opset " + std::to_string(c.opset) + ")");
    if (c.op == "SoftmaxCrossEntropyLoss") continue;
    if (c.op != "Softmax" && c.op != "LogSoftmax" && c.op != "ReduceLogSumExp") {
      ADD_FAILURE() << "unknown op " << c.op;
      continue;
    }
    check(c);
    ++ran[c.op];
  }
  for (const char* op : {"Softmax", "LogSoftmax", "ReduceLogSumExp"}) EXPECT_GT(ran[op], 0) << "no " << op << " case";
  std::cout << "ONNX conformance through the " << path << ": " << ran["Softmax"] + ran["LogSoftmax"] + ran["ReduceLogSumExp"]
            << " cases ran (Softmax " << ran["Softmax"] << ", LogSoftmax " << ran["LogSoftmax"]
            << ", ReduceLogSumExp " << ran["ReduceLogSumExp"] << "); " << cases.size()
            << " in the manifest (SoftmaxCrossEntropyLoss: onnx_sce_test)\n";
}

TEST(OnnxConformance, ThroughTheLibrary) {
  for_each_case("library", [](const OnnxCase& c) {
    const Request r = request_for(c);
    const TestTensor x = load_input(c, r);
    const std::vector<long double> expected = values_of(to_tensor(npy::read(c.outputs.at(0).path)));
    check_result("library", r, x.dtype(), run_library(r, x), expected, strict_reference(r, x));
  });
}

TEST(OnnxConformance, ThroughTheTool) {
  for_each_case("smax tool", [](const OnnxCase& c) {
    const Request r = request_for(c);
    const TestTensor x = load_input(c, r);
    const std::vector<long double> expected = values_of(to_tensor(npy::read(c.outputs.at(0).path)));
    const std::vector<long double> got = run_tool(r, x);
    check_result("smax tool", r, x.dtype(), got, expected, strict_reference(r, x));
    // The tool adds no arithmetic of its own: its results are the library's, bit for bit.
    const std::vector<long double> library = run_library(r, x);
    ASSERT_EQ(got.size(), library.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i] == library[i] || (std::isnan(got[i]) && std::isnan(library[i]))) << "element " << i;
    }
  });
}

TEST(OnnxConformance, StoredShapesMatchTheRequest) {
  for_each_case("shape check", [](const OnnxCase& c) {
    const Request r = request_for(c);
    std::vector<std::int64_t> shape = r.op == Op::logsumexp ? kept_shape(r.shape, r.axes) : c.inputs[0].shape;
    if (r.op == Op::logsumexp && !r.keepdims) {
      std::vector<std::int64_t> kept;
      for (std::size_t k = 0; k < shape.size(); ++k) {
        if (std::find(r.axes.begin(), r.axes.end(), static_cast<int>(k)) == r.axes.end()) kept.push_back(shape[k]);
      }
      shape = kept;
    }
    EXPECT_EQ(npy::read(c.outputs.at(0).path).shape, shape);
  });
}

}  // namespace
}  // namespace smax::cli_test
