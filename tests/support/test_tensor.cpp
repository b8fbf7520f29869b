#include "test_tensor.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace smax::test {
namespace {

// Elements of poison before and after the region the view can reach, so that a
// write one element out of bounds shows up.
constexpr std::int64_t kGuardElements = 4;

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::vector<std::int64_t> column_major_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    strides[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::vector<std::int64_t> layout_strides(Layout layout, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides = layout == Layout::transposed ? column_major_strides(shape)
                                                                   : row_major_strides(shape);
  switch (layout) {
    case Layout::strided:
      for (auto& s : strides) s *= 2;
      break;
    case Layout::reversed:
      for (auto& s : strides) s = -s;
      break;
    case Layout::broadcast: {
      const auto wide = std::find_if(shape.begin(), shape.end(), [](std::int64_t e) { return e > 1; });
      if (wide != shape.end()) strides[static_cast<std::size_t>(wide - shape.begin())] = 0;
      break;
    }
    default:
      break;
  }
  return strides;
}

}  // namespace

std::string to_string(Layout layout) {
  switch (layout) {
    case Layout::contiguous: return "contiguous";
    case Layout::strided: return "strided";
    case Layout::transposed: return "transposed";
    case Layout::reversed: return "reversed";
    case Layout::broadcast: return "broadcast";
    case Layout::misaligned: return "misaligned";
  }
  return "?";
}

long double load_element(DType dtype, const void* address) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, address, sizeof v);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, address, sizeof v);
      return v;
    }
    case DType::f16: {
      half v;
      std::memcpy(&v.bits, address, sizeof v.bits);
      return to_float(v);
    }
    case DType::bf16: {
      bfloat16 v;
      std::memcpy(&v.bits, address, sizeof v.bits);
      return to_float(v);
    }
  }
  throw std::invalid_argument("load_element: invalid dtype");
}

void store_element(DType dtype, void* address, long double value) {
  switch (dtype) {
    case DType::f32: {
      const auto v = static_cast<float>(value);
      std::memcpy(address, &v, sizeof v);
      return;
    }
    case DType::f64: {
      const auto v = static_cast<double>(value);
      std::memcpy(address, &v, sizeof v);
      return;
    }
    case DType::f16: {
      const half v = to_half(static_cast<float>(value));
      std::memcpy(address, &v.bits, sizeof v.bits);
      return;
    }
    case DType::bf16: {
      const bfloat16 v = to_bfloat16(static_cast<float>(value));
      std::memcpy(address, &v.bits, sizeof v.bits);
      return;
    }
  }
  throw std::invalid_argument("store_element: invalid dtype");
}

long double round_to(DType dtype, long double value) {
  unsigned char scratch[8];
  store_element(dtype, scratch, value);
  return load_element(dtype, scratch);
}

TestTensor make_tensor(DType dtype, std::vector<std::int64_t> shape, const std::vector<long double>& values,
                       Layout layout) {
  TestTensor tensor(dtype, std::move(shape), layout);
  if (static_cast<std::int64_t>(values.size()) != tensor.numel()) {
    throw std::invalid_argument("make_tensor: " + std::to_string(values.size()) + " values for " +
                                tensor.describe());
  }
  for (std::int64_t i = 0; i < tensor.numel(); ++i) tensor.set_at(i, values[static_cast<std::size_t>(i)]);
  return tensor;
}

TestTensor::TestTensor(DType dtype, std::vector<std::int64_t> shape, Layout layout)
    : dtype_(dtype),
      layout_(layout),
      shape_(std::move(shape)),
      strides_(layout_strides(layout, shape_)),
      element_size_(size_of(dtype)) {
  numel_ = std::accumulate(shape_.begin(), shape_.end(), std::int64_t{1}, std::multiplies<>());
  // The storage indices the view reaches, relative to its origin.
  std::int64_t low = 0;
  std::int64_t high = 0;
  if (numel_ > 0) {
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      const std::int64_t reach = (shape_[i] - 1) * strides_[i];
      (reach < 0 ? low : high) += reach;
    }
  }
  const std::int64_t lead = kGuardElements + (layout == Layout::misaligned ? 1 : 0);
  origin_ = lead - low;
  const std::int64_t storage_elements = origin_ + high + 1 + kGuardElements;
  bytes_.assign(static_cast<std::size_t>(storage_elements) * element_size_, kPoisonByte);
}

TensorView TestTensor::view() const { return TensorView(data(), dtype_, shape_, strides_); }

MutableTensorView TestTensor::mutable_view() { return MutableTensorView(data(), dtype_, shape_, strides_); }

std::int64_t TestTensor::storage_index(std::span<const std::int64_t> index) const {
  std::int64_t s = origin_;
  for (std::size_t i = 0; i < shape_.size(); ++i) s += index[i] * strides_[i];
  return s;
}

void* TestTensor::element_address(std::int64_t storage) const {
  return const_cast<unsigned char*>(bytes_.data()) + static_cast<std::size_t>(storage) * element_size_;
}

long double TestTensor::get(std::span<const std::int64_t> index) const {
  return load_element(dtype_, element_address(storage_index(index)));
}

void TestTensor::set(std::span<const std::int64_t> index, long double value) {
  store_element(dtype_, element_address(storage_index(index)), value);
}

std::int64_t TestTensor::storage_index_of(std::int64_t linear) const {
  std::int64_t s = origin_;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    s += (linear % shape_[i]) * strides_[i];
    linear /= shape_[i];
  }
  return s;
}

long double TestTensor::at(std::int64_t linear) const {
  return load_element(dtype_, element_address(storage_index_of(linear)));
}

void TestTensor::set_at(std::int64_t linear, long double value) {
  store_element(dtype_, element_address(storage_index_of(linear)), value);
}

std::vector<std::int64_t> TestTensor::unravel(std::int64_t linear) const {
  std::vector<std::int64_t> index(shape_.size());
  for (std::size_t i = shape_.size(); i-- > 0;) {
    index[i] = linear % shape_[i];
    linear /= shape_[i];
  }
  return index;
}

bool TestTensor::untouched_outside_view() const {
  std::vector<bool> covered(bytes_.size() / element_size_, false);
  for (std::int64_t i = 0; i < numel_; ++i) covered[static_cast<std::size_t>(storage_index_of(i))] = true;
  for (std::size_t e = 0; e < covered.size(); ++e) {
    if (covered[e]) continue;
    for (std::size_t b = 0; b < element_size_; ++b) {
      if (bytes_[e * element_size_ + b] != kPoisonByte) return false;
    }
  }
  return true;
}

std::string TestTensor::describe() const {
  std::ostringstream out;
  out << to_string(dtype_) << " shape [";
  for (std::size_t i = 0; i < shape_.size(); ++i) out << (i ? ", " : "") << shape_[i];
  out << "] strides [";
  for (std::size_t i = 0; i < strides_.size(); ++i) out << (i ? ", " : "") << strides_[i];
  out << "] (" << to_string(layout_) << ")";
  return out.str();
}

}  // namespace smax::test
