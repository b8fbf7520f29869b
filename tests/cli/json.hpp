// A small JSON reader, enough for the conformance manifest: objects, arrays,
// strings (with the common escapes), numbers, true, false and null.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace smax::cli_test {

class Json {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  // Throws std::runtime_error with the offset of the first problem.
  static Json parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::object; }

  // Typed access; each throws std::runtime_error if the value has another kind.
  bool as_bool() const;
  double as_number() const;
  std::int64_t as_int() const;  // the number must be integral
  const std::string& as_string() const;
  const std::vector<Json>& as_array() const;

  // Object members: find() returns nullptr for a missing key, at() throws.
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  const std::vector<std::string>& keys() const;

 private:
  friend class JsonParser;
  void expect(Kind kind, const char* what) const;

  Kind kind_ = Kind::null;
  bool boolean_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;        // array elements, or object values
  std::vector<std::string> keys_;  // object keys, parallel to items_
};

}  // namespace smax::cli_test
