// Links the installed liblazyjit and checks one fused computation.
#include <cstdio>

#include <lazyjit/lazyjit.h>

int main() {
  using lazyjit::Tensor;
  Tensor x = Tensor::from_vector<float>({-1, 0, 1, 2}, {2, 2});
  Tensor y = lazyjit::relu(x * 2.0 + 1.0);
  const std::vector<float> got = y.to_vector<float>();
  const std::vector<float> want = {0, 1, 3, 5};
  if (got != want) {
    std::fprintf(stderr, "consumer: wrong result\n");
    return 1;
  }
  std::printf("consumer: ok (%lld compile)\n", static_cast<long long>(lazyjit::metrics().compiles));
  return 0;
}
