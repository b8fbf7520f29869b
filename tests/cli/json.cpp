#include "json.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace smax::cli_test {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool consume_word(std::string_view word) {
    if (!text_.substr(pos_).starts_with(word)) return false;
    pos_ += word.size();
    return true;
  }

  Json parse_value() {
    skip_space();
    Json value;
    const char c = peek();
    if (c == '{') {
      value.kind_ = Json::Kind::object;
      parse_sequence('}', [&] {
        skip_space();
        value.keys_.push_back(parse_string());
        skip_space();
        expect(':');
        value.items_.push_back(parse_value());
      });
    } else if (c == '[') {
      value.kind_ = Json::Kind::array;
      parse_sequence(']', [&] { value.items_.push_back(parse_value()); });
    } else if (c == '"') {
      value.kind_ = Json::Kind::string;
      value.string_ = parse_string();
    } else if (consume_word("true")) {
      value.kind_ = Json::Kind::boolean;
      value.boolean_ = true;
    } else if (consume_word("false")) {
      value.kind_ = Json::Kind::boolean;
    } else if (consume_word("null")) {
      value.kind_ = Json::Kind::null;
    } else {
      value.kind_ = Json::Kind::number;
      value.number_ = parse_number();
    }
    return value;
  }

  // "{a, b, c}" or "[a, b, c]" after the opening bracket; `element` parses one.
  template <class Element>
  void parse_sequence(char close, Element element) {
    ++pos_;
    skip_space();
    if (peek() == close) {
      ++pos_;
      return;
    }
    while (true) {
      element();
      skip_space();
      if (peek() == close) {
        ++pos_;
        return;
      }
      expect(',');
    }
  }

  std::string parse_string() {
    expect('"');
    std::string s;
    while (peek() != '"') {
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '\\') {
        const char escaped = peek();
        ++pos_;
        switch (escaped) {
          case '"': case '\\': case '/': c = escaped; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          default: fail("unsupported escape");  // \u does not occur in the manifest
        }
      }
      s.push_back(c);
    }
    ++pos_;
    return s;
  }

  double parse_number() {
    double value = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), value);
    if (error != std::errc() || end == begin) fail("expected a value");
    pos_ += static_cast<std::size_t>(end - begin);
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

Json Json::parse(std::string_view text) { return JsonParser(text).parse_document(); }

void Json::expect(Kind kind, const char* what) const {
  if (kind_ != kind) throw std::runtime_error(std::string("JSON: expected ") + what);
}

bool Json::as_bool() const {
  expect(Kind::boolean, "true or false");
  return boolean_;
}

double Json::as_number() const {
  expect(Kind::number, "a number");
  return number_;
}

std::int64_t Json::as_int() const {
  expect(Kind::number, "an integer");
  if (number_ != std::trunc(number_) || std::fabs(number_) > 0x1p53) {
    throw std::runtime_error("JSON: expected an integer, got " + std::to_string(number_));
  }
  return static_cast<std::int64_t>(number_);
}

const std::string& Json::as_string() const {
  expect(Kind::string, "a string");
  return string_;
}

const std::vector<Json>& Json::as_array() const {
  expect(Kind::array, "an array");
  return items_;
}

const Json* Json::find(std::string_view key) const {
  expect(Kind::object, "an object");
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) throw std::runtime_error("JSON: missing key '" + std::string(key) + "'");
  return *value;
}

const std::vector<std::string>& Json::keys() const {
  expect(Kind::object, "an object");
  return keys_;
}

}  // namespace smax::cli_test
