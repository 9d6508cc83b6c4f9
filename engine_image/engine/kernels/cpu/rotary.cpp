// Rotate-half RoPE of the heads of each token, and the store of a step's K and V rows into
// the KV pool, on CPU in float32.
//
//   out[t, h, i] = x[t, h, i] * cos[t, i] + x[t, h, (i + D/2) % D] * sin_signed[t, i]
//
// NOTE: the same two products and one sum torch computes, each rounded on its own: no fused
// multiply-add (fp-contract off), so the result is bit-identical to RopeAngles.rotate_heads.

// NOTE: pushed and popped, so that the build's unity unit (build.py) compiles the files after
// this one as their own flags say.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include "cpu_ops.h"
#include "vec8.h"

namespace {

// A [tokens, heads, D] float32 view whose heads and elements are contiguous.
void check_heads(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.dim() == 3, name, " must be a float32 [tokens, heads, head_dim] tensor");
  TORCH_CHECK(t.stride(2) == 1 && t.stride(1) == t.size(2), name, "'s heads must be contiguous within a token");
}

}  // namespace

namespace gomgr_cpu {

// x, out: [T, H, D]; cos, sin_signed: [T, 1, D] or [T, D], contiguous.
void rotary_heads(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin_signed, const at::Tensor& out) {
  check_heads(x, "x");
  check_heads(out, "out");
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2);
  TORCH_CHECK(out.size(0) == T && out.size(1) == H && out.size(2) == D, "out must have x's shape");
  TORCH_CHECK(D % 2 == 0, "head_dim must be even");
  for (const at::Tensor* t : {&cos, &sin_signed}) {
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->is_contiguous() && t->numel() == T * D, "cos and sin_signed must be float32 [tokens, head_dim]");
  }
  const float* xp = x.data_ptr<float>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin_signed.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t xs = x.stride(0), os = out.stride(0), half = D / 2;
  const int64_t grain = std::max<int64_t>(1, gomgr_cpu::kGrainElements / std::max<int64_t>(H * D, 1));
  at::parallel_for(0, T, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* c = cp + t * D;
      const float* s = sp + t * D;
      for (int64_t h = 0; h < H; ++h) {
        const float* in = xp + t * xs + h * D;
        float* o = op + t * os + h * D;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) o[i] = in[i] * c[i] + in[i + half] * s[i];
#pragma omp simd
        for (int64_t i = half; i < D; ++i) o[i] = in[i] * c[i] + in[i - half] * s[i];
      }
    }
  });
}

// k_buffer[loc[t]] = k[t] and v_buffer[loc[t]] = v[t]; k, v: [T, KVH, D] float32; buffers [S, KVH, D],
// float32 (copied) or bfloat16 (rounded to nearest even, as torch's .to(bfloat16)).
void store_kv(const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_buffer, const at::Tensor& v_buffer,
              const at::Tensor& loc) {
  check_heads(k, "k");
  check_heads(v, "v");
  const bool bf16 = k_buffer.scalar_type() == at::kBFloat16;
  TORCH_CHECK((bf16 || k_buffer.scalar_type() == at::kFloat) && v_buffer.scalar_type() == k_buffer.scalar_type() &&
                  k_buffer.is_contiguous() && v_buffer.is_contiguous() && k_buffer.sizes() == v_buffer.sizes() &&
                  k_buffer.dim() == 3,
              "k_buffer and v_buffer must be contiguous [slots, kv_heads, head_dim] tensors, both float32 or both bfloat16");
  const int64_t T = k.size(0), row = k.size(1) * k.size(2), slots = k_buffer.size(0);
  TORCH_CHECK(v.size(0) == T && v.size(1) * v.size(2) == row && k_buffer.size(1) * k_buffer.size(2) == row,
              "k, v and the buffers must have the same heads and head_dim");
  TORCH_CHECK(loc.scalar_type() == at::kLong && loc.is_contiguous() && loc.numel() == T, "loc must be int64 [tokens]");
  const int64_t* lp = loc.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t) TORCH_CHECK(lp[t] >= 0 && lp[t] < slots, "slot ", lp[t], " is outside the pool");
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const int64_t ks = k.stride(0), vs = v.stride(0);
  const int64_t grain = std::max<int64_t>(1, gomgr_cpu::kGrainElements / std::max<int64_t>(2 * row, 1));
  if (bf16) {
    uint16_t* kb = static_cast<uint16_t*>(k_buffer.data_ptr());
    uint16_t* vb = static_cast<uint16_t*>(v_buffer.data_ptr());
    at::parallel_for(0, T, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        uint16_t *kd = kb + lp[t] * row, *vd = vb + lp[t] * row;
        const float *kt = kp + t * ks, *vt = vp + t * vs;
#pragma omp simd
        for (int64_t i = 0; i < row; ++i) kd[i] = to_bf16(kt[i]);
#pragma omp simd
        for (int64_t i = 0; i < row; ++i) vd[i] = to_bf16(vt[i]);
      }
    });
    return;
  }
  float* kb = k_buffer.data_ptr<float>();
  float* vb = v_buffer.data_ptr<float>();
  at::parallel_for(0, T, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      std::memcpy(kb + lp[t] * row, kp + t * ks, row * sizeof(float));
      std::memcpy(vb + lp[t] * row, vp + t * vs, row * sizeof(float));
    }
  });
}

}  // namespace gomgr_cpu

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("rotary_heads(Tensor x, Tensor cos, Tensor sin_signed, Tensor(a!) out) -> ()");
  m.impl("rotary_heads", &gomgr_cpu::rotary_heads);
  m.def("store_kv(Tensor k, Tensor v, Tensor(a!) k_buffer, Tensor(b!) v_buffer, Tensor loc) -> ()");
  m.impl("store_kv", &gomgr_cpu::store_kv);
}

#pragma GCC pop_options
