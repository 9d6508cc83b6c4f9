// AVX-512 panel kernels: int8 activations x unsigned weight quants by vpdpbusd (VNNI), and
// bf16 weights by vdpbf16ps (AVX512-BF16). Compiled for those ISAs per function, so the
// library loads anywhere; the dispatcher calls them only where the CPU has them.
//
// Per group and row: G/4 vpdpbusd (16 columns x 4 k each, the activation's 4 bytes
// broadcast) into an int32 dot, then acc += dot * dx * scale + min * sum(x) (a symmetric
// format's zero point starts the dot instead of the last term): the whole weight group is
// loaded (and its nibbles unpacked) once per tile of kIntRowTile rows.

#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "group_quants_avx512.h"
#include "panel_kernels.h"

#define GOMGR_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace gomgr_quant {
namespace {

// NOTE: 16 rows per pass over a weight group: its loads and nibble unpacking shared by more
// rows (Q5_0 1.2x, Q8_0 1.1x of 8 rows at 256 rows on Zen 4), the accumulators still in registers.
constexpr int kIntRowTile = 16;
// NOTE: eight independent accumulators hide vdpbf16ps's latency (one chain per row).
constexpr int kHalfRowTile = 8;

template <int MR, Format F>
GOMGR_TARGET_VNNI void int_tile(const Int8Rows& x, int64_t m0, const uint8_t* panel, const float* bias, float* y,
                                int64_t ldy, __mmask16 mask) {
  constexpr int32_t Z = zero_point(F);
  constexpr int64_t G = group_size(F);
  constexpr int kSteps = G / 4;
  constexpr int64_t kGroupBytes = group_bytes(F);
  const int64_t groups = x.K / G;
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* gp = panel + g * kGroupBytes;
    const __m512 scale = load_scales<half_scales(F)>(gp);
    const __m512 minimum = Z == 0 ? load_scales<half_scales(F)>(gp + kCols * scale_bytes(F)) : _mm512_setzero_ps();
    const uint8_t* quants = gp + group_fields(F) * kCols * scale_bytes(F);
    __m512i w[kSteps];
    load_group_quants<F>(quants, w);
    const int64_t k0 = g * G;
    // NOTE: unrolled, so that acc[] stays in registers (a rolled loop keeps it on the stack).
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const int64_t m = m0 + r;
      const int8_t* xq = x.q + m * x.K + k0;
      // NOTE: two dependency chains instead of one halve the wait on vpdpbusd's latency.
      __m512i dot[2] = {_mm512_set1_epi32(group_dot_start<F>(x, m, k0)), _mm512_setzero_si512()};
#pragma GCC unroll 8
      for (int t = 0; t < kSteps; ++t) {
        int32_t four;
        std::memcpy(&four, xq + 4 * t, 4);
        dot[t & 1] = _mm512_dpbusd_epi32(dot[t & 1], w[t], _mm512_set1_epi32(four));
      }
      acc[r] = add_group_dot<F>(acc[r], _mm512_add_epi32(dot[0], dot[1]), x, m, k0, scale, minimum);
    }
  }
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + (m0 + r) * ldy, mask, _mm512_add_ps(acc[r], b));
}

template <Format F, size_t... R>
constexpr auto int_tiles(std::index_sequence<R...>) {
  return std::array{&int_tile<static_cast<int>(R) + 1, F>...};
}

template <Format F>
GOMGR_TARGET_VNNI void int_rows(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, const float* bias,
                                float* y, int64_t ldy, __mmask16 mask) {
  // NOTE: int_tile<MR> for MR = 1 .. kIntRowTile: whole tiles, then one tile of the rest.
  static constexpr auto kTiles = int_tiles<F>(std::make_index_sequence<kIntRowTile>());
  int64_t r = 0;
  for (; r + kIntRowTile <= rows; r += kIntRowTile) kTiles[kIntRowTile - 1](x, m0 + r, panel, bias, y, ldy, mask);
  if (r < rows) kTiles[rows - r - 1](x, m0 + r, panel, bias, y, ldy, mask);
}

template <int MR>
GOMGR_TARGET_BF16 void bf16_tile(const uint32_t* xb, int64_t K2, int64_t m0, const uint8_t* panel, const float* bias,
                                 float* y, int64_t ldy, __mmask16 mask) {
  // NOTE: few rows make few dependency chains: those take U k-pairs into U accumulators each.
  constexpr int U = MR >= kHalfRowTile ? 1 : MR >= 4 ? 2 : 4;
  __m512 acc[MR][U];
  for (int r = 0; r < MR; ++r)
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + U <= K2; k += U)
    for (int u = 0; u < U; ++u) {
      const __m512bh w = (__m512bh)_mm512_loadu_si512(panel + 64 * (k + u));
      for (int r = 0; r < MR; ++r)
        acc[r][u] = _mm512_dpbf16_ps(acc[r][u], w, (__m512bh)_mm512_set1_epi32(xb[(m0 + r) * K2 + k + u]));
    }
  for (; k < K2; ++k) {
    const __m512bh w = (__m512bh)_mm512_loadu_si512(panel + 64 * k);
    for (int r = 0; r < MR; ++r)
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w, (__m512bh)_mm512_set1_epi32(xb[(m0 + r) * K2 + k]));
  }
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int r = 0; r < MR; ++r) {
    __m512 sum = b;
    for (int u = 0; u < U; ++u) sum = _mm512_add_ps(sum, acc[r][u]);
    _mm512_mask_storeu_ps(y + (m0 + r) * ldy, mask, sum);
  }
}

}  // namespace

GOMGR_TARGET_VNNI void int_panel_avx512_vnni(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel,
                                             Format f, const float* bias, float* y, int64_t ldy, int64_t cols) {
  const __mmask16 mask = column_mask(cols);
  with_int_format(f, [&](auto format) { int_rows<decltype(format)::value>(x, m0, rows, panel, bias, y, ldy, mask); });
}

GOMGR_TARGET_BF16 void bf16_rows_avx512(const float* x, int64_t ldx, int64_t M, int64_t K, uint16_t* out) {
  const int64_t width = (K + 1) / 2 * 2;
  for (int64_t m = 0; m < M; ++m) {
    uint16_t* row = out + m * width;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + k), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + m * ldx + k)));
    const __mmask16 tail = __mmask16((1u << (K - k)) - 1);
    const __m256i last = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, x + m * ldx + k));
    _mm256_mask_storeu_epi16(row + k, __mmask16((1u << (width - k)) - 1), last);
  }
}

GOMGR_TARGET_BF16 void bf16_panel_avx512(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows,
                                         const uint8_t* panel, const float* bias, float* y, int64_t ldy,
                                         int64_t cols) {
  const __mmask16 mask = column_mask(cols);
  int64_t r = 0;
  for (; r + kHalfRowTile <= rows; r += kHalfRowTile)
    bf16_tile<kHalfRowTile>(xb, K2, m0 + r, panel, bias, y, ldy, mask);
  switch (rows - r) {
    case 7: bf16_tile<7>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 6: bf16_tile<6>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 5: bf16_tile<5>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 4: bf16_tile<4>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 3: bf16_tile<3>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 2: bf16_tile<2>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    case 1: bf16_tile<1>(xb, K2, m0 + r, panel, bias, y, ldy, mask); break;
    default: break;
  }
}

}  // namespace gomgr_quant
