// The shape and strides of a nanobind array as smax's views take them, shared by the
// extension's translation units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smax_python {

template <class Array>
std::vector<std::int64_t> shape_of(const Array& a) {
  std::vector<std::int64_t> shape(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<std::int64_t>(a.shape(i));
  return shape;
}

// nanobind reports strides in elements, as smax wants them (0 and negative included).
template <class Array>
std::vector<std::int64_t> strides_of(const Array& a) {
  std::vector<std::int64_t> strides(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) strides[i] = a.stride(i);
  return strides;
}

}  // namespace smax_python
