// An owning strided tensor for tests: a buffer with guard elements around it, and a
// view into it in one of several layouts. Values go in and come out as long double,
// rounded to the element type on the way in and exact on the way out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "smax/dtype.hpp"
#include "smax/tensor.hpp"

namespace smax::test {

// How the view lays its elements out in the buffer.
enum class Layout {
  contiguous,  // row-major
  strided,     // row-major over every other element of the buffer
  transposed,  // column-major: the strides of the reversed dimension order
  reversed,    // every stride negative, the data pointer at the last element
  broadcast,   // row-major, but the first dimension with extent > 1 has stride 0
  misaligned,  // row-major, with the data pointer one element into the buffer
};

inline constexpr Layout kAllLayouts[] = {Layout::contiguous, Layout::strided,   Layout::transposed,
                                         Layout::reversed,   Layout::broadcast, Layout::misaligned};
// Layouts an output may have (a broadcast output overlaps itself).
inline constexpr Layout kOutputLayouts[] = {Layout::contiguous, Layout::strided, Layout::transposed,
                                            Layout::reversed, Layout::misaligned};

std::string to_string(Layout layout);

// Every element is raw bytes of this value until written (a NaN in f32 and f64,
// a NaN in f16 and bf16 too); untouched() checks the guard elements still hold it.
inline constexpr unsigned char kPoisonByte = 0xff;

class TestTensor {
 public:
  TestTensor(DType dtype, std::vector<std::int64_t> shape, Layout layout = Layout::contiguous);

  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t numel() const { return numel_; }

  const void* data() const { return element_address(origin_); }
  void* data() { return element_address(origin_); }
  TensorView view() const;
  MutableTensorView mutable_view();

  // Element access by multi-index, or by the row-major position of that index.
  long double get(std::span<const std::int64_t> index) const;
  void set(std::span<const std::int64_t> index, long double value);
  long double at(std::int64_t linear) const;
  void set_at(std::int64_t linear, long double value);

  // The raw buffer, guards included: to check that nothing was written.
  const std::vector<unsigned char>& bytes() const { return bytes_; }
  // True if no buffer element the view does not cover changed since construction.
  bool untouched_outside_view() const;

  // The multi-index of the row-major position `linear`.
  std::vector<std::int64_t> unravel(std::int64_t linear) const;
  // A one-line description for failure messages: dtype, shape, strides, layout.
  std::string describe() const;

 private:
  std::int64_t storage_index(std::span<const std::int64_t> index) const;
  std::int64_t storage_index_of(std::int64_t linear) const;
  void* element_address(std::int64_t storage) const;

  DType dtype_;
  Layout layout_;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t numel_ = 0;
  std::int64_t origin_ = 0;  // storage index of element (0, ..., 0)
  std::size_t element_size_ = 0;
  std::vector<unsigned char> bytes_;
};

// A tensor holding `values` in row-major order (rounded to the dtype).
TestTensor make_tensor(DType dtype, std::vector<std::int64_t> shape, const std::vector<long double>& values,
                       Layout layout = Layout::contiguous);

// Reads and writes one element of the given type at an address, as long double.
long double load_element(DType dtype, const void* address);
void store_element(DType dtype, void* address, long double value);

// Rounds a value to the element type and back, as storing it would.
long double round_to(DType dtype, long double value);

}  // namespace smax::test
