// x quantized to int8 per row and block of 32 (panel_kernels.h's Int8Rows): the activations of
// every int kernel, made once per call for all the parts it multiplies.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "quantized.h"

namespace gomgr_quant {
namespace {

// Per row and block of 32: d = max|x| / 127, q = round(x / d) (llama.cpp's q8_0 activations),
// in AVX2 (the library's base ISA): 4 vectors per block.
void quantize_block(const float* v, int8_t* q, float* dx, int32_t* n16, int32_t* n32) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 a[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm256_loadu_ps(v + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, a[i]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float max_abs = _mm_cvtss_f32(m4);
  const float d = max_abs / 127.f;
  const __m256 inv = _mm256_set1_ps(max_abs > 0.f ? 127.f / max_abs : 0.f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(a[i], inv));  // rounds to nearest even
  const __m256i halves[2] = {_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])};
  int32_t sums[2];
  for (int h = 0; h < 2; ++h) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(halves[h]), _mm256_extracti128_si256(halves[h], 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    sums[h] = _mm_cvtsi128_si32(s4);
  }
  // NOTE: the packs interleave 128-bit lanes; the permutation puts the 32 bytes back in order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *dx = d;
  n16[0] = sums[0];
  n16[1] = sums[1];
  *n32 = sums[0] + sums[1];
}

}  // namespace

Int8Buffers quantize_rows(const at::Tensor& x) {
  const int64_t M = x.size(0), K = x.size(1), ldx = x.stride(0), blocks = K / kActBlock;
  TORCH_CHECK(K % kActBlock == 0, "int8 activations need a width that is a multiple of 32, got ", K);
  const at::TensorOptions ints = x.options().dtype(at::kInt);
  Int8Buffers b{at::empty({M, K}, x.options().dtype(at::kChar)), at::empty({M, blocks}, x.options()),
                at::empty({M, K / 16}, ints), at::empty({M, blocks}, ints)};
  const float* xp = x.data_ptr<float>();
  int8_t* q = b.q.data_ptr<int8_t>();
  float* dx = b.dx.data_ptr<float>();
  int32_t *n16 = b.n16.data_ptr<int32_t>(), *n32 = b.n32.data_ptr<int32_t>();
  // NOTE: a block takes nanoseconds: threads only pay for many rows.
  at::parallel_for(0, M, std::max<int64_t>(1, 16384 / K), [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      for (int64_t i = m * blocks; i < (m + 1) * blocks; ++i)
        quantize_block(xp + m * ldx + (i - m * blocks) * kActBlock, q + i * kActBlock, dx + i, n16 + 2 * i, n32 + i);
  });
  return b;
}

namespace {

std::tuple<at::Tensor, at::Tensor> quantize_activations(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.stride(1) == 1, "x must be a float32 matrix with contiguous rows");
  Int8Buffers b = quantize_rows(x);
  return {b.q, b.dx};
}

}  // namespace
}  // namespace gomgr_quant

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("quantize_activations(Tensor x) -> (Tensor, Tensor)");
  m.impl("quantize_activations", &gomgr_quant::quantize_activations);
}
