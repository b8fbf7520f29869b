// A user of the installed package: softmax of a small matrix along each axis.
#include <smax/smax.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> y(x.size());
  for (int axis : {0, 1}) {
    smax::softmax(smax::view(x.data(), {2, 3}), smax::view(y.data(), {2, 3}), {.axis = axis});
    const float expected = 1.0f / (1.0f + std::exp(3.0f));  // y[0] along axis 0 is 1/(1+e^3)
    if (axis == 0 && std::fabs(y[0] - expected) > 1e-6f) {
      std::printf("wrong softmax: %g, expected %g\n", y[0], expected);
      return 1;
    }
  }
  std::printf("consumer ok: smax %s, y[5] = %.6f\n", SMAX_VERSION_STRING, y[5]);
  return 0;
}
