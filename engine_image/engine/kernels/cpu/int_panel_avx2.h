// The 256-bit int panel kernel, compiled twice from this one text: for AVX2 (quantized_avx2.cpp:
// vpmaddubsw + vpmaddwd) and for AVX-VNNI (quantized_avx_vnni.cpp: vpdpbusd on ymm, the CPUs
// with VNNI but no AVX-512). A 16-column panel is two 8-column halves here. The includer defines
// GOMGR_INT_TARGET (the function target attribute), GOMGR_INT_VNNI (0 or 1) and GOMGR_INT_PANEL
// (the entry point's name); the helpers also serve the includer's other kernels.
//
// NOTE: vpmaddubsw saturates its int16 pair sums: 63 x 127 x 2 fits, 255 x 127 x 2 does not.
// Q8_0's quants (q + 128, up to 255) are therefore multiplied as signed s = q - 128 by the
// sign trick (|s| x sign(x, s), at most 128 x 127 x 2), and the 128 x sum(x) they lost is
// added back through the min: min + 128 * scale. vpdpbusd sums in int32 and needs neither.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "panel_kernels.h"

namespace gomgr_quant {
namespace {

constexpr int kRowTile = 4;

GOMGR_INT_TARGET inline void store_columns(float* out, __m256 lo, __m256 hi, int64_t cols) {
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
GOMGR_INT_TARGET inline void store_tile(__m256 (&acc)[MR][2], int64_t m0, const float* bias, float* y, int64_t ldy,
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
GOMGR_INT_TARGET inline __m256 load_scales(const uint8_t* p) {
  if constexpr (kHalf) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

template <int MR, Format F>
GOMGR_INT_TARGET void int_tile(const Int8Rows& x, int64_t m0, const uint8_t* panel, const float* bias, float* y,
                                int64_t ldy, int64_t cols) {
  constexpr Format Q = quant_format(F);
  constexpr int32_t Z = zero_point(F);
  constexpr int64_t G = group_size(F);
  constexpr int kSteps = G / 4;
  constexpr int64_t kGroupBytes = group_bytes(F);
  const int64_t groups = x.K / G, blocks = x.K / kActBlock;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
#if !GOMGR_INT_VNNI
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
#endif
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
#if !GOMGR_INT_VNNI
      if constexpr (Q == kFull32) minimum = _mm256_fmadd_ps(_mm256_set1_ps(128.f), scale, minimum);
#endif
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
#if !GOMGR_INT_VNNI
        if constexpr (Q == kFull32)
          for (int t = 0; t < kSteps; ++t) w[t] = _mm256_xor_si256(w[t], flip);
#endif
      }
      for (int r = 0; r < MR; ++r) {
        const int64_t m = m0 + r;
        const int8_t* xq = x.q + m * x.K + k0;
        __m256i dot = _mm256_setzero_si256();
        for (int t = 0; t < kSteps; ++t) {
          int32_t four;
          std::memcpy(&four, xq + 4 * t, 4);
          const __m256i xv = _mm256_set1_epi32(four);
#if GOMGR_INT_VNNI
          dot = _mm256_dpbusd_avx_epi32(dot, w[t], xv);
#else
          __m256i pairs;
          if constexpr (Q == kFull32)
            pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w[t]), _mm256_sign_epi8(xv, w[t]));
          else
            pairs = _mm256_maddubs_epi16(w[t], xv);
          dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
#endif
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

template <Format F>
GOMGR_INT_TARGET void int_rows(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, const float* bias,
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

GOMGR_INT_TARGET void GOMGR_INT_PANEL(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f,
                                      const float* bias, float* y, int64_t ldy, int64_t cols) {
  with_int_format(f, [&](auto format) { int_rows<decltype(format)::value>(x, m0, rows, panel, bias, y, ldy, cols); });
}

}  // namespace gomgr_quant
