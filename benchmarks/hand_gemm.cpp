// The hand sgemm peer (see hand_loops.h), built -O3 -march=native: b packed into 32-wide
// panels; a 6x32 tile of c lives in 12 AVX-512 registers while rows of a are broadcast.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "hand_parallel.h"

namespace bench {

#ifdef __AVX512F__
namespace {

constexpr int64_t kMr = 6;    // rows of a per tile
constexpr int64_t kNr = 32;   // columns per panel: two zmm
constexpr int64_t kKc = 256;  // depth per pass: kKc rows of a panel (32 KiB) stay in L1

// c[0..R, cols) (+)= a[0..R, 0..kc) @ panel[0..kc, 0..32); `mask` selects the columns stored.
template <int R>
void tile(const float* a, int64_t lda, const float* panel, int64_t kc, float* c, int64_t ldc, __mmask32 mask,
          bool accumulate) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(panel + k * kNr), b1 = _mm512_loadu_ps(panel + k * kNr + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + k]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(mask), m1 = static_cast<__mmask16>(mask >> 16);
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_maskz_loadu_ps(m0, cr));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    _mm512_mask_storeu_ps(cr, m0, acc[r][0]);
    _mm512_mask_storeu_ps(cr + 16, m1, acc[r][1]);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask32, bool);
constexpr TileFn kTiles[kMr + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

// c (+)= a @ b; see sgemm and sgemm_add.
void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool accumulate) {
  // Panel p holds b[0..k, 32p..32p+32) row after row, zero-padded past column n.
  const int64_t panels = (n + kNr - 1) / kNr;
  const auto packed = std::make_unique_for_overwrite<float[]>(panels * k * kNr);
  parallel(panels, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t cols = std::min(kNr, n - p * kNr);
      for (int64_t kk = 0; kk < k; ++kk) {
        float* dst = std::copy_n(b + kk * n + p * kNr, cols, &packed[(p * k + kk) * kNr]);
        std::fill_n(dst, kNr - cols, 0.0f);
      }
    }
  });
  // Each thread sweeps its row tiles under one panel block, so the block is read from L1.
  parallel((m + kMr - 1) / kMr, [&](int64_t tb, int64_t te) {
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t cols = std::min(kNr, n - p * kNr);
        const __mmask32 mask = cols == kNr ? ~0u : (1u << cols) - 1;
        for (int64_t t = tb; t < te; ++t) {
          const int64_t i = t * kMr;
          kTiles[std::min(kMr, m - i)](a + i * k + k0, k, &packed[(p * k + k0) * kNr], kc, c + i * n + p * kNr, n, mask,
                                       accumulate || k0 > 0);
        }
      }
    }
  });
}

}  // namespace
#else
namespace {

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool accumulate) {
  parallel(m, [=](int64_t ib, int64_t ie) {
    for (int64_t i = ib; i < ie; ++i) {
      float* ci = c + i * n;
      if (!accumulate) std::fill_n(ci, n, 0.0f);
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < n; ++j) ci[j] += a[i * k + kk] * b[kk * n + j];
    }
  });
}

}  // namespace
#endif

void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemm(a, b, c, m, n, k, /*accumulate=*/false);
}
void sgemm_add(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemm(a, b, c, m, n, k, /*accumulate=*/true);
}

}  // namespace bench
