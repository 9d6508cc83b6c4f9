// Eight float32 lanes as a GCC vector type: AVX2 code under -mavx2, plain SSE or scalar code
// elsewhere, from one source.
#pragma once

typedef float vec8 __attribute__((vector_size(32)));

inline vec8 load8(const float* p) {
  vec8 r;
  __builtin_memcpy(&r, p, sizeof(r));
  return r;
}

inline void store8(float* p, vec8 x) { __builtin_memcpy(p, &x, sizeof(x)); }

inline float sum8(vec8 x) {
  float s = 0.f;
  for (int i = 0; i < 8; ++i) s += x[i];
  return s;
}
