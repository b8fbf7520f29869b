// The small value types of smax/training.hpp: IndexView and the names of its enums.
#include <algorithm>

#include "core/shape.hpp"
#include "smax/training.hpp"

namespace smax {

std::string_view to_string(IndexType type) noexcept {
  switch (type) {
    case IndexType::i64: return "i64";
    case IndexType::i32: return "i32";
  }
  return "invalid";
}

std::string_view to_string(Reduction reduction) noexcept {
  switch (reduction) {
    case Reduction::none: return "none";
    case Reduction::sum: return "sum";
    case Reduction::mean: return "mean";
  }
  return "invalid";
}

std::optional<Reduction> parse_reduction(std::string_view name) noexcept {
  for (Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
    if (name == to_string(r)) return r;
  }
  return std::nullopt;
}

IndexView::IndexView(const void* data, IndexType type, std::span<const std::int64_t> shape,
                     std::span<const std::int64_t> strides)
    : data_(data), type_(type) {
  detail::check_shape(shape, strides, "index view");
  rank_ = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), shape_.begin());
  std::copy(strides.begin(), strides.end(), strides_.begin());
}

IndexView::IndexView(const std::int64_t* data, std::span<const std::int64_t> shape)
    : IndexView(data, IndexType::i64, shape,
                std::span<const std::int64_t>(detail::row_major_strides(shape, "index view").data(), shape.size())) {}

IndexView::IndexView(const std::int32_t* data, std::span<const std::int64_t> shape)
    : IndexView(data, IndexType::i32, shape,
                std::span<const std::int64_t>(detail::row_major_strides(shape, "index view").data(), shape.size())) {}

std::int64_t IndexView::numel() const { return detail::element_count(shape()); }

}  // namespace smax
