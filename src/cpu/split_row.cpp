#include "cpu/split_row.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "core/parallel.hpp"
#include "cpu/passes.hpp"

namespace smax::cpu {
namespace {

// Fused over chunks: contiguous softmax rows of the vectorised types.
template <class T>
bool stores_exps(const Row<T>& row, const RowParams& p) {
  return kSimdRows<T> && p.store_exps && p.op == Op::softmax && row.x_stride == 1 && row.y_stride == 1;
}

// Where fused over chunks keeps a 16-bit row's float exps: one buffer per calling
// thread (the threads sharing the row write their chunks' parts of it), grown to the
// longest row met and kept, as fused's buffer is. Aligned to the vector (no stored
// exp crosses a cache line). Null if it cannot grow.
float* exps_scratch(std::int64_t n) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local std::int64_t size = 0;
  if (n > size) {
    buffer = hwy::AllocateAligned<float>(static_cast<std::size_t>(n));
    size = buffer != nullptr ? n : 0;
  }
  return buffer.get();
}

// Pass 1's exp pass over [begin, end) without a max pass before it, where a kernel
// takes it (softmax over contiguous f32, f16 and bf16 rows: the stored exps of fused
// over chunks, to `exps`, or the sum alone); not ok elsewhere, or where the guess
// cannot stand. Exps stored in place of the input cannot stand it: a guess found
// wanting after they overwrote it would leave the max pass nothing to read.
template <class T>
simd::GuessedExpSum guessed_exp_pass(const Row<T>& row, std::int64_t begin, std::int64_t end, const RowParams& p,
                                     float* exps, const simd::Ahead<T>& next) {
  if constexpr (kSimdRows<T>) {
    if (p.op == Op::softmax && row.x_stride == 1) {
      const auto n = static_cast<std::size_t>(end - begin);
      if (exps != nullptr) {
        if (static_cast<const void*>(row.x) == static_cast<const void*>(exps)) return {};
        return simd::f32_rstore_exp_from_guess(row.x + begin, exps + begin, n, p.inv_t, next);
      }
      return simd::f32_rsum_exp_from_guess(row.x + begin, n, p.inv_t, next);
    }
  }
  return {};
}

// y[0, n) = e[0, n) * factor (factor > 0, or 0 for a chunk that is all -inf), e the
// stored exps of fused over chunks (y itself for f32 rows); `stream`: y's whole lines
// around the cache (16-bit rows only: e is then apart from y).
template <class T>
void scale_exps(float* e, T* y, std::size_t n, double factor, bool stream) {
  if constexpr (kSimdRows<T>) {
    if (factor == 0.0) {
      std::fill(y, y + n, T{});  // pass 1 stored nothing for an all -inf chunk
    } else if (factor < static_cast<double>(std::numeric_limits<float>::min())) {
      // Exps taken against a guess reach e^64, so a factor below float's normal range
      // would lose bits of outputs that are not small: two steps, the second by a
      // power of two (exact, or the outputs' own subnormal rounding).
      simd::f32_vscale(e, e, n, static_cast<float>(factor * 0x1p120));
      simd::f32_vscale(e, y, n, 0x1p-120f, stream);
    } else {
      simd::f32_vscale(e, y, n, static_cast<float>(factor), stream);
    }
  }
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
  // Fused over chunks: the exps go to y itself (f32) or to a float buffer (16-bit,
  // whose scaling pass may then stream y: written once, around the cache, while the
  // exps wait in it; the planner streams no f32 row fused over chunks).
  const bool stream = !std::is_same_v<T, float> && p.stores == Stores::streaming &&
                      reinterpret_cast<std::uintptr_t>(row.y) % sizeof(T) == 0;
  float* exps = nullptr;
  if (stores_exps(row, p)) {
    if constexpr (std::is_same_v<T, float>) {
      exps = row.y;
    } else {
      exps = exps_scratch(row.n);
    }
  }
  const bool store_exps = exps != nullptr;

  // Chunk x_chunk's input and y_chunk's output (none for -1), fetched into cache
  // while a chunk is computed (contiguous rows): the memory works beside the
  // arithmetic.
  const bool contiguous = row.x_stride == 1 && row.y_stride == 1;
  auto ahead = [&](std::int64_t x_chunk, std::int64_t y_chunk) {
    simd::Ahead<T> a;
    if (contiguous) {
      a = {x_chunk >= 0 ? row.x + begin(x_chunk) : nullptr, y_chunk >= 0 ? row.y + begin(y_chunk) : nullptr};
    }
    return a;
  };

  std::vector<Stats<C>> partial(static_cast<std::size_t>(chunks));
  // Each chunk's stored exps (fused over chunks): taken against its max, or the guess
  // that let its exp pass find the max itself, and `scale` times those exps
  // (ExpSum::stored_scale: bf16's 2^64).
  struct StoredExps {
    double against = 0;
    double scale = 1;
  };
  std::vector<StoredExps> stored(store_exps ? static_cast<std::size_t>(chunks) : 0);
  // Each thread takes the same share of the chunks in both passes, so that it writes
  // the chunks whose statistics it computed (they are in its cache); one region for
  // both, so that a split row costs one fork and join, not one per pass. Pass 1
  // allocates nothing (for_each_share: no throw before the sync).
  detail::for_each_share(chunks, p.row_threads, [&](detail::Share share, auto&& sync) {
    // Pass 1: each chunk's (max, sum). A chunk's max may come from the sum pass of
    // the one before it (next_max).
    bool next_max_known = false;
    C next_max = 0;
    for (std::int64_t c = share.begin; c < share.end; ++c) {
      Stats<C>& s = partial[static_cast<std::size_t>(c)];
      const bool max_known = next_max_known;
      next_max_known = false;
      // Beside the exps: the next chunk's input, and under fused over chunks the
      // output lines the exps go to for writing: the next chunk's where the exps go to y
      // (f32), this chunk's where they wait in a float buffer (16-bit), so that its
      // scaling pass writes lines already in cache instead of reading each from memory
      // after the arithmetic (bf16 1 x 128256 and 8 x 128256 1.17-1.18x from DRAM,
      // 1.17-1.20x with the input in cache; docs/PERFORMANCE.md, twenty-fourth session).
      // None where y streams.
      const std::int64_t x_next = c + 1 < share.end ? c + 1 : -1;
      std::int64_t y_next = -1;
      if (store_exps && !stream) y_next = static_cast<void*>(exps) == static_cast<void*>(row.y) ? x_next : c;
      const simd::Ahead<T> next = ahead(x_next, y_next);
      const simd::GuessedExpSum guessed = guessed_exp_pass(row, begin(c), end(c), p, exps, next);
      if (guessed.ok) {
        // d against the chunk's max: the sum times exp((g - m) / T), in double.
        s.m = static_cast<C>(guessed.m);
        s.d.add(guessed.sum.below_max * std::exp((static_cast<double>(guessed.g) - guessed.m) * p.inv_t));
        if (store_exps) stored[static_cast<std::size_t>(c)] = {guessed.g, guessed.sum.stored_scale};
        continue;
      }
      s.m = max_known ? next_max : max_pass(row.x, row.x_stride, begin(c), end(c), -std::numeric_limits<C>::infinity());
      if (!std::isfinite(s.m)) continue;
      if constexpr (kSimdRows<T>) {
        if (store_exps) {
          const auto n = static_cast<std::size_t>(end(c) - begin(c));
          const simd::ExpSum sum = simd::f32_rstore_exp_minus_max(row.x + begin(c), exps + begin(c), n,
                                                                  static_cast<float>(s.m), p.inv_t, next);
          add_exp_sum(s.d, sum);
          stored[static_cast<std::size_t>(c)] = {static_cast<double>(s.m), sum.stored_scale};
          continue;
        }
        if (contiguous && x_next >= 0) {
          // The next chunk's max beside this one's exps (the same max and sum as the
          // passes apart; log_softmax 4 x 131072 and 1 x 262144 on one thread in cache
          // 1.03-1.04x, 8 x 128256 on two from DRAM 1.03x).
          const auto length = [&](std::int64_t k) { return static_cast<std::size_t>(end(k) - begin(k)); };
          const simd::ExpSumAndNextMax r = simd::f32_rsum_exp_minus_max_and_next_max(
              row.x + begin(c), length(c), static_cast<float>(s.m), p.inv_t, sum_for(p.op) == SumFor::log,
              row.x + begin(x_next), length(x_next));
          add_exp_sum(s.d, r.sum);
          next_max = static_cast<C>(r.next_max);
          next_max_known = true;
          continue;
        }
      }
      sum_exp_pass(row.x, row.x_stride, begin(c), end(c), s.m, inv_t, PassOrder::forward, s.d, sum_for(p.op), next);
    }
    sync();

    // The merge, pairwise in a fixed order. Every thread computes it (a few flops per
    // chunk) rather than wait for one thread at a second barrier.
    Stats<C> total;
    {
      std::vector<Stats<C>> level(partial);
      for (std::size_t width = 1; width < level.size(); width *= 2) {
        for (std::size_t c = 0; c + width < level.size(); c += 2 * width) {
          level[c] = detail::merge(level[c], level[c + width], inv_t);
        }
      }
      total = level[0];
    }

    // Pass 2 over this thread's share of the row: logsumexp's one value from the first
    // thread; otherwise the outputs (or the non-finite fill) of its chunks.
    if (p.op == Op::logsumexp) {
      if (share.begin == 0) finish_row(row, p, total, [](const Normalizer<C>&) {});
      return;
    }
    if (share.begin == share.end) return;
    const Row<T> mine{row.x + begin(share.begin) * row.x_stride, row.x_stride, row.y + begin(share.begin) * row.y_stride,
                      row.y_stride, end(share.end - 1) - begin(share.begin)};
    finish_row(mine, p, total, [&](const Normalizer<C>& f) {
      const std::int64_t count = share.end - share.begin;
      auto chunk_at = [&](std::int64_t k) { return p.order == PassOrder::reverse ? share.end - 1 - k : share.begin + k; };
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t c = chunk_at(k);
        if (store_exps) {
          // The row max is finite here, so every chunk max is finite or -inf.
          const double m_c = partial[static_cast<std::size_t>(c)].m;
          const StoredExps& e = stored[static_cast<std::size_t>(c)];
          const double factor = m_c == -std::numeric_limits<double>::infinity()
                                    ? 0.0
                                    : std::exp((e.against - static_cast<double>(f.m)) * p.inv_t) *
                                          static_cast<double>(f.scale) / e.scale;
          scale_exps(exps + begin(c), row.y + begin(c), static_cast<std::size_t>(end(c) - begin(c)), factor, stream);
          continue;
        }
        // The order applies to the chunks (reverse starts on those pass 1 left in
        // cache); each chunk is walked forward, the direction the prefetchers follow.
        write_pass(row, begin(c), end(c), f, PassOrder::forward, p.stores,
                   k + 1 < count ? ahead(chunk_at(k + 1), chunk_at(k + 1)) : simd::Ahead<T>{});
      }
    });
  });
}

template void split_row(const Row<float>&, const RowParams&);
template void split_row(const Row<double>&, const RowParams&);
template void split_row(const Row<half>&, const RowParams&);
template void split_row(const Row<bfloat16>&, const RowParams&);

}  // namespace smax::cpu
