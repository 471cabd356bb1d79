// The inputs and references of the workloads, defined beside their lazyjit rows, for the
// peers' rows in other files.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_rows.h"

namespace bench {

namespace ew {  // bench_elementwise.cpp: float32[n]
const std::vector<float>& input(int64_t n);
Reference simple_ref(int64_t n);         ///< relu(x*1.5+0.25)*0.5 + x
Reference transcendental_ref(int64_t n);  ///< sigmoid(x)*tanh(x*0.5+1) + x*x
}  // namespace ew

namespace norm {  // bench_norm.cpp: over the last dim of float32[kRows, kCols]
inline constexpr int64_t kRows = 4096, kCols = 1024, kN = kRows * kCols;
inline constexpr float kEps = 1e-5f;
const std::vector<float>& x_data();
const std::vector<float>& gamma_data();
const std::vector<float>& beta_data();
Reference softmax_ref();
Reference layer_norm_ref();
}  // namespace norm

namespace gemm {  // bench_matmul.cpp: matmul a[kDim, kDim] @ b; linear_relu relu(x[kBatch, kDim] @ b + bias)
inline constexpr int64_t kDim = 1024, kBatch = 512;
const std::vector<float>& a_data();
const std::vector<float>& b_data();
const std::vector<float>& x_data();
const std::vector<float>& bias_data();
Reference matmul_ref();
Reference linear_relu_ref();
}  // namespace gemm

namespace recompiles {  // bench_compile.cpp: relu(x[batch, kK] @ w[kK, kN] + b) for batch 1..kMaxBatch
inline constexpr int64_t kMaxBatch = 64, kK = 128, kN = 64;
const std::vector<float>& x_data();  ///< the rows of batch kMaxBatch; batch n is the first n
const std::vector<float>& w_data();
const std::vector<float>& b_data();
Reference last_batch_ref();  ///< the result at batch kMaxBatch
}  // namespace recompiles

namespace conv {  // bench_conv.cpp: a ResNet 3x3 layer, conv2d(x, w, bias, padding 1) over NCHW
inline constexpr int64_t kN = 8, kC = 64, kH = 56, kW = 56, kK = 3;
const std::vector<float>& x_data();     ///< [kN, kC, kH, kW]
const std::vector<float>& w_data();     ///< [kC, kC, kK, kK]
const std::vector<float>& bias_data();  ///< [kC]
const std::vector<float>& gy_data();    ///< the output's cotangent, [kN, kC, kH, kW]
Reference forward_ref();                ///< the output
Reference weight_grad_ref();            ///< d sum(out * gy) / dw
}  // namespace conv

namespace embed {  // bench_conv.cpp: embedding(weight[kVocab, kDim], tokens[kBatch, kSeq])
inline constexpr int64_t kVocab = 50000, kDim = 512, kBatch = 16, kSeq = 512, kTokens = kBatch * kSeq;
const std::vector<float>& weight_data();
const std::vector<int64_t>& token_data();
const std::vector<float>& gy_data();  ///< the output's cotangent, [kTokens, kDim]
Reference forward_ref();              ///< the rows looked up
Reference weight_grad_ref();          ///< d sum(out * gy) / dweight: gy's rows added at their tokens
}  // namespace embed

}  // namespace bench
