// y = x @ W^T (+ bias) in float32 over a weight packed once into column panels.
//
// Packing: W [N, K] becomes panels of kPanel output columns, each stored k-major
// ([N_pad / kPanel, K, kPanel], zero-padded), so that one panel streams through memory
// once and then sits in L2 while every row tile of x is multiplied against it.
// The micro-kernel holds a tile of up to 4 rows x 24 columns in 12 vector accumulators:
// per k, three panel loads and four broadcasts feed twelve FMAs.
//
// NOTE: rows are taken in blocks of kRowBlock so that a block of x stays in L2 while the
// panels stream past it. Software prefetch of the next panel was tried: slower.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "vec8.h"

namespace {

constexpr int64_t kPanel = 24;
constexpr int64_t kRowBlock = 64;


inline vec8 splat(float s) { return vec8{s, s, s, s, s, s, s, s}; }

template <int MR>
void tile(const float* x, int64_t ldx, const float* panel, int64_t K, const float* bias, float* y, int64_t ldy,
          int64_t cols) {
  vec8 acc[MR][3];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = acc[r][2] = vec8{};
  for (int64_t k = 0; k < K; ++k) {
    const float* b = panel + k * kPanel;
    const vec8 b0 = load8(b), b1 = load8(b + 8), b2 = load8(b + 16);
    for (int r = 0; r < MR; ++r) {
      const vec8 a = splat(x[r * ldx + k]);
      acc[r][0] += a * b0;
      acc[r][1] += a * b1;
      acc[r][2] += a * b2;
    }
  }
  if (bias != nullptr) {
    vec8 bv[3] = {};
    float tmp[kPanel] = {};
    std::memcpy(tmp, bias, cols * sizeof(float));
    for (int j = 0; j < 3; ++j) bv[j] = load8(tmp + 8 * j);
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < 3; ++j) acc[r][j] += bv[j];
  }
  for (int r = 0; r < MR; ++r) {
    float* out = y + r * ldy;
    if (cols == kPanel) {
      for (int j = 0; j < 3; ++j) store8(out + 8 * j, acc[r][j]);
    } else {
      float tmp[kPanel];
      for (int j = 0; j < 3; ++j) store8(tmp + 8 * j, acc[r][j]);
      std::memcpy(out, tmp, cols * sizeof(float));
    }
  }
}

void rows_times_panel(const float* x, int64_t ldx, int64_t rows, const float* panel, int64_t K, const float* bias,
                      float* y, int64_t ldy, int64_t cols) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) tile<4>(x + r * ldx, ldx, panel, K, bias, y + r * ldy, ldy, cols);
  switch (rows - r) {
    case 3: tile<3>(x + r * ldx, ldx, panel, K, bias, y + r * ldy, ldy, cols); break;
    case 2: tile<2>(x + r * ldx, ldx, panel, K, bias, y + r * ldy, ldy, cols); break;
    case 1: tile<1>(x + r * ldx, ldx, panel, K, bias, y + r * ldy, ldy, cols); break;
    default: break;
  }
}

// weight [N, K] -> [ceil(N / kPanel), K, kPanel]
at::Tensor pack_linear_weight(const at::Tensor& weight) {
  TORCH_CHECK(weight.scalar_type() == at::kFloat && weight.is_contiguous() && weight.dim() == 2, "weight must be a contiguous float32 matrix");
  const int64_t N = weight.size(0), K = weight.size(1);
  const int64_t panels = (N + kPanel - 1) / kPanel;
  at::Tensor packed = at::empty({panels, K, kPanel}, weight.options());
  const float* w = weight.data_ptr<float>();
  float* p = packed.data_ptr<float>();
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t pi = begin; pi < end; ++pi) {
      float* dst = p + pi * K * kPanel;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < kPanel; ++j) {
          const int64_t n = pi * kPanel + j;
          dst[k * kPanel + j] = n < N ? w[n * K + k] : 0.f;
        }
    }
  });
  return packed;
}

// x [M, K] (rows contiguous) times a packed weight of out_features rows; bias [N] or None.
at::Tensor packed_linear(const at::Tensor& x, const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                         int64_t out_features) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.stride(1) == 1, "x must be a float32 matrix with contiguous rows");
  const int64_t M = x.size(0), K = x.size(1), N = out_features;
  const int64_t panels = (N + kPanel - 1) / kPanel;
  TORCH_CHECK(packed.scalar_type() == at::kFloat && packed.is_contiguous() && packed.dim() == 3 && packed.size(0) == panels &&
                  packed.size(1) == K && packed.size(2) == kPanel,
              "the packed weight does not match x's width (", K, ") and out_features (", N, ")");
  const float* bp = nullptr;
  if (bias.has_value()) {
    TORCH_CHECK(bias->scalar_type() == at::kFloat && bias->is_contiguous() && bias->numel() == N, "bias must be float32 [out_features]");
    bp = bias->data_ptr<float>();
  }
  at::Tensor out = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const int64_t ldx = x.stride(0);
  const float* pp = packed.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  for (int64_t r0 = 0; r0 < M; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, M - r0);
    at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t pi = begin; pi < end; ++pi) {
        const int64_t n0 = pi * kPanel;
        rows_times_panel(xp + r0 * ldx, ldx, rows, pp + pi * K * kPanel, K, bp ? bp + n0 : nullptr,
                         yp + r0 * N + n0, N, std::min(kPanel, N - n0));
      }
    });
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("pack_linear_weight(Tensor weight) -> Tensor");
  m.impl("pack_linear_weight", &pack_linear_weight);
  m.def("packed_linear(Tensor x, Tensor packed, Tensor? bias, int out_features) -> Tensor");
  m.impl("packed_linear", &packed_linear);

}
