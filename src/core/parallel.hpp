// The one way smax runs threads: an OpenMP region in which each thread takes a fixed
// contiguous share of [0, count) (rows, panels, a row's chunks). The shares never
// change what a row or a panel computes, so results do not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <type_traits>

namespace smax::detail {

struct Share {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// Thread t's share of [0, count) among nt threads: the first count % nt take one more.
inline Share share_of(std::int64_t count, std::int64_t t, std::int64_t nt) {
  const std::int64_t base = count / nt;
  const std::int64_t extra = count % nt;
  const std::int64_t begin = t * base + std::min(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

// Runs body(share), or body(share, sync) where sync() is a barrier between passes, on
// `threads` threads (one: on the calling thread). An exception leaving a thread's body
// (std::bad_alloc from a strided row's gather buffer) would end the program inside
// the region (std::terminate); the first is rethrown on the calling thread after it.
// A body that syncs must not throw before its last sync (the others would wait there).
template <class Body>
void for_each_share(std::int64_t count, int threads, Body&& body) {
  const auto run = [&](Share share, auto&& sync) {
    if constexpr (std::is_invocable_v<Body&, Share>) {
      body(share);
    } else {
      body(share, sync);
    }
  };
  if (threads <= 1) {
    run(Share{0, count}, [] {});
    return;
  }
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    try {
      run(share_of(count, omp_get_thread_num(), omp_get_num_threads()), [] {
#pragma omp barrier
      });
    } catch (...) {
#pragma omp critical(smax_for_each_share_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace smax::detail
