// The small value types of smax/training.hpp: IndexView and the names of its enums.
#include <string>

#include "core/format.hpp"
#include "smax/error.hpp"
#include "smax/training.hpp"

namespace smax {
namespace {

int checked_rank(std::size_t rank) {
  if (rank > static_cast<std::size_t>(kMaxRank)) {
    throw Error(Errc::shape, "index view: rank " + std::to_string(rank) + " exceeds the maximum of " +
                                 std::to_string(kMaxRank));
  }
  return static_cast<int>(rank);
}

}  // namespace

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
    : data_(data), type_(type), rank_(checked_rank(shape.size())) {
  if (strides.size() != shape.size()) {
    throw Error(Errc::shape, "index view: strides " + detail::format_list(strides) + " have " +
                                 std::to_string(strides.size()) + " entries but shape " +
                                 detail::format_list(shape) + " has " + std::to_string(shape.size()));
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw Error(Errc::shape, "index view: shape " + detail::format_list(shape) + " has a negative extent");
    shape_[i] = shape[i];
    strides_[i] = strides[i];
  }
  numel();
}

namespace {

std::array<std::int64_t, kMaxRank> row_major(std::span<const std::int64_t> shape) {
  std::array<std::int64_t, kMaxRank> strides{};
  std::int64_t step = 1;
  for (std::size_t i = std::min(shape.size(), static_cast<std::size_t>(kMaxRank)); i-- > 0;) {
    strides[i] = step;
    if (shape[i] > 1) step *= shape[i];
  }
  return strides;
}

}  // namespace

IndexView::IndexView(const std::int64_t* data, std::span<const std::int64_t> shape)
    : IndexView(data, IndexType::i64, shape, std::span<const std::int64_t>(row_major(shape).data(), shape.size())) {}

IndexView::IndexView(const std::int32_t* data, std::span<const std::int64_t> shape)
    : IndexView(data, IndexType::i32, shape, std::span<const std::int64_t>(row_major(shape).data(), shape.size())) {}

std::int64_t IndexView::numel() const {
  for (int i = 0; i < rank_; ++i) {
    if (shape_[static_cast<std::size_t>(i)] == 0) return 0;
  }
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, shape_[static_cast<std::size_t>(i)], &n)) {
      throw Error(Errc::shape, "index view: shape " + detail::format_list(shape()) +
                                   " has more elements than int64 can count");
    }
  }
  return n;
}

}  // namespace smax
