// Two builds of smax in one process, their calls alternated in blocks of 20 ms on the
// same data: on a noisy machine, where one build's runs minutes apart from the
// other's differ by more than the change measured, the ratio of neighbouring blocks
// holds still. Prints, per shape, each build's median and least ns an element over
// the rounds and the median of the rounds' ratios A / B (above 1: B is faster).
//
//   ab_compare A.so B.so [op=log] [t=THREADS] [r=ROUNDS] f:ROWSxCOLS b:ROWSxCOLS ...
//
// f: f32, b: bf16 (normal(0, 3) inputs). scripts/ab.sh builds the two libraries.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using Entry = void (*)(int, const void*, void*, long, long, int);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median call time of `f` over 20 ms, in ns an element.
double block(Entry f, int bf16, const void* x, void* y, long rows, long cols, int threads) {
  std::vector<double> ns;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20)) {
    const auto a = std::chrono::steady_clock::now();
    f(bf16, x, y, rows, cols, threads);
    const auto b = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  return median(ns) / static_cast<double>(rows * cols);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s A.so B.so [op=log] [t=THREADS] [r=ROUNDS] f:ROWSxCOLS b:ROWSxCOLS ...\n", argv[0]);
    return 2;
  }
  std::string entry = "smax_ab_softmax";
  int threads = 1, rounds = 15;
  std::vector<std::string> shapes;
  for (int a = 3; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "op=log") {
      entry = "smax_ab_log_softmax";
    } else if (s.rfind("t=", 0) == 0) {
      threads = std::atoi(s.c_str() + 2);
    } else if (s.rfind("r=", 0) == 0) {
      rounds = std::max(1, std::atoi(s.c_str() + 2));
    } else {
      shapes.push_back(s);
    }
  }
  Entry f[2];
  for (int k = 0; k < 2; ++k) {
    void* lib = dlopen(argv[1 + k], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr || (f[k] = reinterpret_cast<Entry>(dlsym(lib, entry.c_str()))) == nullptr) {
      std::fprintf(stderr, "%s: %s\n", argv[1 + k], dlerror());
      return 1;
    }
  }
  for (const std::string& s : shapes) {
    const auto colon = s.find(':'), x_at = s.find('x');
    if (s.size() < 4 || colon != 1 || x_at == std::string::npos || (s[0] != 'f' && s[0] != 'b')) {
      std::fprintf(stderr, "bad shape '%s' (write f:64x1000 or b:8x4096)\n", s.c_str());
      return 2;
    }
    const int bf16 = s[0] == 'b';
    const long rows = std::atol(s.substr(2, x_at - 2).c_str()), cols = std::atol(s.substr(x_at + 1).c_str());
    const std::size_t n = static_cast<std::size_t>(rows * cols), bytes = bf16 ? 2 : 4;
    std::vector<unsigned char> x(n * bytes), y(n * bytes);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (std::size_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      std::uint32_t b32;
      std::memcpy(&b32, &v, 4);
      if (bf16) {
        const auto b16 = static_cast<std::uint16_t>(b32 >> 16);
        std::memcpy(&x[i * 2], &b16, 2);
      } else {
        std::memcpy(&x[i * 4], &b32, 4);
      }
    }
    std::vector<double> a, b, ratio;
    for (int r = 0; r < rounds; ++r) {
      a.push_back(block(f[0], bf16, x.data(), y.data(), rows, cols, threads));
      b.push_back(block(f[1], bf16, x.data(), y.data(), rows, cols, threads));
      ratio.push_back(a.back() / b.back());
    }
    std::printf("%-14s A %.4f (least %.4f)  B %.4f (least %.4f) ns an element  A / B %.3f\n", s.c_str(), median(a),
                *std::min_element(a.begin(), a.end()), median(b), *std::min_element(b.begin(), b.end()),
                median(ratio));
  }
}
