#include "cpu/split_row.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "cpu/passes.hpp"

namespace smax::cpu {
namespace {

// The same contiguous share of [0, count) for thread t of nt in both passes, so that
// a thread writes the chunks whose statistics it computed (they are in its cache).
struct Share {
  std::int64_t begin;
  std::int64_t end;
};

Share share_of(std::int64_t count, std::int64_t t, std::int64_t nt) {
  const std::int64_t base = count / nt;
  const std::int64_t extra = count % nt;
  const std::int64_t begin = t * base + std::min(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

template <class Body>
void for_each_share(std::int64_t count, int threads, Body&& body) {
  if (threads <= 1) {
    body(Share{0, count});
    return;
  }
#pragma omp parallel num_threads(threads)
  body(share_of(count, omp_get_thread_num(), omp_get_num_threads()));
}

}  // namespace

template <class T>
void split_row(const Row<T>& row, const RowParams& p) {
  using C = typename Element<T>::Compute;
  const C inv_t = static_cast<C>(p.inv_t);
  const std::int64_t chunk = p.chunk;
  const std::int64_t chunks = std::max<std::int64_t>(1, (row.n + chunk - 1) / chunk);
  auto begin = [&](std::int64_t c) { return c * chunk; };
  auto end = [&](std::int64_t c) { return std::min(row.n, (c + 1) * chunk); };

  std::vector<Stats<C>> partial(static_cast<std::size_t>(chunks));
  for_each_share(chunks, p.row_threads, [&](Share share) {
    for (std::int64_t c = share.begin; c < share.end; ++c) {
      Stats<C>& s = partial[static_cast<std::size_t>(c)];
      s.m = max_pass(row.x, row.x_stride, begin(c), end(c), -std::numeric_limits<C>::infinity());
      if (std::isfinite(s.m)) sum_exp_pass(row.x, row.x_stride, begin(c), end(c), s.m, inv_t, PassOrder::forward, s.d);
    }
  });
  for (std::int64_t width = 1; width < chunks; width *= 2) {
    for (std::int64_t c = 0; c + width < chunks; c += 2 * width) {
      partial[static_cast<std::size_t>(c)] =
          detail::merge(partial[static_cast<std::size_t>(c)], partial[static_cast<std::size_t>(c + width)], inv_t);
    }
  }

  finish_row(row, p, partial[0], [&](const Normalizer<C>& f) {
    for_each_share(chunks, p.row_threads, [&](Share share) {
      for (std::int64_t k = 0; k < share.end - share.begin; ++k) {
        const std::int64_t c = p.order == PassOrder::reverse ? share.end - 1 - k : share.begin + k;
        write_pass(row, begin(c), end(c), f, p.order);
      }
    });
  });
}

template void split_row(const Row<float>&, const RowParams&);
template void split_row(const Row<double>&, const RowParams&);
template void split_row(const Row<half>&, const RowParams&);
template void split_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
