// AVX2 panel kernels, the path on every x86-64 CPU without AVX-512: int8 activations x
// unsigned weight quants by vpmaddubsw + vpmaddwd, and bf16 / fp16 weights widened to fp32 in
// registers for FMA. A 16-column panel is two 8-column halves here.
//
// NOTE: vpmaddubsw saturates its int16 pair sums: 63 x 127 x 2 fits, 255 x 127 x 2 does not.
// Q8_0's quants (q + 128, up to 255) are therefore multiplied as signed s = q - 128 by the
// sign trick (|s| x sign(x, s), at most 128 x 127 x 2), and the 128 x sum(x) they lost is
// added back through the min: min + 128 * scale.

#include <immintrin.h>

#include <cstring>

#include "panel_kernels.h"

#define GOMGR_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace gomgr_quant {
namespace {

constexpr int kRowTile = 4;

GOMGR_TARGET_AVX2 inline void store_columns(float* out, __m256 lo, __m256 hi, int64_t cols) {
  if (cols == kCols) {
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
    return;
  }
  float tmp[kCols];
  _mm256_storeu_ps(tmp, lo);
  _mm256_storeu_ps(tmp + 8, hi);
  std::memcpy(out, tmp, cols * sizeof(float));
}

template <int MR>
GOMGR_TARGET_AVX2 inline void store_tile(__m256 (&acc)[MR][2], int64_t m0, const float* bias, float* y, int64_t ldy,
                                         int64_t cols) {
  __m256 b[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  if (bias != nullptr) {
    float tmp[kCols] = {};
    std::memcpy(tmp, bias, cols * sizeof(float));
    b[0] = _mm256_loadu_ps(tmp);
    b[1] = _mm256_loadu_ps(tmp + 8);
  }
  for (int r = 0; r < MR; ++r)
    store_columns(y + (m0 + r) * ldy, _mm256_add_ps(acc[r][0], b[0]), _mm256_add_ps(acc[r][1], b[1]), cols);
}

template <bool kHalf>
GOMGR_TARGET_AVX2 inline __m256 load_scales(const uint8_t* p) {
  if constexpr (kHalf) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

template <int MR, Format F>
GOMGR_TARGET_AVX2 void int_tile(const Int8Rows& x, int64_t m0, const uint8_t* panel, const float* bias, float* y,
                                int64_t ldy, int64_t cols) {
  constexpr Format Q = quant_format(F);
  constexpr int32_t Z = zero_point(F);
  constexpr int64_t G = group_size(F);
  constexpr int kSteps = G / 4;
  constexpr int64_t kGroupBytes = group_bytes(F);
  const int64_t groups = x.K / G, blocks = x.K / kActBlock;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
  __m256 acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* gp = panel + g * kGroupBytes;
    const uint8_t* quants = gp + group_fields(F) * kCols * scale_bytes(F);
    const int64_t k0 = g * G;
    for (int h = 0; h < 2; ++h) {
      const __m256 scale = load_scales<half_scales(F)>(gp + 8 * h * scale_bytes(F));
      __m256 minimum = Z == 0 ? load_scales<half_scales(F)>(gp + (kCols + 8 * h) * scale_bytes(F))
                              : _mm256_mul_ps(_mm256_set1_ps(-float(Z)), scale);
      if constexpr (Q == kFull32) minimum = _mm256_fmadd_ps(_mm256_set1_ps(128.f), scale, minimum);
      __m256i w[kSteps];
      if constexpr (Q == kNibble32 || Q == kFive32) {
        for (int i = 0; i < 4; ++i) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * i + 32 * h));
          w[i] = _mm256_and_si256(v, low4);
          w[i + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
        if constexpr (Q == kFive32) {
          const __m256i fifth = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 256 + 32 * h));
          for (int t = 0; t < kSteps; ++t) {
            const __m256i bit = _mm256_set1_epi8(char(1 << t));
            const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(fifth, bit), bit);
            w[t] = _mm256_or_si256(w[t], _mm256_and_si256(set, _mm256_set1_epi8(16)));
          }
        }
      } else {
        for (int t = 0; t < kSteps; ++t)
          w[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * t + 32 * h));
        if constexpr (Q == kFull32)
          for (int t = 0; t < kSteps; ++t) w[t] = _mm256_xor_si256(w[t], flip);
      }
      for (int r = 0; r < MR; ++r) {
        const int64_t m = m0 + r;
        const int8_t* xq = x.q + m * x.K + k0;
        __m256i dot = _mm256_setzero_si256();
        for (int t = 0; t < kSteps; ++t) {
          int32_t four;
          std::memcpy(&four, xq + 4 * t, 4);
          const __m256i xv = _mm256_set1_epi32(four);
          __m256i pairs;
          if constexpr (Q == kFull32)
            pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w[t]), _mm256_sign_epi8(xv, w[t]));
          else
            pairs = _mm256_maddubs_epi16(w[t], xv);
          dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
        }
        const float dx = x.dx[m * blocks + k0 / kActBlock];
        const int32_t n = G == 16 ? x.n16[m * (x.K / 16) + k0 / 16] : x.n32[m * blocks + k0 / kActBlock];
        const float sx = dx * static_cast<float>(n);
        const __m256 d = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dx));
        acc[r][h] = _mm256_fmadd_ps(d, scale, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(minimum, _mm256_set1_ps(sx), acc[r][h]);
      }
    }
  }
  store_tile<MR>(acc, m0, bias, y, ldy, cols);
}

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

template <Format F>
GOMGR_TARGET_AVX2 void int_rows(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, const float* bias,
                                float* y, int64_t ldy, int64_t cols) {
  int64_t r = 0;
  for (; r + kRowTile <= rows; r += kRowTile) int_tile<kRowTile, F>(x, m0 + r, panel, bias, y, ldy, cols);
  switch (rows - r) {
    case 3: int_tile<3, F>(x, m0 + r, panel, bias, y, ldy, cols); break;
    case 2: int_tile<2, F>(x, m0 + r, panel, bias, y, ldy, cols); break;
    case 1: int_tile<1, F>(x, m0 + r, panel, bias, y, ldy, cols); break;
    default: break;
  }
}

}  // namespace

GOMGR_TARGET_AVX2 void int_panel_avx2(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f,
                                      const float* bias, float* y, int64_t ldy, int64_t cols) {
  switch (f) {
    case kNibble32: int_rows<kNibble32>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kByte16: int_rows<kByte16>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFull32: int_rows<kFull32>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kNibble32Half: int_rows<kNibble32Half>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFull32Half: int_rows<kFull32Half>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFive32: int_rows<kFive32>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFive32Half: int_rows<kFive32Half>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kNibble32HalfZero8: int_rows<kNibble32HalfZero8>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFive32HalfZero16: int_rows<kFive32HalfZero16>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kFull32HalfZero128: int_rows<kFull32HalfZero128>(x, m0, rows, panel, bias, y, ldy, cols); break;
    case kByte16Zero32: int_rows<kByte16Zero32>(x, m0, rows, panel, bias, y, ldy, cols); break;
    default: break;
  }
}

GOMGR_TARGET_AVX2 void bf16_panel_avx2(const float* x, int64_t ldx, int64_t K2, int64_t m0, int64_t rows,
                                       const uint8_t* panel, const float* bias, float* y, int64_t ldy, int64_t cols) {
  GOMGR_ROW_TILES(bf16_tile, x, ldx, K2, m0 + r, panel, bias, y, ldy, cols);
}

GOMGR_TARGET_AVX2 void f16_panel_f16c(const float* x, int64_t ldx, int64_t K, int64_t m0, int64_t rows,
                                      const uint8_t* panel, const float* bias, float* y, int64_t ldy, int64_t cols) {
  GOMGR_ROW_TILES(f16_tile, x, ldx, K, m0 + r, panel, bias, y, ldy, cols);
}

}  // namespace gomgr_quant
