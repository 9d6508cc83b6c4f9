// y = x @ W^T (+ bias) over weights repacked from GGUF blocks (panel_kernels.h has the formats),
// for one or several parts stacked along the output dimension (fused q/k/v, gate/up) whose
// formats may differ. The activations are quantized to int8 (int8_activations.cpp) once per
// call for every int part; the panels of all parts share one parallel loop, so small parts
// do not idle threads.
//
// Kernel choice: the best the CPU runs (__builtin_cpu_supports), or forced by `isa`
// (0: AVX2 / F16C, 1: AVX-512, 2: AMX, with AVX-512 for rows that do not fill a tile, 3:
// AVX-VNNI for the int formats) so that tests run every path the machine can run.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cpu_ops.h"
#include "quantized.h"

namespace gomgr_quant {
namespace {

constexpr int64_t kRowBlock = 256;
// NOTE: from this many rows the AMX path widens an int panel to bf16 once per row block and
// multiplies it by TDPBF16PS (float sums over all of K), instead of int8 tiles whose dots are
// scaled group by group (that float work bounds them).
constexpr int64_t kWidenRows = 64;

enum class Kernel { kAmxInt8, kAmxWidened, kVnni, kAvxVnni, kAvx2Int, kBf16Amx, kBf16Avx512, kBf16Avx2, kF16c };

bool has_vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

bool has_avx_vnni() { return __builtin_cpu_supports("avxvnni"); }

bool has_avx512_bf16() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"); }

Kernel resolve(int64_t format, int64_t isa) {
  TORCH_CHECK(format >= kNibble32 && format <= kLastFormat, "unknown packed weight format ", format);
  TORCH_CHECK(isa >= -1 && isa <= 3, "isa must be -1 (best), 0 (AVX2), 1 (AVX-512), 2 (AMX) or 3 (AVX-VNNI), got ", isa);
  TORCH_CHECK(isa != 2 || amx_usable(),
              "the AMX kernels need a CPU with amx_tile, amx_int8, amx_bf16, avx512_vnni and avx512_bf16 (and Linux 5.16+)");
  const Format f = static_cast<Format>(format);
  const bool amx = isa == 2 || (isa == -1 && amx_usable());
  if (f == kF16) return Kernel::kF16c;
  if (isa == 3) {
    TORCH_CHECK(has_avx_vnni(), "the AVX-VNNI kernel needs a CPU with avx_vnni");
    return is_int(f) ? Kernel::kAvxVnni : Kernel::kBf16Avx2;
  }
  if (f == kBF16) {
    TORCH_CHECK(isa != 1 || has_avx512_bf16(), "the AVX512-BF16 kernel needs a CPU with avx512_bf16");
    if (amx) return Kernel::kBf16Amx;
    return (isa == 1 || (isa == -1 && has_avx512_bf16())) ? Kernel::kBf16Avx512 : Kernel::kBf16Avx2;
  }
  TORCH_CHECK(isa != 1 || has_vnni(), "the AVX-512 VNNI kernel needs a CPU with avx512_vnni (and avx512bw, avx512vl)");
  if (amx) return Kernel::kAmxInt8;
  if (isa == 1 || (isa == -1 && has_vnni())) return Kernel::kVnni;
  return isa == -1 && has_avx_vnni() ? Kernel::kAvxVnni : Kernel::kAvx2Int;
}

int64_t panel_bytes(Format f, int64_t K) {
  if (f == kBF16) return (K + 1) / 2 * 2 * kCols * 2;
  if (f == kF16) return K * kCols * 2;
  return K / group_size(f) * group_bytes(f);
}

at::Tensor bf16_pairs(const at::Tensor& x) {
  const int64_t M = x.size(0), K = x.size(1), K2 = (K + 1) / 2;
  at::Tensor xb = at::empty({M, K2}, x.options().dtype(at::kInt));
  bf16_rows_avx512(x.data_ptr<float>(), x.stride(0), M, K, reinterpret_cast<uint16_t*>(xb.data_ptr<int32_t>()));
  return xb;
}

struct Part {
  Format format;
  Kernel kernel;
  const uint8_t* panels;
  int64_t bytes_per_panel, first_panel, first_column, columns;
};

// x and the packed parts, checked, with x in every form their kernels read.
struct Operands {
  std::vector<Part> parts;
  int64_t M = 0, K = 0, N = 0, total_panels = 0;
  const float* bias = nullptr;
  Int8Buffers ib;
  Int8Rows rows8{};
  at::Tensor x, xb, xf;

  Operands(const at::Tensor& x_, const std::vector<at::Tensor>& panels, const std::vector<int64_t>& formats,
           const std::vector<int64_t>& out_features, const std::optional<at::Tensor>& bias_, int64_t isa)
      : x(x_) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.stride(1) == 1, "x must be a float32 matrix with contiguous rows");
    TORCH_CHECK(!panels.empty() && panels.size() == formats.size() && panels.size() == out_features.size(),
                "one format and out_features per packed part");
    M = x.size(0);
    K = x.size(1);
    bool any_int = false, any_bf16_avx512 = false, any_bf16_avx2 = false;
    for (size_t i = 0; i < panels.size(); ++i) {
      const Format f = static_cast<Format>(formats[i]);
      const Kernel resolved = resolve(f, isa);
      const Kernel kernel = resolved == Kernel::kAmxInt8 && M >= kWidenRows ? Kernel::kAmxWidened : resolved;
      const int64_t count = (out_features[i] + kCols - 1) / kCols, bytes = panel_bytes(f, K);
      TORCH_CHECK(panels[i].scalar_type() == at::kByte && panels[i].is_contiguous() && panels[i].numel() == count * bytes,
                  "packed part ", i, " does not match x's width (", K, ") and its out_features (", out_features[i], ")");
      parts.push_back({f, kernel, panels[i].data_ptr<uint8_t>(), bytes, total_panels, N, out_features[i]});
      total_panels += count;
      N += out_features[i];
      any_int |= is_int(f) && kernel != Kernel::kAmxWidened;  // NOTE: widened parts read x in bf16 only
      any_bf16_avx512 |= kernel == Kernel::kBf16Avx512 || kernel == Kernel::kBf16Amx || kernel == Kernel::kAmxWidened;
      any_bf16_avx2 |= kernel == Kernel::kBf16Avx2;
    }
    if (bias_.has_value()) {
      TORCH_CHECK(bias_->scalar_type() == at::kFloat && bias_->is_contiguous() && bias_->numel() == N, "bias must be float32 [out_features]");
      bias = bias_->data_ptr<float>();
    }
    if (any_int) {
      ib = quantize_rows(x);
      rows8 = Int8Rows{ib.q.data_ptr<int8_t>(), ib.dx.data_ptr<float>(), ib.n16.data_ptr<int32_t>(),
                       ib.n32.data_ptr<int32_t>(), K};
    }
    if (any_bf16_avx512) xb = bf16_pairs(x);
    // NOTE: the AVX2 bf16 kernel reads x in k pairs: an odd width gets a zero column.
    xf = any_bf16_avx2 && K % 2 ? at::constant_pad_nd(x, {0, 1}) : x;
  }

  int64_t part_of(int64_t pi) const {
    size_t i = 0;
    while (pi >= parts[i].first_panel + (parts[i].columns + kCols - 1) / kCols) ++i;
    return static_cast<int64_t>(i);
  }

  // The first output column of panel pi (of all parts' panels, in order).
  int64_t column(int64_t pi) const {
    const Part& part = parts[part_of(pi)];
    return part.first_column + (pi - part.first_panel) * kCols;
  }

  // Rows r0 .. r0 + rows of x times panel pi into y (row r0's first column of the panel,
  // row stride ldy).
  void panel(int64_t pi, int64_t r0, int64_t rows, float* y, int64_t ldy) const {
    const Part& part = parts[part_of(pi)];
    const int64_t p = pi - part.first_panel, n0 = part.first_column + p * kCols;
    const int64_t cols = std::min(kCols, part.columns - p * kCols);
    const uint8_t* w = part.panels + p * part.bytes_per_panel;
    const float* b = bias != nullptr ? bias + n0 : nullptr;
    // NOTE: the kernels take rows m0 .. of x into the same rows of y: here x starts at row r0
    // and m0 is 0, so that y may be a scratch tile.
    const int64_t K2 = (K + 1) / 2, blocks = K / kActBlock;
    switch (part.kernel) {
      case Kernel::kAmxInt8:
      case Kernel::kVnni:
      case Kernel::kAvxVnni:
      case Kernel::kAvx2Int: {
        const Int8Rows from{rows8.q + r0 * K, rows8.dx + r0 * blocks, rows8.n16 + r0 * (K / 16),
                            rows8.n32 + r0 * blocks, K};
        if (part.kernel == Kernel::kAmxInt8) int_panel_amx(from, 0, rows, w, part.format, b, y, ldy, cols);
        else if (part.kernel == Kernel::kVnni) int_panel_avx512_vnni(from, 0, rows, w, part.format, b, y, ldy, cols);
        else if (part.kernel == Kernel::kAvxVnni) int_panel_avx_vnni(from, 0, rows, w, part.format, b, y, ldy, cols);
        else int_panel_avx2(from, 0, rows, w, part.format, b, y, ldy, cols);
        break;
      }
      case Kernel::kAmxWidened:
      case Kernel::kBf16Amx:
      case Kernel::kBf16Avx512: {
        const uint32_t* pairs = reinterpret_cast<const uint32_t*>(xb.data_ptr<int32_t>()) + r0 * K2;
        if (part.kernel == Kernel::kAmxWidened) int_panel_amx_bf16(pairs, K2, 0, rows, w, part.format, b, y, ldy, cols);
        else if (part.kernel == Kernel::kBf16Amx) bf16_panel_amx(pairs, K2, 0, rows, w, b, y, ldy, cols);
        else bf16_panel_avx512(pairs, K2, 0, rows, w, b, y, ldy, cols);
        break;
      }
      case Kernel::kBf16Avx2:
        bf16_panel_avx2(xf.data_ptr<float>() + r0 * xf.stride(0), xf.stride(0), K2, 0, rows, w, b, y, ldy, cols);
        break;
      case Kernel::kF16c: f16_panel_f16c(x.data_ptr<float>() + r0 * x.stride(0), x.stride(0), K, 0, rows, w, b, y, ldy, cols); break;
    }
  }
};

}  // namespace

at::Tensor quantized_linear(const at::Tensor& x, const std::vector<at::Tensor>& panels, const std::vector<int64_t>& formats,
                            const std::vector<int64_t>& out_features, const std::optional<at::Tensor>& bias, int64_t isa) {
  const Operands ops(x, panels, formats, out_features, bias, isa);
  at::Tensor out = at::empty({ops.M, ops.N}, x.options());
  float* yp = out.data_ptr<float>();
  // NOTE: one parallel region for all row blocks and panels (row block major, so that a block
  // of x stays in cache while the threads go through the weight).
  const int64_t blocks = (ops.M + kRowBlock - 1) / kRowBlock;
  gomgr_cpu::parallel_items(blocks * ops.total_panels, [&](int64_t i) {
    const int64_t r0 = i / ops.total_panels * kRowBlock, rows = std::min(kRowBlock, ops.M - r0), pi = i % ops.total_panels;
    ops.panel(pi, r0, rows, yp + r0 * ops.N + ops.column(pi), ops.N);
  });
  return out;
}

at::Tensor quantized_gate_up(const at::Tensor& x, const std::vector<at::Tensor>& panels, const std::vector<int64_t>& formats,
                             const std::vector<int64_t>& out_features, const std::optional<at::Tensor>& bias, int64_t isa) {
  TORCH_CHECK(panels.size() == 2 && out_features.size() == 2 && out_features[0] == out_features[1],
              "the fused gate/up takes two parts of equal out_features (gate, then up)");
  const Operands ops(x, panels, formats, out_features, bias, isa);
  const int64_t width = out_features[0], gate_panels = ops.parts[1].first_panel;
  at::Tensor out = at::empty({ops.M, width}, x.options());
  float* yp = out.data_ptr<float>();
  const int64_t blocks = (ops.M + kRowBlock - 1) / kRowBlock;
  gomgr_cpu::parallel_items(blocks * gate_panels, [&](int64_t i) {
    const int64_t r0 = i / gate_panels * kRowBlock, rows = std::min(kRowBlock, ops.M - r0), p = i % gate_panels;
    // NOTE: a panel pair's gate and up tiles stay in this thread's cache: the [M, 2 x width]
    // product is never written, nor read back by a separate SiLU pass.
    float gate[kRowBlock * kCols], up[kRowBlock * kCols];
    ops.panel(p, r0, rows, gate, kCols);
    ops.panel(gate_panels + p, r0, rows, up, kCols);
    const int64_t cols = std::min(kCols, width - p * kCols);
    for (int64_t m = 0; m < rows; ++m)
      gomgr_cpu::silu_mul_row(gate + m * kCols, up + m * kCols, yp + (r0 + m) * width + p * kCols, cols);
  });
  return out;
}

namespace {

std::string quantized_kernel(int64_t format, int64_t isa) {
  switch (resolve(format, isa)) {
    case Kernel::kAmxInt8:
    case Kernel::kAmxWidened: return "amx-int8 from 16 rows, amx-bf16 on widened weights from 64 (avx512-vnni int8 below)";
    case Kernel::kVnni: return "avx512-vnni int8";
    case Kernel::kAvxVnni: return "avx-vnni int8";
    case Kernel::kAvx2Int: return "avx2 int8";
    case Kernel::kBf16Amx: return "amx-bf16 (avx512-bf16 under 16 rows)";
    case Kernel::kBf16Avx512: return "avx512-bf16";
    case Kernel::kBf16Avx2: return "avx2 bf16->fp32";
    case Kernel::kF16c: return "f16c fp16->fp32";
  }
  return "";
}

float scale_at(const uint8_t* group, Format f, int64_t i) {
  if (half_scales(f)) {
    uint16_t h;
    std::memcpy(&h, group + 2 * i, 2);
    return static_cast<float>(c10::Half(h, c10::Half::from_bits()));
  }
  float v;
  std::memcpy(&v, group + 4 * i, 4);
  return v;
}

// Column j of a panel (one weight row) as float32 [K].
void dequantize_column(const uint8_t* panel, Format f, int64_t K, int64_t j, float* out) {
  if (f == kBF16 || f == kF16) {
    for (int64_t k = 0; k < K; ++k) {
      uint16_t h;
      if (f == kBF16) {
        std::memcpy(&h, panel + ((k / 2) * kCols * 2 + j * 2 + k % 2) * 2, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(out + k, &bits, 4);
      } else {
        std::memcpy(&h, panel + (k * kCols + j) * 2, 2);
        out[k] = static_cast<float>(c10::Half(h, c10::Half::from_bits()));
      }
    }
    return;
  }
  const int64_t G = group_size(f);
  for (int64_t g = 0; g < K / G; ++g) {
    const uint8_t* gp = panel + g * group_bytes(f);
    const float scale = scale_at(gp, f, j);
    const float minimum = zero_point(f) != 0 ? -static_cast<float>(zero_point(f)) * scale : scale_at(gp, f, kCols + j);
    const uint8_t* quants = gp + group_fields(f) * kCols * scale_bytes(f) + 4 * j;
    for (int64_t kk = 0; kk < G; ++kk) {
      const int64_t step = kk / 4;
      int q;
      if (quant_format(f) == kNibble32 || quant_format(f) == kFive32) {
        const uint8_t byte = quants[64 * (step % 4) + kk % 4];
        q = step < 4 ? byte & 0x0F : byte >> 4;
        if (quant_format(f) == kFive32) q |= ((quants[256 + kk % 4] >> step) & 1) << 4;
      } else {
        q = quants[64 * step + kk % 4];
      }
      // NOTE: one rounding of scale * q + min, as the gguf reference rounds d * (q - offset) once.
      out[g * G + kk] = std::fma(scale, static_cast<float>(q), minimum);
    }
  }
}

// Rows `ids` of a packed weight as float32 [T, K]: embedding lookups without a float copy.
at::Tensor dequantize_packed_rows(const at::Tensor& panels, int64_t format, int64_t K, const at::Tensor& ids) {
  TORCH_CHECK(format >= kNibble32 && format <= kLastFormat, "unknown packed weight format ", format);
  const Format f = static_cast<Format>(format);
  TORCH_CHECK(ids.scalar_type() == at::kLong && ids.dim() == 1 && ids.is_contiguous(), "ids must be a 1-D int64 tensor");
  const int64_t bytes = panel_bytes(f, K), count = panels.numel() / bytes, T = ids.size(0);
  TORCH_CHECK(panels.scalar_type() == at::kByte && panels.is_contiguous() && panels.numel() % bytes == 0,
              "the packed weight does not match its width (", K, ")");
  const int64_t* idp = ids.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t)
    TORCH_CHECK(idp[t] >= 0 && idp[t] < count * kCols, "row ", idp[t], " is outside the packed weight");
  at::Tensor out = at::empty({T, K}, panels.options().dtype(at::kFloat));
  const uint8_t* pp = panels.data_ptr<uint8_t>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const uint8_t* panel = pp + (idp[t] / kCols) * bytes;
      dequantize_column(panel, f, K, idp[t] % kCols, op + t * K);
    }
  });
  return out;
}

}  // namespace
}  // namespace gomgr_quant

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.def("quantized_linear(Tensor x, Tensor[] panels, int[] formats, int[] out_features, Tensor? bias, int isa) -> Tensor");
  m.impl("quantized_linear", &gomgr_quant::quantized_linear);
  m.def("quantized_gate_up(Tensor x, Tensor[] panels, int[] formats, int[] out_features, Tensor? bias, int isa) -> Tensor");
  m.impl("quantized_gate_up", &gomgr_quant::quantized_gate_up);
  m.def("quantized_kernel(int format, int isa) -> str");
  m.impl("quantized_kernel", &gomgr_quant::quantized_kernel);
  m.def("dequantize_packed_rows(Tensor panels, int format, int K, Tensor ids) -> Tensor");
  m.impl("dequantize_packed_rows", &gomgr_quant::dequantize_packed_rows);
}
