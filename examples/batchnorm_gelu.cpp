// The main job: batch-norm inference plus GELU over a batch, run for three steps (the last at
// a new batch size), printing results, metrics and the fused kernel's LLVM IR.
#include <cstdio>
#include <vector>

#include <lazyjit/lazyjit.h>

using lazyjit::Tensor;

/// y = gelu((x - mean) * rsqrt(var + eps) * gamma + beta), features broadcast over the batch.
Tensor batchnorm_gelu(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& gamma,
                      const Tensor& beta, double eps) {
  return lazyjit::gelu((x - mean) * lazyjit::rsqrt(var + eps) * gamma + beta);
}

std::vector<float> ramp(int64_t n, float start, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 97);
  return v;
}

int main() {
  const int64_t features = 8;
  Tensor mean = Tensor::from_vector(ramp(features, -0.5f, 0.125f), {features});
  Tensor var = Tensor::from_vector(ramp(features, 0.5f, 0.25f), {features});
  Tensor gamma = Tensor::from_vector(ramp(features, 1.0f, 0.05f), {features});
  Tensor beta = Tensor::from_vector(ramp(features, 0.0f, -0.02f), {features});

  Tensor y;
  for (int64_t batch : {4, 4, 6}) {
    Tensor x = Tensor::from_vector(ramp(batch * features, -2.0f, 0.0625f), {batch, features});
    y = batchnorm_gelu(x, mean, var, gamma, beta, 1e-5);
    std::vector<float> out = y.to_vector<float>();
    std::printf("batch %lld: y[0, :4] = %.5f %.5f %.5f %.5f   y[-1, -1] = %.5f\n", static_cast<long long>(batch),
                out[0], out[1], out[2], out[3], out.back());
  }

  std::printf("\n%s\n", lazyjit::metrics_report().c_str());

  Tensor x = Tensor::from_vector(ramp(4 * features, -2.0f, 0.0625f), {4, features});
  Tensor pending = batchnorm_gelu(x, mean, var, gamma, beta, 1e-5);
  std::printf("lazy IR:\n%s\n", lazyjit::dump({pending}, lazyjit::DumpFormat::LazyIr).c_str());
  std::printf("optimized LLVM IR:\n%s\n", lazyjit::dump({pending}, lazyjit::DumpFormat::OptimizedLlvmIr).c_str());
  return 0;
}
