// The decode step of a Llama-family decoder stack over packed quantized weights, every layer
// in one call: the same kernels, on the same inputs, in the same order as the Python layers
// (models/llama.py), so the result is bit-identical; only the ~15 Python-level calls per
// layer are gone, which at one request cost as much as the multiplications themselves.
//
// A QuantizedDecodeStack is built once per model: add_linear for a layer's four projections
// (fused q/k/v, o, fused gate/up, down), then add_layer for its norms. decode runs a batch of
// one new token per request, its KV rows stored into and read from the pool in place.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "cpu_ops.h"
#include "quantized.h"

namespace gomgr_cpu {
namespace {

struct PackedProjection {
  std::vector<at::Tensor> panels;
  std::vector<int64_t> formats, out_features;
  std::optional<at::Tensor> bias;
  int64_t isa;

  at::Tensor operator()(const at::Tensor& x) const {
    return gomgr_quant::quantized_linear(x, panels, formats, out_features, bias, isa);
  }

  // silu(gate) * up of a gate/up projection, fused where its two parts have one width (as
  // the Python MLP does: the same bits).
  at::Tensor gated(const at::Tensor& x) const {
    if (out_features.size() == 2 && out_features[0] == out_features[1])
      return gomgr_quant::quantized_gate_up(x, panels, formats, out_features, bias, isa);
    const at::Tensor gate_up = (*this)(x);
    const at::Tensor activated = at::empty({x.size(0), gate_up.size(1) / 2}, gate_up.options());
    silu_and_mul(gate_up, activated);
    return activated;
  }
};

struct Layer {
  PackedProjection qkv, o, gate_up, down;
  at::Tensor input_norm, post_attention_norm;
};

class QuantizedDecodeStack : public torch::CustomClassHolder {
 public:
  QuantizedDecodeStack(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, double rms_norm_eps, double scale)
      : heads_(num_heads), kv_heads_(num_kv_heads), head_dim_(head_dim), eps_(rms_norm_eps), scale_(scale) {}

  void add_linear(std::vector<at::Tensor> panels, std::vector<int64_t> formats, std::vector<int64_t> out_features,
                  std::optional<at::Tensor> bias, int64_t isa) {
    TORCH_CHECK(pending_.size() < 4, "a layer has four projections: add_layer before the next one");
    pending_.push_back({std::move(panels), std::move(formats), std::move(out_features), std::move(bias), isa});
  }

  // The layer of the four projections added last (q/k/v, o, gate/up, down) and its two norms.
  void add_layer(at::Tensor input_norm, at::Tensor post_attention_norm) {
    TORCH_CHECK(pending_.size() == 4, "add_layer needs its four projections first, got ", pending_.size());
    layers_.push_back({pending_[0], pending_[1], pending_[2], pending_[3], std::move(input_norm),
                       std::move(post_attention_norm)});
    pending_.clear();
  }

  // hidden: the embeddings [B, hidden]; cos, sin_signed: RopeAngles' [B, 1, D]; loc: each new
  // token's KV slot; k_buffers, v_buffers: the pool's, one per layer. Returns (the last layer's
  // MLP output, the residual stream before it), as the Python layers do.
  std::tuple<at::Tensor, at::Tensor> decode(const at::Tensor& embeddings, const at::Tensor& cos,
                                            const at::Tensor& sin_signed, const at::Tensor& loc,
                                            const std::vector<at::Tensor>& k_buffers,
                                            const std::vector<at::Tensor>& v_buffers, const at::Tensor& req_to_token,
                                            const at::Tensor& req_pool_indices, const at::Tensor& seq_lens) const {
    const int64_t layers = static_cast<int64_t>(layers_.size());
    TORCH_CHECK(layers > 0 && pending_.empty(), "the stack has no complete layers");
    TORCH_CHECK(static_cast<int64_t>(k_buffers.size()) == layers && static_cast<int64_t>(v_buffers.size()) == layers,
                "one k and one v buffer per layer");
    TORCH_CHECK(embeddings.dim() == 2 && embeddings.is_contiguous(), "hidden must be a contiguous [tokens, hidden] matrix");
    const int64_t tokens = embeddings.size(0), q_size = heads_ * head_dim_, kv_size = kv_heads_ * head_dim_;
    at::Tensor hidden = embeddings, residual;
    for (int64_t l = 0; l < layers; ++l) {
      const Layer& layer = layers_[l];
      at::Tensor normed = at::empty_like(hidden);
      if (l == 0) {
        residual = hidden;
        rms_norm(hidden, normed, layer.input_norm, eps_);
      } else {
        at::Tensor sum = at::empty_like(hidden);
        add_rms_norm(hidden, residual, normed, sum, layer.input_norm, eps_);
        residual = sum;
      }
      const at::Tensor qkv = layer.qkv(normed);
      // NOTE: q's and k's heads lie side by side in qkv: one rotation covers both.
      const at::Tensor heads = qkv.narrow(1, 0, q_size + kv_size).view({tokens, heads_ + kv_heads_, head_dim_});
      const at::Tensor rotated = at::empty(heads.sizes(), heads.options());
      rotary_heads(heads, cos, sin_signed, rotated);
      const at::Tensor v = qkv.narrow(1, q_size + kv_size, kv_size).view({tokens, kv_heads_, head_dim_});
      store_kv(rotated.narrow(1, heads_, kv_heads_), v, k_buffers[l], v_buffers[l], loc);
      const at::Tensor queries = rotated.narrow(1, 0, heads_).reshape({tokens, q_size}).contiguous();
      const at::Tensor attended = at::empty_like(queries);
      decode_attention(queries, attended, k_buffers[l], v_buffers[l], req_to_token, req_pool_indices, seq_lens, scale_, 0, 0.0);
      const at::Tensor attention_out = layer.o(attended);
      at::Tensor mlp_in = at::empty_like(attention_out), sum = at::empty_like(attention_out);
      add_rms_norm(attention_out, residual, mlp_in, sum, layer.post_attention_norm, eps_);
      residual = sum;
      hidden = layer.down(layer.gate_up.gated(mlp_in));
    }
    return {hidden, residual};
  }

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double eps_, scale_;
  std::vector<Layer> layers_;
  std::vector<PackedProjection> pending_;
};

}  // namespace
}  // namespace gomgr_cpu

TORCH_LIBRARY_FRAGMENT(gomgr_cpu, m) {
  m.class_<gomgr_cpu::QuantizedDecodeStack>("QuantizedDecodeStack")
      .def(torch::init<int64_t, int64_t, int64_t, double, double>())
      .def("add_linear", &gomgr_cpu::QuantizedDecodeStack::add_linear)
      .def("add_layer", &gomgr_cpu::QuantizedDecodeStack::add_layer)
      .def("decode", &gomgr_cpu::QuantizedDecodeStack::decode);
}
