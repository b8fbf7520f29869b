// One build of smax behind a C entry point, so that bench/ab/ab_compare.cpp can load
// two builds into one process (dlopen, RTLD_LOCAL) and alternate their calls.
#include <smax/smax.hpp>

namespace {

smax::DType dtype_of(int bf16) { return bf16 != 0 ? smax::DType::bf16 : smax::DType::f32; }

}  // namespace

extern "C" __attribute__((visibility("default"))) void smax_ab_softmax(int bf16, const void* x, void* y, long rows,
                                                                       long cols, int threads) {
  smax::Options o;
  o.threads = threads;
  smax::softmax(smax::TensorView(x, dtype_of(bf16), {rows, cols}),
                smax::MutableTensorView(y, dtype_of(bf16), {rows, cols}), o);
}

extern "C" __attribute__((visibility("default"))) void smax_ab_log_softmax(int bf16, const void* x, void* y, long rows,
                                                                           long cols, int threads) {
  smax::Options o;
  o.threads = threads;
  smax::log_softmax(smax::TensorView(x, dtype_of(bf16), {rows, cols}),
                    smax::MutableTensorView(y, dtype_of(bf16), {rows, cols}), o);
}
