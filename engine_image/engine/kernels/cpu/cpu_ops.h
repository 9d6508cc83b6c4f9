// The C++ entry points of the CPU kernel ops (their schemas are in each file's
// TORCH_LIBRARY_FRAGMENT), for kernels that chain them without a trip through Python.
#pragma once

#include <ATen/core/Tensor.h>

namespace gomgr_cpu {

void rms_norm(const at::Tensor& x, const at::Tensor& out, const at::Tensor& weight, double eps);
void add_rms_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& normed, const at::Tensor& sum,
                  const at::Tensor& weight, double eps);
void rotary_heads(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin_signed, const at::Tensor& out);
void store_kv(const at::Tensor& k, const at::Tensor& v, const at::Tensor& k_buffer, const at::Tensor& v_buffer,
              const at::Tensor& loc);
void decode_attention(const at::Tensor& q, const at::Tensor& out, const at::Tensor& k_buffer, const at::Tensor& v_buffer,
                      const at::Tensor& req_to_token, const at::Tensor& req_pool_indices, const at::Tensor& seq_lens,
                      double scale);
void silu_and_mul(const at::Tensor& gate_up, const at::Tensor& out);

}  // namespace gomgr_cpu
