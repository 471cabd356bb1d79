// A training-style loop whose input dtype changes on its tenth step: with
// LAZYJIT_LOG_LEVEL=info, exactly one compile after the first names the node that differs.
#include <cstdio>

#include <lazyjit/lazyjit.h>

int main() {
  using lazyjit::Tensor;
  Tensor w = Tensor::from_vector<float>({0.5f, -0.25f, 1.0f, 2.0f}, {2, 2});
  for (int step = 1; step <= 12; ++step) {
    Tensor x = Tensor::from_vector<float>({1.0f * step, 2.0f, 3.0f, 4.0f}, {2, 2});
    if (step >= 10) x = x.to(lazyjit::DType::Float64);
    Tensor y = lazyjit::relu(x * w + 0.1 * step);
    lazyjit::sync({y});
  }
  const lazyjit::Metrics m = lazyjit::metrics();
  std::printf("compiles %lld, cache hits %lld\n", static_cast<long long>(m.compiles),
              static_cast<long long>(m.cache_hits));
  return 0;
}
