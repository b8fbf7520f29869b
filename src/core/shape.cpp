#include "core/shape.hpp"

#include <string>

#include "core/format.hpp"
#include "smax/error.hpp"

namespace smax::detail {

void check_shape(std::span<const std::int64_t> shape, std::string_view view) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    throw Error(Errc::shape, std::string(view) + ": rank " + std::to_string(shape.size()) +
                                 " exceeds the maximum of " + std::to_string(kMaxRank));
  }
  std::int64_t product = 1;  // of the non-zero extents
  for (const std::int64_t extent : shape) {
    if (extent < 0) {
      throw Error(Errc::shape, std::string(view) + ": shape " + format_list(shape) + " has a negative extent");
    }
    if (extent > 0 && __builtin_mul_overflow(product, extent, &product)) {
      throw Error(Errc::shape, std::string(view) + ": shape " + format_list(shape) +
                                   " has more elements than int64 can count");
    }
  }
}

void check_shape(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::string_view view) {
  if (strides.size() != shape.size()) {
    throw Error(Errc::shape, std::string(view) + ": strides " + format_list(strides) + " have " +
                                 std::to_string(strides.size()) + " entries but shape " + format_list(shape) +
                                 " has " + std::to_string(shape.size()));
  }
  check_shape(shape, view);
}

std::int64_t element_count(std::span<const std::int64_t> shape) noexcept {
  std::int64_t n = 1;
  for (const std::int64_t extent : shape) n *= extent;
  return n;
}

std::array<std::int64_t, kMaxRank> row_major_strides(std::span<const std::int64_t> shape, std::string_view view) {
  check_shape(shape, view);
  std::array<std::int64_t, kMaxRank> strides{};
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    if (shape[i] > 1) step *= shape[i];
  }
  return strides;
}

}  // namespace smax::detail
