#include <array>

#include "cpu/passes.hpp"
#include "cpu/variants.hpp"

namespace smax::cpu {

// Element i goes to lane i % kLanes, as a SIMD register's lanes would; the lanes'
// partial (max, sum) pairs merge pairwise in a fixed order.
inline constexpr int kLanes = 8;

template <class T>
void online_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);

  // Pass 1: running max and rescaled running sum, in one read of the row.
  std::array<detail::OnlineLane<C>, kLanes> lanes{};
  for (std::int64_t i = 0; i < row.n; ++i) {
    lanes[static_cast<std::size_t>(i % kLanes)].add(Element<T>::template load<C>(row.x[i * row.x_stride]), inv_t);
  }
  std::array<Stats<C>, kLanes> partial;
  for (int l = 0; l < kLanes; ++l) partial[static_cast<std::size_t>(l)] = lanes[static_cast<std::size_t>(l)].stats(inv_t);
  for (int width = 1; width < kLanes; width *= 2) {
    for (int l = 0; l + width < kLanes; l += 2 * width) {
      partial[static_cast<std::size_t>(l)] =
          detail::merge(partial[static_cast<std::size_t>(l)], partial[static_cast<std::size_t>(l + width)], inv_t);
    }
  }

  // Pass 2: the output, backward by default so that it starts on the tail of the row
  // that pass 1 left in cache.
  finish_row(row, p, partial[0], [&](const Normalizer<C>& f) { write_pass(row, 0, row.n, f, p.order); });
}

template void online_row(const Row<float>&, const RowParams&);
template void online_row(const Row<double>&, const RowParams&);
template void online_row(const Row<half>&, const RowParams&);
template void online_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
