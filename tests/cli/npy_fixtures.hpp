// .npy files for the tests: test tensors to and from files, and hand-made files
// (other versions, Fortran order, malformed headers) the writer never produces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "npy.hpp"
#include "test_tensor.hpp"

namespace smax::cli_test {

// Writes the view's elements in C order (or, with fortran_order, in Fortran order
// through a hand-made header).
void write_tensor(const std::filesystem::path& path, const test::TestTensor& tensor, bool fortran_order = false);

// The array as a contiguous test tensor: the elements in C order, whatever the
// file's memory order.
test::TestTensor to_tensor(const npy::Array& array);

// A file of magic, version major.0, the header length field, `header` as is (no
// padding added) and `data`.
void write_raw(const std::filesystem::path& path, int major, std::string_view header, std::string_view data);

// A well-formed header dict, padded to 64-byte alignment for the given version.
std::string header_for(std::string_view descr, bool fortran_order, std::string_view shape, int major = 1);

}  // namespace smax::cli_test
