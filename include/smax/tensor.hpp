// Non-owning views of strided N-d tensors.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "smax/dtype.hpp"

namespace smax {

inline constexpr int kMaxRank = 8;

// A read-only view: data pointer, element type, shape and strides (in elements, not
// bytes). Strides may be anything: non-contiguous, 0 (a broadcast dimension) or
// negative (a reversed view, as NumPy makes). Rank 0 is a scalar.
// Construction checks the rank (0..8), that no extent is negative and that the
// product of the extents (of those not 0, too) fits int64; it throws smax::Error.
class TensorView {
 public:
  TensorView() = default;  // a rank-0 view of nothing; only useful to assign to
  // Row-major (C-contiguous) strides.
  TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape);
  TensorView(const void* data, DType dtype, std::initializer_list<std::int64_t> shape)
      : TensorView(data, dtype, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  TensorView(const void* data, DType dtype, std::span<const std::int64_t> shape,
             std::span<const std::int64_t> strides);
  TensorView(const void* data, DType dtype, std::initializer_list<std::int64_t> shape,
             std::initializer_list<std::int64_t> strides)
      : TensorView(data, dtype, std::span<const std::int64_t>(shape.begin(), shape.size()),
                   std::span<const std::int64_t>(strides.begin(), strides.size())) {}

  const void* data() const noexcept { return data_; }
  DType dtype() const noexcept { return dtype_; }
  int rank() const noexcept { return rank_; }
  std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), static_cast<std::size_t>(rank_)}; }
  std::span<const std::int64_t> strides() const noexcept { return {strides_.data(), static_cast<std::size_t>(rank_)}; }
  // Product of the extents (1 for rank 0).
  std::int64_t numel() const;

 protected:
  const void* data_ = nullptr;
  DType dtype_ = DType::f32;
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
};

// A writable view, for outputs. It is also a TensorView, so the same view can be
// passed as input and output (in place).
class MutableTensorView : public TensorView {
 public:
  MutableTensorView() = default;
  MutableTensorView(void* data, DType dtype, std::span<const std::int64_t> shape)
      : TensorView(data, dtype, shape) {}
  MutableTensorView(void* data, DType dtype, std::initializer_list<std::int64_t> shape)
      : TensorView(data, dtype, shape) {}
  MutableTensorView(void* data, DType dtype, std::span<const std::int64_t> shape,
                    std::span<const std::int64_t> strides)
      : TensorView(data, dtype, shape, strides) {}
  MutableTensorView(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                    std::initializer_list<std::int64_t> strides)
      : TensorView(data, dtype, shape, strides) {}

  void* data() const noexcept { return const_cast<void*>(data_); }
};

// Typed helpers: smax::view(ptr, {rows, cols}) deduces the dtype from the pointer;
// a pointer to const gives a TensorView, a pointer to non-const a MutableTensorView.
template <class T>
  requires is_element_type<T>
TensorView view(const T* data, std::initializer_list<std::int64_t> shape) {
  return TensorView(data, dtype_of<T>, shape);
}
template <class T>
  requires is_element_type<T>
TensorView view(const T* data, std::initializer_list<std::int64_t> shape,
                std::initializer_list<std::int64_t> strides) {
  return TensorView(data, dtype_of<T>, shape, strides);
}
template <class T>
  requires is_element_type<T>
MutableTensorView view(T* data, std::initializer_list<std::int64_t> shape) {
  return MutableTensorView(data, dtype_of<T>, shape);
}
template <class T>
  requires is_element_type<T>
MutableTensorView view(T* data, std::initializer_list<std::int64_t> shape,
                       std::initializer_list<std::int64_t> strides) {
  return MutableTensorView(data, dtype_of<T>, shape, strides);
}

}  // namespace smax
