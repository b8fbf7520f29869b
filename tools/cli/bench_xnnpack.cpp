// XNNPACK's softmax (Debian libxnnpack-dev, snapshot of February 2022): the
// operator API of that time, softmax_nc_f32 over contiguous rows.
#include "bench_impls.hpp"

#if SMAX_BENCH_XNNPACK

#include <pthreadpool.h>
#include <xnnpack.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace smax::cli::bench {
namespace {

bool initialised() {
  static const bool ok = xnn_initialize(nullptr) == xnn_status_success;
  return ok;
}

// An operator and the thread pool it runs on; both freed with the kernel.
struct Softmax {
  xnn_operator_t op = nullptr;
  pthreadpool_t pool = nullptr;  // null runs on the calling thread
  Softmax() = default;
  Softmax(const Softmax&) = delete;
  Softmax& operator=(const Softmax&) = delete;
  ~Softmax() {
    if (op) xnn_delete_operator(op);
    if (pool) pthreadpool_destroy(pool);
  }
};

void check(xnn_status status, const char* call) {
  if (status != xnn_status_success) {
    throw std::runtime_error(std::string("XNNPACK ") + call + " failed (status " + std::to_string(status) + ")");
  }
}

Prepared prepare(const Point& point, int threads) {
  if (point.op != Op::softmax) return {{}, "XNNPACK has no log-softmax"};
  if (point.dtype != DType::f32) return {{}, "XNNPACK (2022) has softmax for f32 only"};
  if (point.axis != static_cast<int>(point.shape.size()) - 1) {
    return {{}, "XNNPACK's softmax_nc normalises contiguous rows (the last axis) only"};
  }
  if (!initialised()) return {{}, "xnn_initialize failed (unsupported CPU?)"};
  auto softmax = std::make_shared<Softmax>();
  const auto channels = static_cast<std::size_t>(point.length());
  check(xnn_create_softmax_nc_f32(channels, channels, channels, 0, &softmax->op), "xnn_create_softmax_nc_f32");
  if (threads > 1) softmax->pool = pthreadpool_create(static_cast<std::size_t>(threads));
  const auto rows = static_cast<std::size_t>(point.rows());
  Kernel kernel = [softmax, rows](const void* x, void* y) {
    check(xnn_setup_softmax_nc_f32(softmax->op, rows, static_cast<const float*>(x), static_cast<float*>(y),
                                   softmax->pool),
          "xnn_setup_softmax_nc_f32");
    check(xnn_run_operator(softmax->op, softmax->pool), "xnn_run_operator");
  };
  return {kernel, threads > 1 ? "pthreadpool of " + std::to_string(threads) : "calling thread"};
}

}  // namespace

// XNNPACK has no version call; this is the Debian package the build expects.
LibraryStatus xnnpack_status() { return {"xnnpack", true, "debian 0.0~git20220216", ""}; }

Implementation xnnpack_implementation() { return {"xnnpack", true, false, prepare}; }

}  // namespace smax::cli::bench

#else  // XNNPACK was not found when smax was configured

namespace smax::cli::bench {

LibraryStatus xnnpack_status() {
  return {"xnnpack", false, "",
          "not in this build: libxnnpack-dev (with libpthreadpool-dev, libcpuinfo-dev) was not found when smax "
          "was configured (scripts/install-deps.sh installs it; then reconfigure)"};
}

Implementation xnnpack_implementation() { return {"xnnpack", true, false, {}}; }

}  // namespace smax::cli::bench

#endif
