// A weight group's scales and quants in AVX-512 registers, shared by the VNNI kernel (which
// multiplies them there) and the AMX kernel (which stores them as a tile's bytes): the nibble
// and fifth-bit unpacking is done one way.
#pragma once

#include <immintrin.h>

#include "panel_kernels.h"

#define GOMGR_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace gomgr_quant {

// The lanes of a panel's first `cols` columns (all kCols but in a last, narrower panel).
inline __mmask16 column_mask(int64_t cols) {
  return cols >= kCols ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
}

// kCols scales (or mins) of a group, fp16 or float32 in the panel.
template <bool kHalf>
GOMGR_TARGET_VNNI inline __m512 load_scales(const uint8_t* p) {
  if constexpr (kHalf) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_loadu_ps(p);
}

// The group's quants as G/4 steps of [kCols columns][4 k] unsigned bytes.
template <Format F>
GOMGR_TARGET_VNNI inline void load_group_quants(const uint8_t* quants, __m512i* w) {
  constexpr Format Q = quant_format(F);
  constexpr int kSteps = group_size(F) / 4;
  if constexpr (Q == kNibble32 || Q == kFive32) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < 4; ++i) {
      const __m512i v = _mm512_loadu_si512(quants + 64 * i);
      w[i] = _mm512_and_si512(v, low4);
      w[i + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    if constexpr (Q == kFive32) {
      const __m512i fifth = _mm512_loadu_si512(quants + 256);
      for (int t = 0; t < kSteps; ++t) {
        const __mmask64 set = _mm512_test_epi8_mask(fifth, _mm512_set1_epi8(char(1 << t)));
        w[t] = _mm512_mask_add_epi8(w[t], set, w[t], _mm512_set1_epi8(16));
      }
    }
  } else {
    for (int t = 0; t < kSteps; ++t) w[t] = _mm512_loadu_si512(quants + 64 * t);
  }
}

// The int32 dot a row's group starts from: -Z sum(x) for a symmetric format (exact: |sum| <= 32
// x 127), else 0.
template <Format F>
inline int32_t group_dot_start(const Int8Rows& x, int64_t m, int64_t k0) {
  constexpr int32_t Z = zero_point(F);
  if constexpr (Z == 0) return 0;
  return -Z * (group_size(F) == 16 ? x.n16[m * (x.K / 16) + k0 / 16] : x.n32[m * (x.K / kActBlock) + k0 / kActBlock]);
}

// acc + one row's group: its int32 dot (from group_dot_start) times dx and the scales, plus
// min * dx * sum(x) for a format with a min. The one float formula of the VNNI and AMX kernels,
// so that both give the same bits.
template <Format F>
GOMGR_TARGET_VNNI inline __m512 add_group_dot(__m512 acc, __m512i dot, const Int8Rows& x, int64_t m, int64_t k0,
                                              __m512 scale, __m512 minimum) {
  const int64_t block = m * (x.K / kActBlock) + k0 / kActBlock;
  acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(x.dx[block])), scale, acc);
  if constexpr (zero_point(F) == 0) {
    const int32_t n = group_size(F) == 16 ? x.n16[m * (x.K / 16) + k0 / 16] : x.n32[block];
    acc = _mm512_fmadd_ps(minimum, _mm512_set1_ps(x.dx[block] * static_cast<float>(n)), acc);
  }
  return acc;
}

}  // namespace gomgr_quant
