// The ONNX conformance cases listed in manifest.json (see shared/conformance/README.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "json.hpp"

namespace smax::cli_test {

struct TensorFile {
  std::filesystem::path path;  // absolute
  std::string dtype;           // "float32", "int64", ...
  std::vector<std::int64_t> shape;
};

struct OnnxCase {
  std::string name;  // "test_softmax_axis_0", "pytorch-converted/test_Softmax"
  std::string op;    // "Softmax", "LogSoftmax", "ReduceLogSumExp", ...
  int opset = 0;
  Json attributes;
  std::vector<TensorFile> inputs;
  std::vector<TensorFile> outputs;

  // An integer attribute, or `fallback` (the ONNX default) when absent.
  std::int64_t int_attribute(const std::string& attribute, std::int64_t fallback) const;
  // An attribute holding a list of integers (ReduceLogSumExp's axes before opset 18).
  std::optional<std::vector<std::int64_t>> ints_attribute(const std::string& attribute) const;
};

// SMAX_CONFORMANCE_DIR from the environment (set by CMake); empty if unset.
std::filesystem::path conformance_dir();

// Every case of `dir`/manifest.json. Throws std::runtime_error if it cannot be read.
std::vector<OnnxCase> load_manifest(const std::filesystem::path& dir);

}  // namespace smax::cli_test
