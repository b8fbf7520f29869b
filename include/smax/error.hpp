// smax::Error: the one exception type the library throws.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace smax {

// What kind of argument was wrong. Front ends map it to their own error types
// (the Python package raises TypeError for `dtype`, ValueError otherwise).
enum class Errc {
  shape,      // shape mismatch, negative extent, rank out of range, size overflow
  axis,       // axis out of range
  dtype,      // unsupported or mismatched element type
  strides,    // an output view that overlaps itself
  overlap,    // output partially overlaps the input
  null_data,  // null pointer with a non-empty shape
  option,     // bad option value (temperature, threads, algorithm, fused too long)
  io,         // file format problems (used by the CLI's .npy reader and writer)
};

std::string_view to_string(Errc code) noexcept;

// Thrown for every invalid call. The message names the offending argument and
// its value. When it is thrown, nothing has been written to any output.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

}  // namespace smax
