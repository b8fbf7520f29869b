// smax bench: the implementations timed side by side. Each one turns a point and a
// thread count into a kernel (set up once, outside the timing) or says why it
// cannot run that point.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "bench_workloads.hpp"

namespace smax::cli::bench {

// One call on one point: reads the input tensor x, writes the output tensor y
// (C-order, the point's shape and dtype). Throws std::exception on failure.
using Kernel = std::function<void(const void* x, void* y)>;

struct Prepared {
  Kernel kernel;     // empty when the point is skipped
  std::string note;  // why it was skipped; or, when it runs, what ran (e.g. the plan)
};

// The textbook variant's name: its failed checks do not fail a run (Result::fails_run).
inline constexpr const char* kNaiveImpl = "smax:naive";
// The copy with non-temporal (streaming) stores; "copy" is memcpy. Either is the limit where it is faster.
inline constexpr const char* kCopyNtImpl = "copy-nt";

struct Implementation {
  std::string name;  // "copy", "smax:online", "onednn", ... (as in the JSON)
  bool is_library;   // another library (the "best other library" ratio compares these)
  bool is_copy;      // the physical limit: its output is the input, not a softmax
  std::function<Prepared(const Point& point, int threads)> prepare;
};

// Runs f(begin, end) on `threads` OpenMP threads, each over one contiguous slice of
// [0, bytes) in whole cache lines (kLine), so that no two threads write one line:
// how the limits' kernels split their bytes.
void for_each_slice(std::size_t bytes, int threads, const std::function<void(std::size_t, std::size_t)>& f);

// The limits' kernels with non-temporal stores, which do not read the output's
// lines before writing them: to = from, and to = a ^ b (bytewise), over `bytes`.
// Only where kNonTemporalStores (x86-64: SSE2); elsewhere they do nothing.
#if defined(__SSE2__)
inline constexpr bool kNonTemporalStores = true;
#else
inline constexpr bool kNonTemporalStores = false;
#endif
inline constexpr std::size_t kLine = 64;
void copy_streaming(const std::byte* from, std::byte* to, std::size_t bytes);
void xor_streaming(const std::byte* a, const std::byte* b, std::byte* to, std::size_t bytes);

// What another library is, or why it is not in this build.
struct LibraryStatus {
  std::string name;  // "onednn", "xnnpack", "pytorch"
  bool available = false;
  std::string version;  // when available
  std::string reason;   // when not: what to install
};

// In table order: copy, copy-nt, the smax variants (auto first), then the libraries built in.
std::vector<Implementation> implementations();
std::vector<LibraryStatus> library_statuses();

// The adapters of the other libraries (bench_onednn.cpp, bench_xnnpack.cpp,
// bench_pytorch.cpp). Each file compiles to a stub that reports the library
// missing when CMake did not find it, so the CLI builds either way.
LibraryStatus onednn_status();
Implementation onednn_implementation();
LibraryStatus xnnpack_status();
Implementation xnnpack_implementation();
LibraryStatus pytorch_status();
Implementation pytorch_implementation();

}  // namespace smax::cli::bench
