// RMSNorm over the rows of a float32 matrix, alone or fused with the residual add before it:
//   out = weight * (x * 1/sqrt(mean(x^2) + eps))
// the reference's float32 math in one pass over each row instead of six elementwise ops.
//
// NOTE: the sum of squares runs in four vector accumulators, another order than torch's
// reduction, so a result may differ from F.rms_norm in the last bit; the reciprocal square
// root is taken in double and rounded once (-ffast-math would otherwise approximate it).

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>

#include "vec8.h"
#include "cpu_ops.h"

namespace {

float inverse_rms(const float* x, int64_t n, float eps) {
  vec8 acc[4] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int a = 0; a < 4; ++a) {
      const vec8 v = load8(x + i + 8 * a);
      acc[a] += v * v;
    }
  for (; i + 8 <= n; i += 8) {
    const vec8 v = load8(x + i);
    acc[0] += v * v;
  }
  float sum = sum8((acc[0] + acc[1]) + (acc[2] + acc[3]));
  for (; i < n; ++i) sum += x[i] * x[i];
  const float variance = sum / static_cast<float>(n);
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance + eps)));
}

void scale_row(const float* x, const float* weight, float inv, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, load8(weight + i) * (load8(x + i) * inv));
  for (; i < n; ++i) out[i] = weight[i] * (x[i] * inv);
}

void check_rows(const at::Tensor& t, const char* name, int64_t width) {
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK(t.dim() >= 1 && t.size(-1) == width, name, "'s last dimension must be ", width);
}

template <typename RowFn>
void for_each_row(int64_t rows, int64_t width, const RowFn& fn) {
  const int64_t grain = std::max<int64_t>(1, gomgr_cpu::kGrainElements / std::max<int64_t>(width, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

}  // namespace

namespace gomgr_cpu {

void rms_norm(const at::Tensor& x, const at::Tensor& out, const at::Tensor& weight, double eps) {
  const int64_t width = weight.numel();
  check_rows(weight, "weight", width);
  check_rows(x, "x", width);
  check_rows(out, "out", width);
  TORCH_CHECK(out.numel() == x.numel(), "out must have x's shape");
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float e = static_cast<float>(eps);
  for_each_row(x.numel() / width, width, [&](int64_t r) {
    const float* row = xp + r * width;
    scale_row(row, wp, inverse_rms(row, width, e), width, op + r * width);
  });
}

// sum = residual + x (the next residual stream); normed = rms_norm(sum).
void add_rms_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& normed,
                  const at::Tensor& sum, const at::Tensor& weight, double eps) {
  const int64_t width = weight.numel();
  check_rows(weight, "weight", width);
  check_rows(x, "x", width);
  for (const at::Tensor* t : {&residual, &normed, &sum}) {
    check_rows(*t, "residual, normed and sum", width);
    TORCH_CHECK(t->numel() == x.numel(), "residual, normed and sum must have x's shape");
  }
  const float* xp = x.data_ptr<float>();
  const float* rp = residual.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* np = normed.data_ptr<float>();
  float* sp = sum.data_ptr<float>();
  const float e = static_cast<float>(eps);
  for_each_row(x.numel() / width, width, [&](int64_t r) {
    const int64_t at = r * width;
    int64_t i = 0;
    for (; i + 8 <= width; i += 8) store8(sp + at + i, load8(rp + at + i) + load8(xp + at + i));
    for (; i < width; ++i) sp[at + i] = rp[at + i] + xp[at + i];
    scale_row(sp + at, wp, inverse_rms(sp + at, width, e), width, np + at);
  });
}

}  // namespace gomgr_cpu

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("rms_norm(Tensor x, Tensor(a!) out, Tensor weight, float eps) -> ()");
  m.impl("rms_norm", &gomgr_cpu::rms_norm);
  m.def("add_rms_norm(Tensor x, Tensor residual, Tensor(a!) normed, Tensor(b!) sum, Tensor weight, float eps) -> ()");
  m.impl("add_rms_norm", &gomgr_cpu::add_rms_norm);
}
