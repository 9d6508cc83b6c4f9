// The C++ entry points of the CPU kernel ops (their schemas are in each file's
// TORCH_LIBRARY_FRAGMENT), for kernels that chain them without a trip through Python.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

namespace gomgr_cpu {

// NOTE: elements per task of the row-wise ops: below ~32K a second thread costs more than it saves.
constexpr int64_t kGrainElements = 32768;

void rms_norm(const at::Tensor& x, const at::Tensor& out, const at::Tensor& weight, double eps);
void add_rms_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& normed, const at::Tensor& sum,
                  const at::Tensor& weight, double eps);
void rotary_heads(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin_signed, const at::Tensor& out);
void store_kv(const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_buffer, const at::Tensor& v_buffer,
              const at::Tensor& loc);
void decode_attention(const at::Tensor& q, const at::Tensor& out, const at::Tensor& k_buffer, const at::Tensor& v_buffer,
                      const at::Tensor& req_to_token, const at::Tensor& req_pool_indices, const at::Tensor& seq_lens,
                      double scale, int64_t window, double logit_cap);
void silu_and_mul(const at::Tensor& gate_up, const at::Tensor& out);

// dst = silu(gate) * up over one row: the one formula of silu_and_mul and the fused gate/up
// projection (quantized_gate_up), so that both give the same bits.
// NOTE: -ffast-math lets GCC call glibc's vector expf and divide by a refined reciprocal,
// which turns gate / inf into NaN: the exponent is clamped at 88 (expf(88) is finite), so a
// gate below -88 gives a tiny negative number where torch gives -0.
inline void silu_mul_row(const float* gate, const float* up, float* dst, int64_t width) {
#pragma omp simd
  for (int64_t i = 0; i < width; ++i) dst[i] = gate[i] / (1.f + expf(std::min(-gate[i], 88.f))) * up[i];
}

// fn(i) for i in 0 .. count - 1, in runs of consecutive i that the threads take as they come
// free (OpenMP's guided schedule): a run is a share of what is left, so the first runs are
// long (few atomic adds, neighbouring items on one core's cache) and the last ones short. A
// thread the OS preempts (another process on the cores) or wakes late then holds up only the
// short run it is in, and items of unequal work (a prefill's tokens) still end level, where a
// static split leaves the other threads idle for the rest of the slow share.
template <typename F>
void parallel_items(int64_t count, const F& fn) {
  std::atomic<int64_t> next{0};
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), count);
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    int64_t start = next.load(std::memory_order_relaxed);
    while (start < count) {
      const int64_t run = std::max<int64_t>(1, (count - start) / (2 * threads));
      if (!next.compare_exchange_weak(start, start + run, std::memory_order_relaxed)) continue;
      for (int64_t i = start; i < std::min(start + run, count); ++i) fn(i);
      start = next.load(std::memory_order_relaxed);
    }
  });
}

}  // namespace gomgr_cpu
