// Two builds of smax in one process, their calls alternated in blocks of 20 ms on the
// same data: on a noisy machine, where one build's runs minutes apart from the
// other's differ by more than the change measured, the ratio of neighbouring blocks
// holds still. Prints, per shape, each build's median and least ns an element over
// the rounds and the median of the rounds' ratios A / B (above 1: B is faster).
//
//   ab_compare A.so B.so [op=log|sb|lsb|ce|cei] [alg=NAME] [T=TEMPERATURE] [t=THREADS] [r=ROUNDS] [m=MIB] [o=BYTES] [ox=BYTES] [ob=BYTES] [axis=0] [in=hot] [then=read] f:ROWSxCOLS b:BATCHxROWSxCOLS d:ROWSxCOLS ...
//
// f: f32, b: bf16, d: f64 (normal(0, 3) inputs). alg=NAME: the forward ops under
// that algorithm (naive, safe, fused, tiled, online; auto by default). op: softmax
// (the default), log_softmax, cross-entropy with its gradient (ce: mean over
// class-index targets, the class axis last; cei: the gradient written over the
// logits), softmax_backward (sb) or log_softmax_backward (lsb); the backward ops
// take y from build A's softmax or log_softmax of those inputs and dy from
// normal(0, 1). With m=MIB, copies of the
// buffers fill MIB mebibytes and the calls take them in turn: beyond twice the
// last-level cache, every call reads memory. Every buffer starts at a page boundary, or
// o=BYTES past one (o=16: where glibc's malloc puts large blocks, and so std::vector's
// and NumPy's), since loads that cross cache lines cost more and some kernels take
// other paths for outputs that are not aligned to the vector; ox=BYTES sets the inputs'
// offset apart (x, or y and dy). axis=0: every op down the columns (the column panels;
// cross-entropy's classes along the rows, PyTorch's (N, C, d) layout) instead of along
// the rows; a shape of three extents is a batch of such matrices. ob=BYTES gives build B buffers of its own, every one
// that many bytes past a page: with the same build as A and B, the cost of misaligned
// rows measured in one process. in=hot (with m=MIB): every call reads the first set's
// inputs, which stay in cache, and writes the next set's output, which is not: an input
// just produced by the op before, written to a buffer last touched long ago. then=read:
// each call is followed, inside its timing, by a read of the whole output on as many
// threads (the next op's, a plain sum): a cached output's lines are there to be read, a
// streamed one's are not.
// scripts/ab.sh builds the two libraries.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using Entry = void (*)(int, const void*, void*, long, long, long, int, int);
using BackwardEntry = void (*)(int, const void*, const void*, void*, long, long, long, int, int);

// The sum of the bytes [p, p + bytes) as 64-bit words, on `threads` threads: the
// output's next reader.
std::uint64_t read_all(const unsigned char* p, std::size_t bytes, int threads) {
  const long words = static_cast<long>(bytes / 8);
  std::uint64_t sum = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
  for (long i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    sum += w;
  }
  return sum;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median time of call() over 20 ms, in ns an element.
template <class Call>
double block(Call&& call, long elements) {
  std::vector<double> ns;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20)) {
    const auto a = std::chrono::steady_clock::now();
    call();
    const auto b = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  return median(ns) / static_cast<double>(elements);
}

// The shim's dtype codes: f: f32, b: bf16, d: f64.
int dtype_code(char letter) { return letter == 'b' ? 1 : letter == 'd' ? 2 : 0; }
std::size_t element_bytes(int code) { return code == 1 ? 2 : code == 2 ? 8 : 4; }

// normal(0, sigma) values as f32, rounded down to bf16 or widened to f64 by `code`.
std::vector<unsigned char> normal_values(std::size_t n, int code, float sigma, unsigned seed) {
  std::vector<unsigned char> out(n * element_bytes(code));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    std::uint32_t b32;
    std::memcpy(&b32, &v, 4);
    if (code == 1) {
      const auto b16 = static_cast<std::uint16_t>(b32 >> 16);
      std::memcpy(&out[i * 2], &b16, 2);
    } else if (code == 2) {
      const double d = v;
      std::memcpy(&out[i * 8], &d, 8);
    } else {
      std::memcpy(&out[i * 4], &b32, 4);
    }
  }
  return out;
}

// A copy of `from` that starts `offset` bytes past a page boundary.
class Buffer {
 public:
  Buffer(const std::vector<unsigned char>& from, std::size_t offset)
      : base_(static_cast<unsigned char*>(std::aligned_alloc(4096, (from.size() + offset + 4095) / 4096 * 4096))),
        data_(base_ + offset) {
    if (base_ == nullptr) std::abort();
    std::memcpy(data_, from.data(), from.size());
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept : base_(other.base_), data_(other.data_) { other.base_ = nullptr; }
  ~Buffer() { std::free(base_); }
  unsigned char* data() const { return data_; }

 private:
  unsigned char* base_;
  unsigned char* data_;
};

std::vector<Buffer> copies(std::size_t count, const std::vector<unsigned char>& from, std::size_t offset) {
  std::vector<Buffer> out;
  out.reserve(count);
  for (std::size_t k = 0; k < count; ++k) out.emplace_back(from, offset);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s A.so B.so [op=log|sb|lsb|ce|cei] [alg=NAME] [T=TEMPERATURE] [t=THREADS] [r=ROUNDS] [m=MIB] [o=BYTES] [ox=BYTES] [ob=BYTES] [axis=0] [in=hot] [then=read] f:ROWSxCOLS b:BATCHxROWSxCOLS d:ROWSxCOLS ...\n", argv[0]);
    return 2;
  }
  std::string entry = "smax_ab_softmax", forward = "smax_ab_softmax";
  int threads = 1, rounds = 15, axis = -1;
  double temperature = 1.0;
  std::string algorithm;
  bool hot_inputs = false, then_read = false;
  long mebibytes = 0;
  std::size_t offset = 0;
  std::optional<std::size_t> x_offset, b_offset;
  std::vector<std::string> shapes;
  for (int a = 3; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "op=log") {
      entry = "smax_ab_log_softmax";
    } else if (s == "op=ce") {
      entry = "smax_ab_cross_entropy";
    } else if (s == "op=cei") {
      entry = "smax_ab_cross_entropy_in_place";
    } else if (s == "op=sb") {
      entry = "smax_ab_softmax_backward";
    } else if (s == "op=lsb") {
      entry = "smax_ab_log_softmax_backward";
      forward = "smax_ab_log_softmax";
    } else if (s.rfind("alg=", 0) == 0) {
      algorithm = s.substr(4);
    } else if (s == "in=hot") {
      hot_inputs = true;
    } else if (s == "then=read") {
      then_read = true;
    } else if (s == "axis=0") {
      axis = 0;
    } else if (s.rfind("T=", 0) == 0) {
      temperature = std::atof(s.c_str() + 2);
    } else if (s.rfind("t=", 0) == 0) {
      threads = std::atoi(s.c_str() + 2);
    } else if (s.rfind("m=", 0) == 0) {
      mebibytes = std::atol(s.c_str() + 2);
    } else if (s.rfind("ox=", 0) == 0) {
      x_offset = static_cast<std::size_t>(std::atol(s.c_str() + 3));
    } else if (s.rfind("ob=", 0) == 0) {
      b_offset = static_cast<std::size_t>(std::atol(s.c_str() + 3));
    } else if (s.rfind("o=", 0) == 0) {
      offset = static_cast<std::size_t>(std::atol(s.c_str() + 2));
    } else if (s.rfind("r=", 0) == 0) {
      rounds = std::max(1, std::atoi(s.c_str() + 2));
    } else {
      shapes.push_back(s);
    }
  }
  const bool backward = entry.find("backward") != std::string::npos;
  void* f[2];
  Entry forward_a = nullptr;
  for (int k = 0; k < 2; ++k) {
    void* lib = dlopen(argv[1 + k], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr || (f[k] = dlsym(lib, entry.c_str())) == nullptr ||
        (k == 0 && (forward_a = reinterpret_cast<Entry>(dlsym(lib, forward.c_str()))) == nullptr)) {
      std::fprintf(stderr, "%s: %s\n", argv[1 + k], dlerror());
      return 1;
    }
    using SetTemperature = void (*)(double);
    if (auto set = reinterpret_cast<SetTemperature>(dlsym(lib, "smax_ab_set_temperature"))) set(temperature);
    using SetAlgorithm = bool (*)(const char*);
    if (!algorithm.empty()) {
      const auto set = reinterpret_cast<SetAlgorithm>(dlsym(lib, "smax_ab_set_algorithm"));
      if (set == nullptr || !set(algorithm.c_str())) {
        std::fprintf(stderr, "%s: no algorithm '%s' here\n", argv[1 + k], algorithm.c_str());
        return 1;
      }
    }
  }
  for (const std::string& s : shapes) {
    const auto colon = s.find(':');
    std::vector<long> extents;
    for (std::size_t at = colon + 1; colon == 1 && at <= s.size();) {
      const std::size_t end = std::min(s.find('x', at), s.size());
      extents.push_back(std::atol(s.substr(at, end - at).c_str()));
      at = end + 1;
    }
    if (colon != 1 || (s[0] != 'f' && s[0] != 'b' && s[0] != 'd') || extents.size() < 2 || extents.size() > 3) {
      std::fprintf(stderr, "bad shape '%s' (write f:64x1000, b:8x4096, d:256x1024 or f:32x81x8732)\n", s.c_str());
      return 2;
    }
    const int code = dtype_code(s[0]);
    const long batch = extents.size() == 3 ? extents[0] : 1;
    const long rows = batch * extents[extents.size() - 2], cols = extents.back();
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    const std::vector<unsigned char> x = normal_values(n, code, 3.0f, 7);
    std::vector<unsigned char> y(x.size()), dy, dx;
    if (backward) {
      forward_a(code, x.data(), y.data(), batch, rows / batch, cols, threads, axis);
      dy = normal_values(n, code, 1.0f, 8);
      dx.resize(x.size());
    }
    // Each set: x, y (softmax) or y, dy, dx (backward).
    const std::size_t set_bytes = x.size() * (backward ? 3 : 2);
    const std::size_t sets = std::max<std::size_t>(1, static_cast<std::size_t>(mebibytes << 20) / set_bytes);
    const std::size_t forward_sets = backward ? 0 : sets, backward_sets = backward ? sets : 0;
    // The inputs: x, or y and dy (backward); the output: y, or dx.
    struct Sets {
      std::vector<Buffer> xs, ys, dys, dxs;
    };
    const auto make_sets = [&](std::size_t input_offset, std::size_t output_offset) {
      return Sets{copies(forward_sets, x, input_offset), copies(sets, y, backward ? input_offset : output_offset),
                  copies(backward_sets, dy, input_offset), copies(backward_sets, dx, output_offset)};
    };
    const Sets sets_a = make_sets(x_offset.value_or(offset), offset);
    const Sets sets_b = b_offset ? make_sets(*b_offset, *b_offset) : Sets{};
    std::size_t next = 0;
    volatile std::uint64_t sink = 0;
    const auto then = [&](const Buffer& out) {
      if (then_read) sink = sink + read_all(out.data(), x.size(), threads);
    };
    const auto run = [&](int k) {
      const Sets& own = k == 1 && b_offset ? sets_b : sets_a;
      if (backward) {
        const auto op = reinterpret_cast<BackwardEntry>(f[k]);
        return block([&] {
          const std::size_t at = next++ % sets, in = hot_inputs ? 0 : at;
          op(code, own.ys[in].data(), own.dys[in].data(), own.dxs[at].data(), batch, rows / batch, cols, threads,
             axis);
          then(own.dxs[at]);
        }, rows * cols);
      }
      const auto op = reinterpret_cast<Entry>(f[k]);
      return block([&] {
        const std::size_t at = next++ % sets, in = hot_inputs ? 0 : at;
        op(code, own.xs[in].data(), own.ys[at].data(), batch, rows / batch, cols, threads, axis);
        then(own.ys[at]);
      }, rows * cols);
    };
    std::vector<double> a, b, ratio;
    for (int r = 0; r < rounds; ++r) {
      a.push_back(run(0));
      b.push_back(run(1));
      ratio.push_back(a.back() / b.back());
    }
    std::printf("%-14s A %.4f (least %.4f)  B %.4f (least %.4f) ns an element  A / B %.3f\n", s.c_str(), median(a),
                *std::min_element(a.begin(), a.end()), median(b), *std::min_element(b.begin(), b.end()),
                median(ratio));
  }
}
