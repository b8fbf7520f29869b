#include "npy_fixtures.hpp"

#include <fstream>
#include <stdexcept>

namespace smax::cli_test {

void write_tensor(const std::filesystem::path& path, const test::TestTensor& tensor, bool fortran_order) {
  const std::size_t size = size_of(tensor.dtype());
  std::string data(static_cast<std::size_t>(tensor.numel()) * size, '\0');
  // Element k of the file holds the element whose index unravels k in the file's order.
  std::vector<std::int64_t> index(tensor.shape().size());
  for (std::int64_t k = 0; k < tensor.numel(); ++k) {
    std::int64_t rest = k;
    for (std::size_t j = 0; j < index.size(); ++j) {
      const std::size_t axis = fortran_order ? j : index.size() - 1 - j;
      index[axis] = rest % tensor.shape()[axis];
      rest /= tensor.shape()[axis];
    }
    test::store_element(tensor.dtype(), data.data() + static_cast<std::size_t>(k) * size, tensor.get(index));
  }
  const std::string descr(npy::descr_of(tensor.dtype()));
  if (!fortran_order) {
    npy::write(path, descr, tensor.shape(), data.data(), data.size());
    return;
  }
  std::string shape = "(";
  for (std::int64_t extent : tensor.shape()) shape += std::to_string(extent) + ", ";
  shape += ")";
  write_raw(path, 1, header_for(descr, true, shape), data);
}

test::TestTensor to_tensor(const npy::Array& array) {
  const DType dtype = array.dtype().value();
  test::TestTensor tensor(dtype, array.shape);
  const std::vector<std::int64_t> strides = array.strides();
  for (std::int64_t linear = 0; linear < tensor.numel(); ++linear) {
    const std::vector<std::int64_t> index = tensor.unravel(linear);
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < index.size(); ++k) offset += index[k] * strides[k];
    tensor.set_at(linear, test::load_element(dtype, array.data.data() + offset * static_cast<std::int64_t>(size_of(dtype))));
  }
  return tensor;
}

void write_raw(const std::filesystem::path& path, int major, std::string_view header, std::string_view data) {
  std::string bytes = "\x93NUMPY";
  bytes.push_back(static_cast<char>(major));
  bytes.push_back('\0');
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  bytes += header;
  bytes += data;
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string header_for(std::string_view descr, bool fortran_order, std::string_view shape, int major) {
  std::string header = "{'descr': '";
  header += descr;
  header += "', 'fortran_order': ";
  header += fortran_order ? "True" : "False";
  header += ", 'shape': ";
  header += shape;
  header += ", }";
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  return header;
}

}  // namespace smax::cli_test
