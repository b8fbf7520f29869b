// PyTorch's softmax and log_softmax in smax bench, through the module
// bench_pytorch_module.cpp builds where CMake found libtorch. The module is opened here, at run time, and
// only when the bench asks for the libraries: a libtorch that cannot be loaded
// (a missing CUDA runtime library, say) leaves PyTorch out with the loader's
// reason instead of stopping the tool from starting.
#include "bench_impls.hpp"

#if defined(SMAX_BENCH_PYTORCH_MODULE)

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "bench_pytorch_module.hpp"

namespace smax::cli::bench {
namespace {

struct Loaded {
  const PytorchModule* module = nullptr;
  std::string error;  // when module is null
};

// Opened once and never closed: kernels made by the module live as long as the run.
// RTLD_DEEPBIND: libtorch looks up its own symbols before the tool's. Without it,
// its calls to cpuinfo (built into libc10) bound to the tool's libcpuinfo (Debian's
// 2022 one, there for XNNPACK), which told libtorch the CPU had no vector units: it
// ran its portable kernels, scalar expf, at a third of its speed.
const Loaded& loaded() {
  static const Loaded instance = [] {
    Loaded result;
    void* handle = dlopen(SMAX_BENCH_PYTORCH_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      result.error = dlerror();
      return result;
    }
    using Entry = const PytorchModule* (*)();
    auto* entry = reinterpret_cast<Entry>(dlsym(handle, kPytorchModuleSymbol));
    if (!entry) {
      result.error = std::string(SMAX_BENCH_PYTORCH_MODULE) + " has no " + kPytorchModuleSymbol;
      return result;
    }
    result.module = entry();
    return result;
  }();
  return instance;
}

Prepared prepare(const Point& point, int threads) {
  try {
    const bool log = point.op == Op::log_softmax;
    return {loaded().module->prepare(point.shape, point.axis, point.dtype, log, threads),
            std::string(log ? "at::_log_softmax_out, " : "at::_softmax_out, ") + std::to_string(threads) +
                " thread(s)"};
  } catch (const std::exception& e) {
    return {{}, std::string("PyTorch: ") + e.what()};
  }
}

}  // namespace

LibraryStatus pytorch_status() {
  const Loaded& l = loaded();
  if (!l.module) return {"pytorch", false, "", "its module did not load: " + l.error};
  return {"pytorch", true, l.module->version(), ""};
}

Implementation pytorch_implementation() { return {"pytorch", true, false, prepare}; }

}  // namespace smax::cli::bench

#else  // libtorch was not found when smax was configured

namespace smax::cli::bench {

LibraryStatus pytorch_status() {
  return {"pytorch", false, "",
          "not in this build: libtorch was not found when smax was configured (scripts/install-deps.sh --pytorch "
          "puts the PyPI wheel's in build/deps/pytorch; then reconfigure)"};
}

Implementation pytorch_implementation() { return {"pytorch", true, false, {}}; }

}  // namespace smax::cli::bench

#endif
