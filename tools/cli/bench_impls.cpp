// The implementations that are always there: a plain copy and the smax variants.
#include "bench_impls.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "smax/info.hpp"
#include "smax/ops.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"

namespace smax::cli::bench {
namespace {

// The physical limit: the same bytes read and written, by the same number of
// threads as the kernels, each thread copying one contiguous slice.
Implementation copy_implementation() {
  return {"copy", false, true, [](const Point& point, int threads) {
            const std::size_t bytes = point.tensor_bytes();
            Kernel kernel = [bytes, threads](const void* x, void* y) {
              const auto* from = static_cast<const std::byte*>(x);
              auto* to = static_cast<std::byte*>(y);
#pragma omp parallel num_threads(threads)
              {
                const auto t = static_cast<std::size_t>(omp_get_thread_num());
                const auto nt = static_cast<std::size_t>(omp_get_num_threads());
                // Slices rounded to cache lines, so no two threads write one line.
                const std::size_t slice = (bytes / nt + 63) / 64 * 64;
                const std::size_t begin = std::min(bytes, t * slice);
                const std::size_t end = std::min(bytes, begin + slice);
                if (end > begin) std::memcpy(to + begin, from + begin, end - begin);
              }
            };
            return Prepared{kernel, "memcpy, " + std::to_string(threads) + " thread(s)"};
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
            const PlanInfo plan = smax::plan(Op::softmax, point.shape, point.dtype, options);
            std::string note = std::string(to_string(plan.algorithm));
            if (plan.algorithm == Algorithm::tiled || plan.algorithm == Algorithm::online) {
              note += plan.pass_order == PassOrder::forward ? " forward" : " reverse";
            }
            note += ", " + std::to_string(plan.threads) + " thread(s)";
            if (plan.stores == Stores::streaming) note += ", streaming";
            Kernel kernel = [point, options](const void* x, void* y) {
              smax::softmax(TensorView(x, point.dtype, point.shape), MutableTensorView(y, point.dtype, point.shape),
                            options);
            };
            return Prepared{kernel, note};
          }};
}

}  // namespace

std::vector<Implementation> implementations() {
  std::vector<Implementation> all{copy_implementation()};
  for (const Variant& variant : kVariants) all.push_back(smax_implementation(variant));
  if (onednn_status().available) all.push_back(onednn_implementation());
  if (xnnpack_status().available) all.push_back(xnnpack_implementation());
  return all;
}

std::vector<LibraryStatus> library_statuses() { return {onednn_status(), xnnpack_status()}; }

}  // namespace smax::cli::bench
