// PyTorch's CPU training ops along axis 1 of [N, C, d] and [N, C] tensors (its own
// layout; the latter's classes are contiguous rows), as a PyTorch user runs them, for docs/PERFORMANCE.md's comparisons beside smax's
// `smax bench --workload training` and scripts/ab.sh op=ce|sb|lsb axis=0:
// cross_entropy forward + autograd backward (mean over class-index targets),
// _softmax_backward_data and _log_softmax_backward_data. Prints the median of seven
// calls in ns an element. Built and run by scripts/torch-training.sh (libtorch from
// scripts/install-deps.sh --pytorch; Python's torch does not import on this machine).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <class F>
double median_ns_per_element(F&& call, std::int64_t elements) {
  std::vector<double> seconds;
  call();  // warm-up
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    call();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] * 1e9 / static_cast<double>(elements);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  at::set_num_threads(threads);
  const std::vector<std::vector<std::int64_t>> shapes = {
      {8, 21, 256, 256}, {8, 150, 64, 64}, {8, 1000, 64}, {8, 256, 3136}, {65536, 10}, {16384, 100}, {4096, 1000}};
  std::printf("torch %s, %d thread(s); ns an element, median of 7 calls\n", TORCH_VERSION, at::get_num_threads());
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const std::vector<std::int64_t>& shape : shapes) {
      const torch::Tensor x = (torch::randn(shape) * 3).to(dtype);
      std::vector<std::int64_t> target_shape = shape;
      target_shape.erase(target_shape.begin() + 1);
      const torch::Tensor target = torch::randint(shape[1], target_shape, torch::kLong);
      const std::int64_t n = x.numel();
      const double ce = median_ns_per_element(
          [&] {
            const torch::Tensor logits = x.detach().requires_grad_(true);
            torch::nn::functional::cross_entropy(logits, target).backward();
          },
          n);
      const torch::Tensor y = torch::softmax(x, 1), log_y = torch::log_softmax(x, 1);
      const torch::Tensor dy = torch::randn(shape).to(dtype);
      const double sb = median_ns_per_element([&] { at::_softmax_backward_data(dy, y, 1, dtype); }, n);
      const double lsb = median_ns_per_element([&] { at::_log_softmax_backward_data(dy, log_y, 1, dtype); }, n);
      std::printf("%-9s %-18s cross_entropy+backward %7.3f  softmax_backward %7.3f  log_softmax_backward %7.3f\n",
                  dtype == torch::kFloat ? "f32" : "bf16", c10::str(shape).c_str(), ce, sb, lsb);
    }
  }
}
