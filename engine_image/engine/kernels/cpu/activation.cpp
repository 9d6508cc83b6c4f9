// SiLU-gated linear unit on CPU: out = silu(gate) * up, with gate and up the two halves of
// each row of the fused gate_up projection, in one pass (torch: silu of a strided half,
// then a multiply).
// The formula is cpu_ops.h's silu_mul_row.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include "cpu_ops.h"

namespace gomgr_cpu {

void silu_and_mul(const at::Tensor& gate_up, const at::Tensor& out) {
  TORCH_CHECK(gate_up.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "gate_up and out must be float32");
  TORCH_CHECK(gate_up.is_contiguous() && out.is_contiguous(), "gate_up and out must be contiguous");
  const int64_t width = out.size(-1);
  TORCH_CHECK(gate_up.size(-1) == 2 * width, "gate_up's last dimension must be twice out's");
  TORCH_CHECK(gate_up.numel() == 2 * out.numel(), "gate_up and out must have the same rows");
  const int64_t rows = out.numel() / std::max<int64_t>(width, 1);
  const float* in = gate_up.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(width, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) silu_mul_row(in + r * 2 * width, in + r * 2 * width + width, o + r * width, width);
  });
}

}  // namespace gomgr_cpu

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("silu_and_mul(Tensor gate_up, Tensor(a!) out) -> ()");
  m.impl("silu_and_mul", &gomgr_cpu::silu_and_mul);
}
