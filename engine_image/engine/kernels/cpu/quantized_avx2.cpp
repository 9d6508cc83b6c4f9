// AVX2 panel kernels, the path on every x86-64 CPU without AVX-512: int8 activations x
// unsigned weight quants by vpmaddubsw + vpmaddwd (int_panel_avx2.h), and bf16 / fp16 weights
// widened to fp32 in registers for FMA. A 16-column panel is two 8-column halves here.

#include <immintrin.h>

#include <cstring>

#include "panel_kernels.h"

#define GOMGR_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define GOMGR_INT_TARGET GOMGR_TARGET_AVX2
#define GOMGR_INT_VNNI 0
#define GOMGR_INT_PANEL int_panel_avx2
#include "int_panel_avx2.h"

namespace gomgr_quant {
namespace {

template <int MR>
GOMGR_TARGET_AVX2 void bf16_tile(const float* x, int64_t ldx, int64_t K2, int64_t m0, const uint8_t* panel,
                                 const float* bias, float* y, int64_t ldy, int64_t cols) {
  const __m256i high16 = _mm256_set1_epi32(int(0xFFFF0000u));
  // NOTE: one row alone gets its odd k in separate accumulators (twice the dependency
  // chains); more rows have chains enough, and 16 more registers would spill.
  constexpr int kOdd = MR == 1 ? 1 : 0;
  __m256 acc[MR][2][1 + kOdd];
  for (int r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i <= kOdd; ++i) acc[r][h][i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K2; ++k) {
    __m256 even[2], odd[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 64 * k + 32 * h));
      even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      odd[h] = _mm256_castsi256_ps(_mm256_and_si256(v, high16));
    }
    // NOTE: both column halves under one pair of broadcasts per row.
    for (int r = 0; r < MR; ++r) {
      const float* xr = x + (m0 + r) * ldx + 2 * k;
      const __m256 xe = _mm256_set1_ps(xr[0]), xo = _mm256_set1_ps(xr[1]);
      for (int h = 0; h < 2; ++h) {
        acc[r][h][0] = _mm256_fmadd_ps(even[h], xe, acc[r][h][0]);
        acc[r][h][kOdd] = _mm256_fmadd_ps(odd[h], xo, acc[r][h][kOdd]);
      }
    }
  }
  __m256 sum[MR][2];
  for (int r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h) sum[r][h] = kOdd ? _mm256_add_ps(acc[r][h][0], acc[r][h][kOdd]) : acc[r][h][0];
  store_tile<MR>(sum, m0, bias, y, ldy, cols);
}

template <int MR, int U>
GOMGR_TARGET_AVX2 inline void f16_step(const float* x, int64_t ldx, int64_t m0, const uint8_t* panel, int64_t k, int u,
                                       __m256 (&acc)[MR][2][U]) {
  const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 32 * k)));
  const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 32 * k + 16)));
  for (int r = 0; r < MR; ++r) {
    const __m256 a = _mm256_set1_ps(x[(m0 + r) * ldx + k]);
    acc[r][0][u] = _mm256_fmadd_ps(w0, a, acc[r][0][u]);
    acc[r][1][u] = _mm256_fmadd_ps(w1, a, acc[r][1][u]);
  }
}

template <int MR>
GOMGR_TARGET_AVX2 void f16_tile(const float* x, int64_t ldx, int64_t K, int64_t m0, const uint8_t* panel,
                                const float* bias, float* y, int64_t ldy, int64_t cols) {
  // NOTE: few rows make few dependency chains: those take U k into U accumulators each.
  constexpr int U = MR >= 4 ? 1 : MR >= 2 ? 2 : 4;
  __m256 acc[MR][2][U];
  for (int r = 0; r < MR; ++r)
    for (int u = 0; u < U; ++u) acc[r][0][u] = acc[r][1][u] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + U <= K; k += U)
    for (int u = 0; u < U; ++u) f16_step<MR, U>(x, ldx, m0, panel, k + u, u, acc);
  for (; k < K; ++k) f16_step<MR, U>(x, ldx, m0, panel, k, 0, acc);
  __m256 sum[MR][2];
  for (int r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h) {
      sum[r][h] = acc[r][h][0];
      for (int u = 1; u < U; ++u) sum[r][h] = _mm256_add_ps(sum[r][h], acc[r][h][u]);
    }
  store_tile<MR>(sum, m0, bias, y, ldy, cols);
}

// Runs TILE<MR> over rows in tiles of kRowTile, then the remainder.
#define GOMGR_ROW_TILES(TILE, ...)                                                        \
  do {                                                                                    \
    int64_t r = 0;                                                                        \
    for (; r + kRowTile <= rows; r += kRowTile) TILE<kRowTile>(__VA_ARGS__);              \
    switch (rows - r) {                                                                   \
      case 3: TILE<3>(__VA_ARGS__); break;                                                \
      case 2: TILE<2>(__VA_ARGS__); break;                                                \
      case 1: TILE<1>(__VA_ARGS__); break;                                                \
      default: break;                                                                     \
    }                                                                                     \
  } while (0)

}  // namespace

GOMGR_TARGET_AVX2 void bf16_panel_avx2(const float* x, int64_t ldx, int64_t K2, int64_t m0, int64_t rows,
                                       const uint8_t* panel, const float* bias, float* y, int64_t ldy, int64_t cols) {
  GOMGR_ROW_TILES(bf16_tile, x, ldx, K2, m0 + r, panel, bias, y, ldy, cols);
}

GOMGR_TARGET_AVX2 void f16_panel_f16c(const float* x, int64_t ldx, int64_t K, int64_t m0, int64_t rows,
                                      const uint8_t* panel, const float* bias, float* y, int64_t ldy, int64_t cols) {
  GOMGR_ROW_TILES(f16_tile, x, ldx, K, m0 + r, panel, bias, y, ldy, cols);
}

}  // namespace gomgr_quant
