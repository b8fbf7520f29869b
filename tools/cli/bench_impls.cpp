// The implementations that are always there: a plain copy and the smax variants.
#include "bench_impls.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "smax/info.hpp"
#include "smax/ops.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"

namespace smax::cli::bench {
namespace {

// copy(from, to, n) over every thread's slice of the `bytes` (for_each_slice).
template <typename Copy>
void copy_in_slices(const void* x, void* y, std::size_t bytes, int threads, Copy copy) {
  const auto* from = static_cast<const std::byte*>(x);
  auto* to = static_cast<std::byte*>(y);
  for_each_slice(bytes, threads, [&](std::size_t begin, std::size_t end) {
    if (end > begin) copy(from + begin, to + begin, end - begin);
  });
}

// The physical limit: the same bytes read and written, by the same number of
// threads as the kernels. memcpy is the faster in cache, but it may store through
// the cache from DRAM too, reading each output line before writing it (3 bytes
// moved for 2 counted; glibc's choice depends on the size and the CPU: on the
// Zen 4 VM of the fourteenth session 256 MiB copy at 28-31 GB/s on two threads,
// 48-49 with non-temporal stores). A point's limit is the faster of the two.
Implementation copy_implementation() {
  return {"copy", false, true, [](const Point& point, int threads) {
            const std::size_t bytes = point.tensor_bytes();
            Kernel kernel = [bytes, threads](const void* x, void* y) {
              copy_in_slices(x, y, bytes, threads, [](const std::byte* from, std::byte* to, std::size_t n) {
                std::memcpy(to, from, n);
              });
            };
            return Prepared{kernel, "memcpy, " + std::to_string(threads) + " thread(s)"};
          }};
}

Implementation copy_nt_implementation() {
  return {kCopyNtImpl, false, true, [](const Point& point, int threads) {
            if (!kNonTemporalStores) return Prepared{{}, "no non-temporal store on this CPU"};
            const std::size_t bytes = point.tensor_bytes();
            Kernel kernel = [bytes, threads](const void* x, void* y) {
              copy_in_slices(x, y, bytes, threads, copy_streaming);
            };
            return Prepared{kernel, "non-temporal stores, " + std::to_string(threads) + " thread(s)"};
          }};
}

struct Variant {
  const char* name;
  Algorithm algorithm;
  PassOrder order;
  Stores stores = Stores::automatic;
};

constexpr std::array kVariants{
    Variant{"smax:auto", Algorithm::automatic, PassOrder::reverse},
    // auto with every store through the cache: beside smax:auto, what streaming gives.
    Variant{"smax:auto-cached", Algorithm::automatic, PassOrder::reverse, Stores::cached},
    Variant{"smax:online", Algorithm::online, PassOrder::reverse},
    Variant{"smax:online-forward", Algorithm::online, PassOrder::forward},
    Variant{"smax:tiled", Algorithm::tiled, PassOrder::reverse},
    Variant{"smax:tiled-forward", Algorithm::tiled, PassOrder::forward},
    Variant{"smax:safe", Algorithm::safe, PassOrder::reverse},
    Variant{"smax:fused", Algorithm::fused, PassOrder::reverse},
    Variant{kNaiveImpl, Algorithm::naive, PassOrder::reverse},
};

Implementation smax_implementation(const Variant& variant) {
  return {variant.name, false, false, [variant](const Point& point, int threads) {
            if (variant.algorithm == Algorithm::fused && point.length() > kFusedMaxLength) {
              return Prepared{{}, "rows longer than " + std::to_string(kFusedMaxLength) +
                                      " elements do not fit fused's buffer"};
            }
            Options options;
            options.axis = point.axis;
            options.algorithm = variant.algorithm;
            options.pass_order = variant.order;
            options.stores = variant.stores;
            options.threads = threads;
            // The plan says what `auto` picks and how many threads a call really
            // uses (smax splits rows, not one row, over threads).
            const PlanInfo plan = smax::plan(point.op, point.shape, point.dtype, options);
            std::string note = std::string(to_string(plan.algorithm));
            if (plan.algorithm == Algorithm::tiled || plan.algorithm == Algorithm::online) {
              note += plan.pass_order == PassOrder::forward ? " forward" : " reverse";
            }
            note += ", " + std::to_string(plan.threads) + " thread(s)";
            if (plan.stores == Stores::streaming) note += ", streaming";
            Kernel kernel = [point, options](const void* x, void* y) {
              const TensorView in(x, point.dtype, point.shape);
              const MutableTensorView out(y, point.dtype, point.shape);
              if (point.op == Op::log_softmax) {
                smax::log_softmax(in, out, options);
              } else {
                smax::softmax(in, out, options);
              }
            };
            return Prepared{kernel, note};
          }};
}

}  // namespace

void for_each_slice(std::size_t bytes, int threads, const std::function<void(std::size_t, std::size_t)>& f) {
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t slice = (bytes / nt + kLine - 1) / kLine * kLine;
    const std::size_t begin = std::min(bytes, t * slice);
    f(begin, std::min(bytes, begin + slice));
  }
}

// Both walk the output in whole 64-byte lines (one write-combining buffer each,
// filled by four 16-byte stores: wider ones are no faster from DRAM, and SSE2 is
// every x86-64's), with plain code for the unaligned head and the tail.
void copy_streaming(const std::byte* from, std::byte* to, std::size_t bytes) {
#if defined(__SSE2__)
  const std::size_t head = std::min(bytes, (kLine - reinterpret_cast<std::uintptr_t>(to) % kLine) % kLine);
  std::memcpy(to, from, head);
  std::size_t i = head;
  for (; i + kLine <= bytes; i += kLine) {
    for (std::size_t k = 0; k < kLine; k += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + k));
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + k), v);
    }
  }
  std::memcpy(to + i, from + i, bytes - i);
  _mm_sfence();
#else
  (void)from, (void)to, (void)bytes;
#endif
}

void xor_streaming(const std::byte* a, const std::byte* b, std::byte* to, std::size_t bytes) {
#if defined(__SSE2__)
  const std::size_t head = std::min(bytes, (kLine - reinterpret_cast<std::uintptr_t>(to) % kLine) % kLine);
  std::size_t i = 0;
  for (; i < head; ++i) to[i] = a[i] ^ b[i];
  for (; i + kLine <= bytes; i += kLine) {
    for (std::size_t k = 0; k < kLine; k += 16) {
      const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + k));
      const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + k));
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + k), _mm_xor_si128(va, vb));
    }
  }
  for (; i < bytes; ++i) to[i] = a[i] ^ b[i];
  _mm_sfence();
#else
  (void)a, (void)b, (void)to, (void)bytes;
#endif
}

std::vector<Implementation> implementations() {
  std::vector<Implementation> all{copy_implementation(), copy_nt_implementation()};
  for (const Variant& variant : kVariants) all.push_back(smax_implementation(variant));
  if (onednn_status().available) all.push_back(onednn_implementation());
  if (xnnpack_status().available) all.push_back(xnnpack_implementation());
  if (pytorch_status().available) all.push_back(pytorch_implementation());
  return all;
}

std::vector<LibraryStatus> library_statuses() { return {onednn_status(), xnnpack_status(), pytorch_status()}; }

}  // namespace smax::cli::bench
