// AMX panel kernels (Sapphire Rapids and later), for 16 rows of x at a time:
// - int formats by TDPBSUD: a group's int8 activations [16 rows x G] times its unsigned quants
//   [G/4 steps x 16 columns x 4 k] (the panel's own layout: the weight tile is loaded as it is,
//   or after unpacking nibbles) into 16 x 16 int32 dots, then the VNNI kernel's float formula
//   (add_group_dot): the same integers and the same float operations, so the same bits.
// - bf16 panels by TDPBF16PS ([K/2][16 columns][2 k] is the weight tile's layout), accumulated
//   in the tiles over all of K; and int panels widened to such a panel (widen_to_bf16) where a
//   call has enough rows to pay for the widening (the dispatcher's kWidenRows): the int8
//   tiles' group-by-group float work is the bound there (2x the time at 512 rows).
// Rows that do not fill a tile go to the AVX-512 kernels.
//
// NOTE: Linux hands out AMX state only to a process that asks (arch_prctl
// ARCH_REQ_XCOMP_PERM); amx_usable() asks once. The tile configuration is per thread and
// other code on the thread (oneDNN) sets its own, so every call loads ours and releases it.

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "group_quants_avx512.h"
#include "panel_kernels.h"

#define GOMGR_TARGET_AMX \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,amx-tile,amx-int8,amx-bf16")))

namespace gomgr_quant {
namespace {

constexpr int64_t kTileRows = 16;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void set(int tile, int tile_rows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};

// Tiles of the int kernel, two groups in flight: dots 0 and 1, activations 2 and 3, weights 4 and 5.
GOMGR_TARGET_AMX void configure_int(int64_t G) {
  TileConfig config;
  for (int i = 0; i < 2; ++i) {
    config.set(i, kTileRows, kCols * 4);
    config.set(2 + i, kTileRows, static_cast<int>(G));
    config.set(4 + i, static_cast<int>(G / 4), kCols * 4);
  }
  _tile_loadconfig(&config);
}

// The tiles' dots of one group (16 x 16 int32, stored) into acc.
template <Format F>
GOMGR_TARGET_AMX inline void add_dots(__m512* acc, const int32_t* dots, const Int8Rows& x, int64_t m0, int64_t k0,
                                      const uint8_t* gp) {
  const __m512 scale = load_scales<half_scales(F)>(gp);
  const __m512 minimum =
      zero_point(F) == 0 ? load_scales<half_scales(F)>(gp + kCols * scale_bytes(F)) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    const int64_t m = m0 + r;
    const __m512i dot = _mm512_add_epi32(_mm512_load_si512(dots + kCols * r), _mm512_set1_epi32(group_dot_start<F>(x, m, k0)));
    acc[r] = add_group_dot<F>(acc[r], dot, x, m, k0, scale, minimum);
  }
}

// A weight group's quants as the weight tile reads them: in the panel (bytes), or unpacked
// from nibbles and fifth bits into `unpacked` (the panel's groups, kSteps x 64 bytes each).
template <Format F>
GOMGR_TARGET_AMX const uint8_t* weight_tile(const uint8_t* panel, const uint8_t* unpacked, int64_t g) {
  constexpr int64_t kQuantsAt = group_fields(F) * kCols * scale_bytes(F);
  if constexpr (quant_format(F) == kNibble32 || quant_format(F) == kFive32) return unpacked + g * group_size(F) * kCols;
  return panel + g * group_bytes(F) + kQuantsAt;
}

template <Format F>
GOMGR_TARGET_AMX void int_rows_amx(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, const float* bias,
                                   float* y, int64_t ldy, __mmask16 mask) {
  constexpr int64_t G = group_size(F);
  constexpr int kSteps = G / 4;
  const int64_t groups = x.K / G;
  // NOTE: nibble formats are unpacked once per call, for all its row tiles.
  thread_local std::vector<uint8_t> unpacked;
  if constexpr (quant_format(F) == kNibble32 || quant_format(F) == kFive32) {
    unpacked.resize(static_cast<size_t>(groups * G * kCols));
    for (int64_t g = 0; g < groups; ++g) {
      __m512i w[kSteps];
      load_group_quants<F>(panel + g * group_bytes(F) + group_fields(F) * kCols * scale_bytes(F), w);
      for (int t = 0; t < kSteps; ++t) _mm512_storeu_si512(unpacked.data() + (g * kSteps + t) * 64, w[t]);
    }
  }
  alignas(64) int32_t dots[2][kTileRows * kCols];
  configure_int(G);
  for (int64_t r0 = m0; r0 < m0 + rows; r0 += kTileRows) {
    __m512 acc[kTileRows];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const int8_t* xq = x.q + r0 * x.K;
    // NOTE: group g + 1's tile product runs while group g's dots are scaled into acc.
    for (int64_t g = 0; g < groups; g += 2) {
      _tile_zero(0);
      _tile_loadd(2, xq + g * G, x.K);
      _tile_loadd(4, weight_tile<F>(panel, unpacked.data(), g), 64);
      _tile_dpbsud(0, 2, 4);
      const bool second = g + 1 < groups;
      if (second) {
        _tile_zero(1);
        _tile_loadd(3, xq + (g + 1) * G, x.K);
        _tile_loadd(5, weight_tile<F>(panel, unpacked.data(), g + 1), 64);
        _tile_dpbsud(1, 3, 5);
      }
      _tile_stored(0, dots[0], kCols * 4);
      add_dots<F>(acc, dots[0], x, r0, g * G, panel + g * group_bytes(F));
      if (second) {
        _tile_stored(1, dots[1], kCols * 4);
        add_dots<F>(acc, dots[1], x, r0, (g + 1) * G, panel + (g + 1) * group_bytes(F));
      }
    }
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
    for (int r = 0; r < kTileRows; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * ldy, mask, _mm512_add_ps(acc[r], b));
  }
  _tile_release();
}

// Tiles of the bf16 kernel, two row tiles a pass: sums 0 and 1, x 2 and 3, weights 4.
GOMGR_TARGET_AMX void configure_bf16() {
  TileConfig config;
  for (int i = 0; i < 5; ++i) config.set(i, kTileRows, 64);
  _tile_loadconfig(&config);
}

// Row tiles r0 .. r0 + 16 * T over the whole 16-pair chunks of K, plus the pairs after them
// by vdpbf16ps, into y.
template <int T>
GOMGR_TARGET_AMX void bf16_tiles_amx(const uint32_t* xb, int64_t K2, int64_t r0, const uint8_t* panel,
                                     const float* bias, float* y, int64_t ldy, __mmask16 mask) {
  constexpr int64_t kPairs = 16;
  const int64_t whole = K2 / kPairs * kPairs;
  _tile_zero(0);
  if constexpr (T == 2) _tile_zero(1);
  for (int64_t k = 0; k < whole; k += kPairs) {
    _tile_loadd(4, panel + 64 * k, 64);
    _tile_loadd(2, xb + r0 * K2 + k, K2 * 4);
    _tile_dpbf16ps(0, 2, 4);
    if constexpr (T == 2) {
      _tile_loadd(3, xb + (r0 + kTileRows) * K2 + k, K2 * 4);
      _tile_dpbf16ps(1, 3, 4);
    }
  }
  alignas(64) float sums[T][kTileRows * kCols];
  _tile_stored(0, sums[0], kCols * 4);
  if constexpr (T == 2) _tile_stored(1, sums[1], kCols * 4);
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int64_t r = 0; r < T * kTileRows; ++r) {
    __m512 sum = _mm512_load_ps(sums[r / kTileRows] + kCols * (r % kTileRows));
    for (int64_t k = whole; k < K2; ++k)
      sum = _mm512_dpbf16_ps(sum, (__m512bh)_mm512_loadu_si512(panel + 64 * k),
                             (__m512bh)_mm512_set1_epi32(static_cast<int>(xb[(r0 + r) * K2 + k])));
    _mm512_mask_storeu_ps(y + (r0 + r) * ldy, mask, _mm512_add_ps(sum, b));
  }
}

// A panel of an int format as a bf16 panel ([K/2][kCols][2 k]): each weight scale * q + min in
// float32 (as dequantize_column), rounded to bf16 (nearest even).
template <Format F>
GOMGR_TARGET_AMX void widen_to_bf16(const uint8_t* panel, int64_t K, uint8_t* out) {
  constexpr int64_t G = group_size(F);
  constexpr int kSteps = G / 4;
  // NOTE: step t's 64 bytes are [16 columns][4 k]; a quarter of them (4 columns x 4 k) widens to
  // 16 floats, whose columns' scales and mins are these lanes' (i / 4 + 4 j).
  __m512i spread[4];
  for (int j = 0; j < 4; ++j)
    spread[j] = _mm512_add_epi32(_mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2),
                                 _mm512_set1_epi32(4 * j));
  // NOTE: two bf16 quarters hold 8 columns' (k0 k1) and (k2 k3) pairs alternately: the even
  // pairs of both halves are pair row 2t, the odd ones pair row 2t + 1.
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  for (int64_t g = 0; g < K / G; ++g) {
    const uint8_t* gp = panel + g * group_bytes(F);
    const __m512 scale = load_scales<half_scales(F)>(gp);
    const __m512 minimum = zero_point(F) == 0 ? load_scales<half_scales(F)>(gp + kCols * scale_bytes(F))
                                              : _mm512_mul_ps(scale, _mm512_set1_ps(-static_cast<float>(zero_point(F))));
    __m512 scales[4], mins[4];
    for (int j = 0; j < 4; ++j) {
      scales[j] = _mm512_permutexvar_ps(spread[j], scale);
      mins[j] = _mm512_permutexvar_ps(spread[j], minimum);
    }
    __m512i w[kSteps];
    load_group_quants<F>(gp + group_fields(F) * kCols * scale_bytes(F), w);
    for (int t = 0; t < kSteps; ++t) {
      __m512 v[4];
      for (int j = 0; j < 4; ++j)
        v[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(w[t], j))), scales[j], mins[j]);
      const __m512i low = (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]), high = (__m512i)_mm512_cvtne2ps_pbh(v[3], v[2]);
      uint8_t* rows = out + (g * G / 2 + 2 * t) * 64;
      _mm512_storeu_si512(rows, _mm512_permutex2var_epi32(low, evens, high));
      _mm512_storeu_si512(rows + 64, _mm512_permutex2var_epi32(low, odds, high));
    }
  }
}

}  // namespace

bool amx_usable() {
  static const bool usable = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
                             __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("avx512vnni") &&
                             __builtin_cpu_supports("avx512bf16") &&
                             syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return usable;
}

GOMGR_TARGET_AMX void int_panel_amx(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f,
                                    const float* bias, float* y, int64_t ldy, int64_t cols) {
  const int64_t tiled = rows / kTileRows * kTileRows;
  const __mmask16 mask = column_mask(cols);
  if (tiled > 0) {
    with_int_format(f, [&](auto format) { int_rows_amx<decltype(format)::value>(x, m0, tiled, panel, bias, y, ldy, mask); });
  }
  if (tiled < rows) int_panel_avx512_vnni(x, m0 + tiled, rows - tiled, panel, f, bias, y, ldy, cols);
}

GOMGR_TARGET_AMX void int_panel_amx_bf16(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel,
                                         Format f, const float* bias, float* y, int64_t ldy, int64_t cols) {
  thread_local std::vector<uint8_t> widened;
  widened.resize(static_cast<size_t>(K2 * 64));
  const int64_t K = 2 * K2;
  with_int_format(f, [&](auto format) { widen_to_bf16<decltype(format)::value>(panel, K, widened.data()); });
  bf16_panel_amx(xb, K2, m0, rows, widened.data(), bias, y, ldy, cols);
}

GOMGR_TARGET_AMX void bf16_panel_amx(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel,
                                     const float* bias, float* y, int64_t ldy, int64_t cols) {
  const __mmask16 mask = column_mask(cols);
  int64_t r = m0;
  if (rows >= kTileRows) {
    configure_bf16();
    for (; r + 2 * kTileRows <= m0 + rows; r += 2 * kTileRows) bf16_tiles_amx<2>(xb, K2, r, panel, bias, y, ldy, mask);
    if (r + kTileRows <= m0 + rows) {
      bf16_tiles_amx<1>(xb, K2, r, panel, bias, y, ldy, mask);
      r += kTileRows;
    }
    _tile_release();
  }
  if (r < m0 + rows) bf16_panel_avx512(xb, K2, r, m0 + rows - r, panel, bias, y, ldy, cols);
}

}  // namespace gomgr_quant
