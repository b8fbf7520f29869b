// One build of smax behind C entry points, so that bench/ab/ab_compare.cpp can load
// two builds into one process (dlopen, RTLD_LOCAL) and alternate their calls.
#include <smax/smax.hpp>

namespace {

// op(x, y, options) on a rows x cols tensor of f32, or of bf16 where `bf16`.
template <class Op>
void run(Op op, int bf16, const void* x, void* y, long rows, long cols, int threads) {
  const smax::DType dtype = bf16 != 0 ? smax::DType::bf16 : smax::DType::f32;
  smax::Options o;
  o.threads = threads;
  op(smax::TensorView(x, dtype, {rows, cols}), smax::MutableTensorView(y, dtype, {rows, cols}), o);
}

}  // namespace

#define SMAX_AB_ENTRY(name, op)                                                                              \
  extern "C" __attribute__((visibility("default"))) void name(int bf16, const void* x, void* y, long rows,  \
                                                              long cols, int threads) {                     \
    run([](const auto& in, const auto& out, const auto& o) { smax::op(in, out, o); }, bf16, x, y, rows, cols, \
        threads);                                                                                            \
  }

SMAX_AB_ENTRY(smax_ab_softmax, softmax)
SMAX_AB_ENTRY(smax_ab_log_softmax, log_softmax)
