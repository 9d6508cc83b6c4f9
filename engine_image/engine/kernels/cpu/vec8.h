// Eight float32 lanes as a GCC vector type: AVX2 code under -mavx2, plain SSE or scalar code
// elsewhere, from one source.
#pragma once

#include <cstdint>

typedef float vec8 __attribute__((vector_size(32)));

inline vec8 load8(const float* p) {
  vec8 r;
  __builtin_memcpy(&r, p, sizeof(r));
  return r;
}

// Eight bfloat16 values (their bits) widened to float32: exact, a zero-extend and a shift.
inline vec8 load8(const uint16_t* p) {
  typedef uint16_t u16x8 __attribute__((vector_size(16)));
  typedef uint32_t u32x8 __attribute__((vector_size(32)));
  u16x8 h;
  __builtin_memcpy(&h, p, sizeof(h));
  const u32x8 w = __builtin_convertvector(h, u32x8) << 16;
  vec8 r;
  __builtin_memcpy(&r, &w, sizeof(r));
  return r;
}

// x rounded to bfloat16 (nearest even; NaN stays a quiet NaN), as torch's .to(bfloat16).
inline uint16_t to_bf16(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof(u));
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline void store8(float* p, vec8 x) { __builtin_memcpy(p, &x, sizeof(x)); }

inline float sum8(vec8 x) {
  float s = 0.f;
  for (int i = 0; i < 8; ++i) s += x[i];
  return s;
}
