#include "onnx_manifest.hpp"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace smax::cli_test {
namespace {

std::vector<TensorFile> tensor_files(const Json& list, const std::filesystem::path& case_dir) {
  std::vector<TensorFile> files;
  for (const Json& entry : list.as_array()) {
    TensorFile file{case_dir / entry.at("file").as_string(), entry.at("dtype").as_string(), {}};
    for (const Json& extent : entry.at("shape").as_array()) file.shape.push_back(extent.as_int());
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace

std::int64_t OnnxCase::int_attribute(const std::string& attribute, std::int64_t fallback) const {
  const Json* value = attributes.find(attribute);
  return value == nullptr ? fallback : value->as_int();
}

std::optional<std::vector<std::int64_t>> OnnxCase::ints_attribute(const std::string& attribute) const {
  const Json* value = attributes.find(attribute);
  if (value == nullptr) return std::nullopt;
  std::vector<std::int64_t> ints;
  for (const Json& item : value->as_array()) ints.push_back(item.as_int());
  return ints;
}

std::filesystem::path conformance_dir() {
  const char* dir = std::getenv("SMAX_CONFORMANCE_DIR");
  return dir == nullptr ? std::filesystem::path() : std::filesystem::path(dir);
}

std::vector<OnnxCase> load_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "manifest.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const Json manifest = Json::parse(text);
  std::vector<OnnxCase> cases;
  for (const Json& entry : manifest.at("cases").as_array()) {
    OnnxCase c;
    c.name = entry.at("case").as_string();
    c.op = entry.at("op").as_string();
    c.opset = static_cast<int>(entry.at("opset").as_int());
    c.attributes = entry.at("attributes");
    if (!c.attributes.is_object()) throw std::runtime_error(c.name + ": 'attributes' is not an object");
    c.inputs = tensor_files(entry.at("inputs"), dir / c.name);
    c.outputs = tensor_files(entry.at("outputs"), dir / c.name);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace smax::cli_test
