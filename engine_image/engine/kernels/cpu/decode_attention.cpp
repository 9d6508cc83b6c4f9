// Decode attention over the paged KV pool on CPU, reading each request's K and V rows in
// place through req_to_token: no gather into a padded copy, no mask.
//
// A sliding window (window > 0) starts each query's keys at len - window; a logit cap
// (logit_cap > 0, Gemma 2) maps each scaled score s to cap * tanh(s / cap).
//
// One task is (request, KV head). Its query heads (the GQA group) are taken in blocks of up
// to four, each block in one pass over the keys: q·k for the block's heads per key row,
// softmax per head, then the V rows weighted per head. head_dim and the block size are
// template parameters so that the per-row loops unroll into fixed vector code.
//
// NOTE: built with -ffast-math (compile step only, never at link, so crtfastmath's
// flush-to-zero never reaches the process): it lets GCC reassociate the dot products into
// vector lanes and call glibc's vector expf. Scores are finite here, so finite-math holds.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vec8.h"
#include "cpu_ops.h"

namespace {

// T: the pool's element, float or bfloat16 bits (uint16_t; widened in registers).
template <typename T>
struct Head {
  const T* k;  // this KV head's first element in slot 0 of the K buffer
  const T* v;
  int64_t row_stride;  // elements between consecutive slots
  const int64_t* slots;
  int64_t len;
};

// NOTE: a request's slots lie anywhere in the pool (scattered further as the radix tree
// evicts and the allocator reuses slots), where the hardware prefetcher cannot follow: the
// K and V rows kAhead keys ahead are prefetched (30 layers at batch 32 over scattered slots:
// 26 -> 19 ms; slots in blocks: level).
constexpr int64_t kAhead = 8;

template <int D, typename T>
inline void prefetch_row(const T* row) {
  for (int i = 0; i < D; i += 64 / sizeof(T)) __builtin_prefetch(row + i);
}

// Attention of GB query heads (q: GB rows of D) over one KV head; out: GB rows of D.
template <int D, int GB, typename T>
void attend_block(const float* q_rows, float scale, float cap, const Head<T>& head, float* scores, float* out) {
  constexpr int NV = D / 8;
  vec8 q[GB][NV];
  for (int g = 0; g < GB; ++g)
    for (int j = 0; j < NV; ++j) q[g][j] = load8(q_rows + g * D + j * 8) * scale;
  float row_max[GB];
  for (int g = 0; g < GB; ++g) row_max[g] = -FLT_MAX;
  const int64_t L = head.len;
  for (int64_t t = 0; t < L; ++t) {
    if (t + kAhead < L) prefetch_row<D>(head.k + head.slots[t + kAhead] * head.row_stride);
    const T* k = head.k + head.slots[t] * head.row_stride;
    vec8 acc[GB] = {};
    for (int j = 0; j < NV; ++j) {
      const vec8 kj = load8(k + j * 8);
      for (int g = 0; g < GB; ++g) acc[g] += q[g][j] * kj;
    }
    for (int g = 0; g < GB; ++g) {
      const float s = cap > 0.f ? cap * std::tanh(sum8(acc[g]) / cap) : sum8(acc[g]);
      scores[g * L + t] = s;
      row_max[g] = std::max(row_max[g], s);
    }
  }
  for (int g = 0; g < GB; ++g) {
    float* s = scores + g * L;
    const float m = row_max[g];
    float total = 0.f;
#pragma omp simd reduction(+ : total)
    for (int64_t t = 0; t < L; ++t) {
      s[t] = expf(s[t] - m);
      total += s[t];
    }
    vec8 acc[NV] = {};
    for (int64_t t = 0; t < L; ++t) {
      if (t + kAhead < L) prefetch_row<D>(head.v + head.slots[t + kAhead] * head.row_stride);
      const T* v = head.v + head.slots[t] * head.row_stride;
      const float p = s[t];
      for (int j = 0; j < NV; ++j) acc[j] += p * load8(v + j * 8);
    }
    const float inv = 1.f / total;
    for (int j = 0; j < NV; ++j) store8(out + g * D + j * 8, acc[j] * inv);
  }
}

template <int D, typename T>
void attend_group(const float* q_rows, int64_t group, float scale, float cap, const Head<T>& head, float* scores,
                  float* out) {
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const float* q = q_rows + g0 * D;
    float* o = out + g0 * D;
    switch (std::min<int64_t>(group - g0, 4)) {
      case 1: attend_block<D, 1, T>(q, scale, cap, head, scores, o); break;
      case 2: attend_block<D, 2, T>(q, scale, cap, head, scores, o); break;
      case 3: attend_block<D, 3, T>(q, scale, cap, head, scores, o); break;
      default: attend_block<D, 4, T>(q, scale, cap, head, scores, o); break;
    }
  }
}

void check_float(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

// The tasks of decode_attention over a pool of T (float or bfloat16 bits).
template <typename T>
void attend_tasks(const float* q_ptr, float* out_ptr, const T* k_ptr, const T* v_ptr, const int64_t* r2t,
                  int64_t r2t_stride, const int64_t* rows, const int64_t* lens, int64_t batch, int64_t heads,
                  int64_t kv_heads, int64_t D, float sc, float cap, int64_t window) {
  const int64_t group = heads / kv_heads;
  // NOTE: tasks handed out as threads come free: a prefill's tasks (one per new token) grow
  // with the token's position, so equal static shares of them are unequal work (one
  // 512-token prompt: 5.1 -> 3.3-3.8 ms on 2 cores).
  gomgr_cpu::parallel_items(batch * kv_heads, [&](int64_t task) {
    thread_local std::vector<float> scores;
    const int64_t b = task / kv_heads;
    const int64_t h = task % kv_heads;
    const int64_t first = window > 0 ? std::max<int64_t>(lens[b] - window, 0) : 0;
    const Head<T> head{k_ptr + h * D, v_ptr + h * D, kv_heads * D, r2t + rows[b] * r2t_stride + first, lens[b] - first};
    scores.resize(std::min<int64_t>(group, 4) * head.len);
    const int64_t offset = b * heads * D + h * group * D;
    const float* qh = q_ptr + offset;
    float* oh = out_ptr + offset;
    switch (D) {
      case 16: attend_group<16>(qh, group, sc, cap, head, scores.data(), oh); break;
      case 32: attend_group<32>(qh, group, sc, cap, head, scores.data(), oh); break;
      case 64: attend_group<64>(qh, group, sc, cap, head, scores.data(), oh); break;
      case 128: attend_group<128>(qh, group, sc, cap, head, scores.data(), oh); break;
      default: attend_group<256>(qh, group, sc, cap, head, scores.data(), oh); break;
    }
  });
}

}  // namespace

namespace gomgr_cpu {

// q, out: [B, heads * D]; k_buffer, v_buffer: [slots, kv_heads, D]; req_to_token: [rows, C];
// req_pool_indices, seq_lens: [B] int64; window: 0 for none; logit_cap: 0 for none. The
// buffers are float32 or bfloat16 (--kv-cache-dtype bf16), both the same.
void decode_attention(const at::Tensor& q, const at::Tensor& out, const at::Tensor& k_buffer,
                      const at::Tensor& v_buffer, const at::Tensor& req_to_token,
                      const at::Tensor& req_pool_indices, const at::Tensor& seq_lens, double scale,
                      int64_t window, double logit_cap) {
  check_float(q, "q");
  check_float(out, "out");
  const bool bf16 = k_buffer.scalar_type() == at::kBFloat16;
  TORCH_CHECK((bf16 || k_buffer.scalar_type() == at::kFloat) && v_buffer.scalar_type() == k_buffer.scalar_type() &&
                  k_buffer.is_contiguous() && v_buffer.is_contiguous(),
              "k_buffer and v_buffer must be contiguous, both float32 or both bfloat16");
  TORCH_CHECK(req_to_token.scalar_type() == at::kLong && req_to_token.stride(1) == 1, "req_to_token must be int64 rows");
  TORCH_CHECK(req_pool_indices.scalar_type() == at::kLong && req_pool_indices.is_contiguous(), "req_pool_indices must be int64");
  TORCH_CHECK(seq_lens.scalar_type() == at::kLong && seq_lens.is_contiguous(), "seq_lens must be int64");
  const int64_t batch = q.size(0);
  const int64_t kv_heads = k_buffer.size(1);
  const int64_t D = k_buffer.size(2);
  const int64_t heads = q.size(1) / D;
  const int64_t group = heads / kv_heads;
  TORCH_CHECK(heads * D == q.size(1) && group * kv_heads == heads, "q's width must be a multiple of kv_heads * head_dim");
  TORCH_CHECK(D == 16 || D == 32 || D == 64 || D == 128 || D == 256, "unsupported head_dim ", D);

  const float sc = static_cast<float>(scale);
  const float cap = static_cast<float>(logit_cap);
  const int64_t* r2t = req_to_token.data_ptr<int64_t>();
  const int64_t* rows = req_pool_indices.data_ptr<int64_t>();
  const int64_t* lens = seq_lens.data_ptr<int64_t>();
  if (bf16)
    attend_tasks(q.data_ptr<float>(), out.data_ptr<float>(), static_cast<const uint16_t*>(k_buffer.data_ptr()),
                 static_cast<const uint16_t*>(v_buffer.data_ptr()), r2t, req_to_token.stride(0), rows, lens, batch, heads,
                 kv_heads, D, sc, cap, window);
  else
    attend_tasks(q.data_ptr<float>(), out.data_ptr<float>(), k_buffer.data_ptr<float>(), v_buffer.data_ptr<float>(), r2t,
                 req_to_token.stride(0), rows, lens, batch, heads, kv_heads, D, sc, cap, window);
}

}  // namespace gomgr_cpu

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("decode_attention(Tensor q, Tensor(a!) out, Tensor k_buffer, Tensor v_buffer, Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float scale, int window, float logit_cap) -> ()");
  m.impl("decode_attention", &gomgr_cpu::decode_attention);
}
