// oneDNN's softmax (Debian libdnnl-dev 2.6): softmax_v2_forward with
// softmax_accurate (softmax_log for log_softmax), plain row-major layout, forward
// inference.
#include "bench_impls.hpp"

#if SMAX_BENCH_ONEDNN

#include <omp.h>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

namespace smax::cli::bench {
namespace {

std::optional<dnnl::memory::data_type> data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::f16: return dnnl::memory::data_type::f16;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f64: break;
  }
  return std::nullopt;
}

// One engine and stream for the whole run, as an application would keep them.
struct Runtime {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

Runtime& runtime() {
  static Runtime instance;
  return instance;
}

// What a kernel holds: the primitive and two memory objects whose data handles are
// pointed at each call's buffers.
struct Softmax {
  dnnl::softmax_v2_forward primitive;
  dnnl::memory src;
  dnnl::memory dst;
};

Prepared prepare(const Point& point, int threads) {
  const auto data_type = data_type_of(point.dtype);
  if (!data_type) return {{}, "oneDNN has no f64 softmax or log-softmax"};
  // oneDNN's OpenMP build sizes its parallel regions by omp_get_max_threads(),
  // both when it plans the work (here) and when it runs (in the kernel).
  omp_set_num_threads(threads);
  Runtime& rt = runtime();
  const dnnl::memory::dims dims(point.shape.begin(), point.shape.end());
  dnnl::memory::dims strides(dims.size());
  dnnl::memory::dim step = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    strides[i] = step;
    step *= dims[i];
  }
  const dnnl::memory::desc md(dims, *data_type, strides);
  auto softmax = std::make_shared<Softmax>();
  std::string implementation;
  try {
    const auto algorithm =
        point.op == Op::log_softmax ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
    const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, md, md, point.axis);
    const dnnl::softmax_v2_forward::primitive_desc pd(desc, rt.engine);
    implementation = pd.impl_info_str();
    softmax->primitive = dnnl::softmax_v2_forward(pd);
  } catch (const dnnl::error& e) {
    return {{}, "oneDNN " + std::string(to_string(point.dtype)) + " " + std::string(to_string(point.op)) +
                    " not available on this CPU (" + e.what() + ")"};
  }
  softmax->src = dnnl::memory(md, rt.engine, DNNL_MEMORY_NONE);
  softmax->dst = dnnl::memory(md, rt.engine, DNNL_MEMORY_NONE);
  Kernel kernel = [softmax, threads](const void* x, void* y) {
    omp_set_num_threads(threads);
    softmax->src.set_data_handle(const_cast<void*>(x));  // oneDNN takes a non-const handle; src is only read
    softmax->dst.set_data_handle(y);
    Runtime& r = runtime();
    softmax->primitive.execute(r.stream, {{DNNL_ARG_SRC, softmax->src}, {DNNL_ARG_DST, softmax->dst}});
    r.stream.wait();
  };
  return {kernel, implementation};
}

}  // namespace

LibraryStatus onednn_status() {
  const dnnl_version_t* v = dnnl_version();
  std::string version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  if (v->hash && *v->hash && std::string(v->hash) != "N/A") version += " (" + std::string(v->hash) + ")";
  return {"onednn", true, version, ""};
}

Implementation onednn_implementation() { return {"onednn", true, false, prepare}; }

}  // namespace smax::cli::bench

#else  // oneDNN was not found when smax was configured

namespace smax::cli::bench {

LibraryStatus onednn_status() {
  return {"onednn", false, "",
          "not in this build: libdnnl-dev was not found when smax was configured "
          "(scripts/install-deps.sh installs it; then reconfigure)"};
}

Implementation onednn_implementation() { return {"onednn", true, false, {}}; }

}  // namespace smax::cli::bench

#endif
