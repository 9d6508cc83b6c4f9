// The quantized linear ops' torch entry points and the int8 activations they share; the
// formats and panel kernels are panel_kernels.h's (no torch headers, for the ISA files).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "panel_kernels.h"

namespace gomgr_quant {

// Int8Rows' arrays, owned.
struct Int8Buffers {
  at::Tensor q, dx, n16, n32;
};
// x [M, K] (float32, rows contiguous, K a multiple of 32) quantized per row and block of 32.
Int8Buffers quantize_rows(const at::Tensor& x);

// y = x @ W^T (+ bias), W the packed parts stacked along the output: the op quantized_linear.
at::Tensor quantized_linear(const at::Tensor& x, const std::vector<at::Tensor>& panels, const std::vector<int64_t>& formats,
                            const std::vector<int64_t>& out_features, const std::optional<at::Tensor>& bias, int64_t isa);
// silu(x @ Wg^T + bg) * (x @ Wu^T + bu), the two parts gate and up of equal out_features: the
// op quantized_gate_up.
at::Tensor quantized_gate_up(const at::Tensor& x, const std::vector<at::Tensor>& panels, const std::vector<int64_t>& formats,
                             const std::vector<int64_t>& out_features, const std::optional<at::Tensor>& bias, int64_t isa);

}  // namespace gomgr_quant
