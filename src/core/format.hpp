// Small helpers that spell values the same way in every error message.
#pragma once

#include <cstdint>
#include <sstream>
#include <span>
#include <string>

namespace smax::detail {

inline std::string format_list(std::span<const std::int64_t> values) {
  std::string s = "[";
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

inline std::string format_pointer(const void* p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

inline std::string format_double(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace smax::detail
