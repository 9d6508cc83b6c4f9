// Shared by the quantized and half-precision linear kernels, without torch's headers (the ISA
// files include only this): the packed weight formats, the int8 rows, and the per-ISA panel
// kernels the dispatcher (quantized_linear.cpp) calls.
//
// Int formats (w = scale * q + min, q unsigned): a weight is panels of kCols output columns;
// a panel is its groups in k order, each group [scale: kCols][min: kCols][quants] (f32 or f16;
// the symmetric formats', min = -zero point * scale, without the min),
// the quants as G/4 steps of [kCols columns][4 consecutive k] bytes, so that one 64-byte
// load feeds vpdpbusd with 16 columns x 4 k. Nibble formats keep step t in the low nibbles
// and step t + 4 in the high nibbles of the same 64 bytes.
// Half formats: BF16 panels are [K/2][kCols][2 k] (the pairs vdpbf16ps multiplies), F16
// panels [K][kCols].
#pragma once

#include <cstdint>
#include <type_traits>

namespace gomgr_quant {

constexpr int64_t kCols = 16;
constexpr int64_t kActBlock = 32;  // activation values sharing one int8 scale

enum Format : int64_t {
  kNibble32 = 0,  // 4-bit quants, groups of 32 (Q4_K)
  // 5-bit quants, groups of 32 (Q5_K): kNibble32's nibbles of the low 4 bits, then 64 bytes of
  // the fifth bits, bit t of byte i being that of byte i of step t (quants of 5 bits, not 8).
  kFive32 = 1,
  kByte16 = 2,  // quants <= 63, groups of 16 (Q6_K)
  kFull32 = 3,  // quants up to 255, groups of 32
  kBF16 = 4,
  kF16 = 5,
  // The same with fp16 scale and min: lossless for the types whose d and m are fp16 in the
  // file (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), and half the bytes.
  kNibble32Half = 6,
  kFive32Half = 7,
  kFull32Half = 8,
  // Symmetric types, w = scale * (q - zero point): the layouts above without the min (= -zero
  // point * scale; 5-10% fewer bytes for a decode step to read), and the VNNI kernel starts
  // each group's integer dot at -zero point * sum(x) instead of adding min * sum(x) in float (a
  // multiply-add per group and row less on the ports vpdpbusd runs on). Q4_0 (8), Q5_0 (16),
  // Q8_0 (128) with fp16 scales; Q6_K (32).
  kNibble32HalfZero8 = 9,
  kFive32HalfZero16 = 10,
  kFull32HalfZero128 = 11,
  kByte16Zero32 = 12,
};

constexpr Format kLastFormat = kByte16Zero32;
// The format with a min of the same quants and scale type (itself for those).
constexpr Format with_min(Format f) {
  return f == kNibble32HalfZero8 ? kNibble32Half
         : f == kFive32HalfZero16 ? kFive32Half
         : f == kFull32HalfZero128 ? kFull32Half
         : f == kByte16Zero32 ? kByte16
                               : f;
}
constexpr int32_t zero_point(Format f) {
  return f == kNibble32HalfZero8 ? 8 : f == kFive32HalfZero16 ? 16 : f == kFull32HalfZero128 ? 128 : f == kByte16Zero32 ? 32 : 0;
}
constexpr bool half_scales(Format f) { return with_min(f) >= kNibble32Half; }
constexpr Format quant_format(Format f) {
  const Format s = with_min(f);
  return s == kNibble32Half ? kNibble32 : s == kFive32Half ? kFive32 : s == kFull32Half ? kFull32 : s;
}
constexpr bool is_int(Format f) { return f != kBF16 && f != kF16; }
constexpr int64_t group_size(Format f) { return quant_format(f) == kByte16 ? 16 : 32; }
constexpr int64_t scale_bytes(Format f) { return half_scales(f) ? 2 : 4; }
constexpr int64_t group_quant_bytes(Format f) {
  return quant_format(f) == kFive32 ? 32 * kCols / 2 + 32 * kCols / 8
                                    : group_size(f) * kCols / (quant_format(f) == kNibble32 ? 2 : 1);
}
// The float fields of a group: the scale, and the min where there is no zero point.
constexpr int64_t group_fields(Format f) { return zero_point(f) == 0 ? 2 : 1; }
// [scale: kCols][min: kCols, without a zero point][quants]
constexpr int64_t group_bytes(Format f) { return group_fields(f) * kCols * scale_bytes(f) + group_quant_bytes(f); }

// fn(std::integral_constant<Format, F>()) for the int format f: the one switch from a format
// known at run time to the kernels' compile-time one (nothing for BF16 and F16).
template <typename Fn>
inline void with_int_format(Format f, Fn&& fn) {
  switch (f) {
    case kNibble32: fn(std::integral_constant<Format, kNibble32>()); break;
    case kFive32: fn(std::integral_constant<Format, kFive32>()); break;
    case kByte16: fn(std::integral_constant<Format, kByte16>()); break;
    case kFull32: fn(std::integral_constant<Format, kFull32>()); break;
    case kNibble32Half: fn(std::integral_constant<Format, kNibble32Half>()); break;
    case kFive32Half: fn(std::integral_constant<Format, kFive32Half>()); break;
    case kFull32Half: fn(std::integral_constant<Format, kFull32Half>()); break;
    case kNibble32HalfZero8: fn(std::integral_constant<Format, kNibble32HalfZero8>()); break;
    case kFive32HalfZero16: fn(std::integral_constant<Format, kFive32HalfZero16>()); break;
    case kFull32HalfZero128: fn(std::integral_constant<Format, kFull32HalfZero128>()); break;
    case kByte16Zero32: fn(std::integral_constant<Format, kByte16Zero32>()); break;
    default: break;
  }
}

// x quantized per row and block of 32: q int8 in [-127, 127], dx the block's scale, n16
// and n32 the sums of q over 16 and 32 values (times a zero point, or dx and a min).
struct Int8Rows {
  const int8_t* q;
  const float* dx;
  const int32_t* n16;
  const int32_t* n32;
  int64_t K;
};

// rows m0 .. m0 + rows of x times one panel into y[m, 0 .. cols) (row stride ldy), + bias.
void int_panel_avx512_vnni(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f,
                           const float* bias, float* y, int64_t ldy, int64_t cols);
void int_panel_avx2(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f, const float* bias,
                    float* y, int64_t ldy, int64_t cols);
void int_panel_avx_vnni(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f, const float* bias,
                        float* y, int64_t ldy, int64_t cols);
// x [M, K] (row stride ldx) rounded to bf16 (nearest even) into out [M, K rounded up to even].
void bf16_rows_avx512(const float* x, int64_t ldx, int64_t M, int64_t K, uint16_t* out);
// xb: x rounded to bf16, as k pairs [M, K/2] of uint32.
void bf16_panel_avx512(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel,
                       const float* bias, float* y, int64_t ldy, int64_t cols);
void bf16_panel_avx2(const float* x, int64_t ldx, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel,
                     const float* bias, float* y, int64_t ldy, int64_t cols);
// AMX (amx-tile, amx-int8, amx-bf16, with AVX-512 VNNI and BF16 for what does not fill a tile):
// whether this CPU has it and Linux lets the process use it (asked once), and the kernels, with
// the signatures of the AVX-512 ones they stand in for.
bool amx_usable();
void int_panel_amx(const Int8Rows& x, int64_t m0, int64_t rows, const uint8_t* panel, Format f, const float* bias,
                   float* y, int64_t ldy, int64_t cols);
void bf16_panel_amx(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel,
                    const float* bias, float* y, int64_t ldy, int64_t cols);
// An int panel widened to bf16 (rounded to nearest even), then bf16_panel_amx.
void int_panel_amx_bf16(const uint32_t* xb, int64_t K2, int64_t m0, int64_t rows, const uint8_t* panel, Format f,
                        const float* bias, float* y, int64_t ldy, int64_t cols);
void f16_panel_f16c(const float* x, int64_t ldx, int64_t K, int64_t m0, int64_t rows, const uint8_t* panel,
                    const float* bias, float* y, int64_t ldy, int64_t cols);

}  // namespace gomgr_quant
