// gpt_train_step's first loss (gpt_problem.h) from a scalar forward pass in double: what every
// system's first step is checked against, whether or not the peers are built.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gpt_problem.h"

namespace bench::gpt {
namespace {

using Matrix = std::vector<double>;  // row-major [kTokens, cols]

// x [kTokens, n_in] @ w [n_in, n_out] (+ b when given).
Matrix linear(const Matrix& x, const Param& w, const Param* b) {
  const int64_t n_in = w.shape[0], n_out = w.shape[1];
  Matrix out(kTokens * n_out);
  for (int64_t r = 0; r < kTokens; ++r)
    for (int64_t k = 0; k < n_in; ++k) {
      const double xk = x[r * n_in + k];
      if (xk != 0)  // the one-hot input is mostly zeros
        for (int64_t c = 0; c < n_out; ++c) out[r * n_out + c] += xk * w.data[k * n_out + c];
    }
  if (b)
    for (int64_t r = 0; r < kTokens; ++r)
      for (int64_t c = 0; c < n_out; ++c) out[r * n_out + c] += b->data[c];
  return out;
}

// Over rows of kModel, biased variance, as layer_norm in lazyjit and PyTorch.
Matrix layer_norm(const Matrix& x, const Param& gamma, const Param& beta) {
  Matrix out(x.size());
  for (int64_t r = 0; r < kTokens; ++r) {
    const double* row = &x[r * kModel];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kModel; ++c) mean += row[c] / kModel;
    for (int64_t c = 0; c < kModel; ++c) var += (row[c] - mean) * (row[c] - mean) / kModel;
    for (int64_t c = 0; c < kModel; ++c)
      out[r * kModel + c] = (row[c] - mean) / std::sqrt(var + kEps) * gamma.data[c] + beta.data[c];
  }
  return out;
}

// Causal softmax attention of each head over qkv [kTokens, 3 * kModel]; heads concatenated.
Matrix attention(const Matrix& qkv) {
  Matrix out(kTokens * kModel);
  std::vector<double> weights(kSeq);
  const double scale = 1.0 / std::sqrt(double{kHeadDim});
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < kSeq; ++i) {
        auto at = [&](int64_t t, int64_t part, int64_t d) {  // part 0, 1, 2: q, k, v
          return qkv[(b * kSeq + t) * 3 * kModel + part * kModel + h * kHeadDim + d];
        };
        double max = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kHeadDim; ++d) dot += at(i, 0, d) * at(j, 1, d);
          max = std::max(max, weights[j] = dot * scale);
        }
        for (int64_t j = 0; j <= i; ++j) sum += weights[j] = std::exp(weights[j] - max);
        for (int64_t d = 0; d < kHeadDim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += weights[j] / sum * at(j, 2, d);
          out[(b * kSeq + i) * kModel + h * kHeadDim + d] = acc;
        }
      }
  return out;
}

void add(Matrix& a, const Matrix& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

}  // namespace

double initial_loss() {
  static const double loss = [] {
    const std::vector<Param> p = initial_params();
    const std::vector<float> x = one_hot();
    Matrix h = linear(Matrix(x.begin(), x.end()), p[kEmb], nullptr);
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t c = 0; c < kModel; ++c) h[t * kModel + c] += p[kPos].data[t % kSeq * kModel + c];
    for (int64_t l = 0; l < kLayers; ++l) {
      auto at = [&](BlockParam k) -> const Param& { return p[param_index(l, k)]; };
      add(h, linear(attention(linear(layer_norm(h, at(kLn1G), at(kLn1B)), at(kWqkv), &at(kBqkv))), at(kWo), &at(kBo)));
      Matrix fc = linear(layer_norm(h, at(kLn2G), at(kLn2B)), at(kWfc), &at(kBfc));
      for (double& v : fc) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));  // exact GELU
      add(h, linear(fc, at(kWproj), &at(kBproj)));
    }
    const Matrix logits = linear(layer_norm(h, p[kLnfG], p[kLnfB]), p[kHead], nullptr);
    double total = 0;
    for (int64_t t = 0; t < kTokens; ++t) {
      const double* row = &logits[t * kVocab];
      const double max = *std::max_element(row, row + kVocab);
      double sum = 0;
      for (int64_t c = 0; c < kVocab; ++c) sum += std::exp(row[c] - max);
      total += std::log(sum) + max - row[target_id(t)];
    }
    return total / kTokens;
  }();
  return loss;
}

}  // namespace bench::gpt
