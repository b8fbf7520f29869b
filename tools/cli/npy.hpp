// Reading and writing NumPy .npy files (format versions 1.0 and 2.0), for the CLI and
// the tests. Only little-endian numeric types are supported; anything else is
// rejected with smax::Error(Errc::io) naming the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smax/dtype.hpp"

namespace smax::npy {

struct Array {
  std::string descr;  // NumPy's type string, e.g. "<f4", "|u1"
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  std::vector<std::byte> data;

  // The element type for "<f2", "<f4" and "<f8"; nullopt for every other descr.
  std::optional<DType> dtype() const;
  // NumPy's name of the element type: "float32", "int64", "bool", ...
  std::string type_name() const;
  std::size_t item_size() const;
  std::int64_t numel() const;  // 1 for rank 0
  // Strides in elements, for the array's memory order (C or Fortran).
  std::vector<std::int64_t> strides() const;
};

// The descr the writer and reader use for a library element type ("<f4" for f32).
// bf16 has no NumPy type; it throws smax::Error(Errc::io).
std::string_view descr_of(DType dtype);

// Reads a whole .npy file. Throws smax::Error(Errc::io) for anything it does not
// accept: a message that starts with the path and names the exact problem.
Array read(const std::filesystem::path& path);

// Writes a C-order array. `bytes` must equal the element count times the item size.
// Atomic: the data goes to a temporary file in the destination's directory, which
// is renamed over `path` only when complete; on failure `path` is untouched.
void write(const std::filesystem::path& path, std::string_view descr, std::span<const std::int64_t> shape,
           const void* data, std::size_t bytes);

}  // namespace smax::npy
