"""Fills a Llama-family model from an AWQ or GPTQ checkpoint: its projections become
``Int4Linear`` layers over the checkpoint's int4 tensors (q/k/v and gate/up fused as parts),
everything else (embedding, norms, head, a projection the quantizer left in float) loads as
from any safetensors checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from engine.config.quantization import Int4Config
from engine.core.errors import UnsupportedModelError
from engine.layers.int4_linear import Int4Linear
from engine.layers.int4_weight import Int4Weight
from engine.models.llama import DecoderLayer, LlamaFamilyForCausalLM

INT4_LEAVES = frozenset({"qweight", "qzeros", "scales", "g_idx"})
# NOTE: (module of a decoder layer, our fused projection, the checkpoint's parts).
_PROJECTIONS = (
    ("self_attn", "qkv_proj", ("q_proj", "k_proj", "v_proj")),
    ("self_attn", "o_proj", ("o_proj",)),
    ("mlp", "gate_up_proj", ("gate_proj", "up_proj")),
    ("mlp", "down_proj", ("down_proj",)),
)


def load_int4_weights(
    model: LlamaFamilyForCausalLM,
    weights: Iterable[tuple[str, torch.Tensor]],
    quant: Int4Config,
    device: torch.device,
    dtype: torch.dtype,
) -> None:
    """Loads ``weights`` (Hugging Face names) into ``model``, its quantized projections as
    ``Int4Linear``; raises UnsupportedModelError for what has no place."""
    if model.config.moe is not None:
        raise UnsupportedModelError(f"{quant.method} checkpoints of MoE models ({model.config.architecture}) are not supported")
    quantized: dict[str, dict[str, torch.Tensor]] = {}
    biases: dict[str, torch.Tensor] = {}
    plain: list[tuple[str, torch.Tensor]] = []
    for name, tensor in weights:
        module, _, leaf = name.rpartition(".")
        if leaf in INT4_LEAVES:
            quantized.setdefault(module, {})[leaf] = tensor
        elif leaf == "bias":
            biases[name] = tensor
        else:
            plain.append((name, tensor))
    for index, layer in enumerate(model.layers):
        assert isinstance(layer, DecoderLayer), "a Llama-family model is a stack of DecoderLayers"
        for owner_name, fused, parts in _PROJECTIONS:
            owner = getattr(layer, owner_name)
            assert isinstance(owner, nn.Module)
            prefix = f"model.layers.{index}.{owner_name}"
            names = [f"{prefix}.{part}" for part in parts]
            present = [name in quantized for name in names]
            if not any(present):
                continue
            if not all(present):
                raise UnsupportedModelError(f"{prefix}: {', '.join(parts)} are quantized only in part")
            setattr(owner, fused, _linear(owner, fused, names, quantized, biases, quant, device, dtype))
    if quantized:
        extra = sorted(quantized)
        raise UnsupportedModelError(
            f"quantized tensors of {extra[0]} (and {len(extra) - 1} more) have no place in {model.config.architecture}"
        )
    model.load_weights([*plain, *biases.items()])


def _linear(
    owner: nn.Module,
    fused: str,
    names: list[str],
    quantized: dict[str, dict[str, torch.Tensor]],
    biases: dict[str, torch.Tensor],
    quant: Int4Config,
    device: torch.device,
    dtype: torch.dtype,
) -> Int4Linear:
    current = getattr(owner, fused)
    assert isinstance(current, nn.Linear), "int4 projections replace the model's own nn.Linear"
    try:
        parts = [Int4Weight.from_checkpoint(quant.method, quantized.pop(name), quant.group_size) for name in names]
    except ValueError as err:
        raise UnsupportedModelError(f"{names[0]}: {err}") from None
    shape = (sum(p.out_features for p in parts), parts[0].in_features)
    if shape != (current.out_features, current.in_features):
        raise UnsupportedModelError(
            f"{', '.join(names)} hold a [{shape[0]}, {shape[1]}] weight, expected "
            f"[{current.out_features}, {current.in_features}]"
        )
    bias_names = [f"{name}.bias" for name in names]
    given = [biases.pop(name) for name in bias_names if name in biases]
    if current.bias is None and given and all(not bool(b.any()) for b in given):
        # NOTE: AutoGPTQ wrote a zero bias for every projection, biased in the model or not.
        given = []
    if len(given) != (len(names) if current.bias is not None else 0):
        expected = "biases" if current.bias is not None else "no biases"
        raise UnsupportedModelError(f"the model expects {expected} on {', '.join(names)}")
    bias = torch.cat(given) if given else None
    return Int4Linear(parts, bias, device=device, dtype=dtype)
