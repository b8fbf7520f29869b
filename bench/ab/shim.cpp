// One build of smax behind C entry points, so that bench/ab/ab_compare.cpp can load
// two builds into one process (dlopen, RTLD_LOCAL) and alternate their calls.
#include <smax/smax.hpp>
#include <smax/training.hpp>

#include <cstdint>
#include <vector>

namespace {

double temperature = 1.0;                                   // smax_ab_set_temperature
smax::Algorithm algorithm = smax::Algorithm::automatic;     // smax_ab_set_algorithm

// The element type ab_compare names by a code: 0 f32, 1 bf16, 2 f64.
smax::DType dtype_of(int code) {
  return code == 1 ? smax::DType::bf16 : code == 2 ? smax::DType::f64 : smax::DType::f32;
}

// op(x, y, options) on a batch x rows x cols tensor of the dtype coded `code`:
// along its last axis, or down its rows where `axis` is 0 (a non-last axis).
template <class Op>
void run(Op op, int code, const void* x, void* y, long batch, long rows, long cols, int threads, int axis) {
  const smax::DType dtype = dtype_of(code);
  smax::Options o;
  o.algorithm = algorithm;
  o.threads = threads;
  o.axis = axis == 0 ? 1 : -1;
  o.temperature = temperature;
  op(smax::TensorView(x, dtype, {batch, rows, cols}), smax::MutableTensorView(y, dtype, {batch, rows, cols}), o);
}

}  // namespace

// The temperature of the forward entries that follow (1 until set).
extern "C" __attribute__((visibility("default"))) void smax_ab_set_temperature(double t) { temperature = t; }

// The algorithm of the forward entries that follow (auto until set); false for a name
// smax does not know.
extern "C" __attribute__((visibility("default"))) bool smax_ab_set_algorithm(const char* name) {
  const auto parsed = smax::parse_algorithm(name);
  if (parsed) algorithm = *parsed;
  return parsed.has_value();
}

#define SMAX_AB_ENTRY(name, op)                                                                              \
  extern "C" __attribute__((visibility("default"))) void name(int code, const void* x, void* y, long batch, \
                                                              long rows, long cols, int threads, int axis) { \
    run([](const auto& in, const auto& out, const auto& o) { smax::op(in, out, o); }, code, x, y, batch, rows, \
        cols, threads, axis);                                                                                \
  }

SMAX_AB_ENTRY(smax_ab_softmax, softmax)
SMAX_AB_ENTRY(smax_ab_log_softmax, log_softmax)

// dx = op(y, dy) on batch x rows x cols tensors of the dtype coded `code`, along
// the last axis or, where `axis` is 0, down the rows.
#define SMAX_AB_BACKWARD_ENTRY(name, op)                                                                      \
  extern "C" __attribute__((visibility("default"))) void name(int code, const void* y, const void* dy,      \
                                                              void* dx, long batch, long rows, long cols,    \
                                                              int threads, int axis) {                       \
    const smax::DType dtype = dtype_of(code);                                                                \
    smax::BackwardOptions o;                                                                                  \
    o.axis = axis == 0 ? 1 : -1;                                                                              \
    o.threads = threads;                                                                                      \
    smax::op(smax::TensorView(y, dtype, {batch, rows, cols}), smax::TensorView(dy, dtype, {batch, rows, cols}), \
             smax::MutableTensorView(dx, dtype, {batch, rows, cols}), o);                                     \
  }

SMAX_AB_BACKWARD_ENTRY(smax_ab_softmax_backward, softmax_backward)
SMAX_AB_BACKWARD_ENTRY(smax_ab_log_softmax_backward, log_softmax_backward)

// Cross-entropy (mean over class-index targets) of batch x rows x cols logits x, its
// gradient to grad: the classes along the last axis, or where `axis` is 0 along the
// rows (PyTorch's (N, C, d) layout).
namespace {
void cross_entropy(int code, const void* x, void* grad, long batch, long rows, long cols, int threads, int axis) {
  const smax::DType dtype = dtype_of(code);
  const long classes = axis == 0 ? rows : cols;
  const long n = batch * rows * cols / classes;
  static std::vector<std::int64_t> targets;
  if (static_cast<long>(targets.size()) != n) {
    targets.resize(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) targets[static_cast<std::size_t>(i)] = i * 7919 % classes;
  }
  unsigned char loss[8];
  smax::CrossEntropyOptions o;
  o.axis = axis == 0 ? 1 : -1;
  o.threads = threads;
  smax::CrossEntropyOutputs out;
  out.grad = smax::MutableTensorView(grad, dtype, {batch, rows, cols});
  const long target_last = axis == 0 ? cols : rows;
  smax::cross_entropy(smax::TensorView(x, dtype, {batch, rows, cols}), smax::IndexView(targets.data(), {batch, target_last}),
                      smax::MutableTensorView(loss, dtype, {}), o, out);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void smax_ab_cross_entropy(int code, const void* x, void* grad,
                                                                             long batch, long rows, long cols,
                                                                             int threads, int axis) {
  cross_entropy(code, x, grad, batch, rows, cols, threads, axis);
}

// The same with the gradient written over the logits (later calls take the last
// call's gradient as their logits).
extern "C" __attribute__((visibility("default"))) void smax_ab_cross_entropy_in_place(int code, const void* x,
                                                                                      void* /*grad*/, long batch,
                                                                                      long rows, long cols,
                                                                                      int threads, int axis) {
  cross_entropy(code, x, const_cast<void*>(x), batch, rows, cols, threads, axis);
}
