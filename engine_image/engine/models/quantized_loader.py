"""Fills a Llama-family model from a quantized checkpoint (AWQ, GPTQ, FP8): its quantized
projections become the format's layer (``Int4Linear``, ``Fp8Linear``) over the checkpoint's
tensors (q/k/v and gate/up fused as parts); everything else (embedding, norms, head, a
projection the quantizer left in float) loads as from any safetensors checkpoint.

A module is quantized where the checkpoint holds the format's marker tensor for it (``qweight``;
FP8's weight scale), so what a format's ignore list leaves in float needs no reading. An FP8
checkpoint's KV cache scales (``k_scale``/``v_scale`` under a layer's ``self_attn``, or its
``k_proj``/``v_proj`` as older vLLM checkpoints put them) are returned for an FP8 KV pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from engine.config.fp8_quantization import Fp8Config
from engine.config.quantization import Int4Config
from engine.core.errors import UnsupportedModelError
from engine.layers.fp8_linear import Fp8Linear
from engine.layers.fp8_weight import Fp8Weight
from engine.layers.int4_linear import Int4Linear
from engine.layers.int4_weight import Int4Weight
from engine.models.llama import DecoderLayer, LlamaFamilyForCausalLM

# NOTE: (module of a decoder layer, our fused projection, the checkpoint's parts).
KV_SCALE_LEAVES = ("k_scale", "v_scale")
_PROJECTIONS = (
    ("self_attn", "qkv_proj", ("q_proj", "k_proj", "v_proj")),
    ("self_attn", "o_proj", ("o_proj",)),
    ("mlp", "gate_up_proj", ("gate_proj", "up_proj")),
    ("mlp", "down_proj", ("down_proj",)),
)


class _Part(Protocol):
    @property
    def in_features(self) -> int: ...

    @property
    def out_features(self) -> int: ...


@dataclass(frozen=True)
class _Format:
    """How one quantized format's projections are recognised, read and multiplied."""

    method: str
    marker: str  # the leaf whose presence makes a module quantized
    leaves: frozenset[str]
    read: Callable[[dict[str, torch.Tensor]], _Part]  # raises ValueError
    linear: Callable[[Sequence[_Part], torch.Tensor | None, torch.device, torch.dtype], nn.Module]


def _int4_format(quant: Int4Config) -> _Format:
    def linear(parts: Sequence[_Part], bias: torch.Tensor | None, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return Int4Linear([p for p in parts if isinstance(p, Int4Weight)], bias, device=device, dtype=dtype)

    return _Format(
        quant.method, "qweight", frozenset({"qweight", "qzeros", "scales", "g_idx"}),
        lambda tensors: Int4Weight.from_checkpoint(quant.method, tensors, quant.group_size), linear,
    )


def _fp8_format(quant: Fp8Config) -> _Format:
    def linear(parts: Sequence[_Part], bias: torch.Tensor | None, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return Fp8Linear([p for p in parts if isinstance(p, Fp8Weight)], bias, device=device, dtype=dtype)

    return _Format(
        quant.method, quant.scale_leaf, frozenset({"weight", quant.scale_leaf}),
        lambda tensors: Fp8Weight.from_checkpoint(quant, tensors), linear,
    )


def load_quantized_weights(
    model: LlamaFamilyForCausalLM,
    weights: Iterable[tuple[str, torch.Tensor]],
    quant: Int4Config | Fp8Config,
    device: torch.device,
    dtype: torch.dtype,
) -> list[tuple[float, float]]:
    """Loads ``weights`` (Hugging Face names) into ``model``, its quantized projections as the
    format's layers; raises UnsupportedModelError for what has no place. Returns each layer's
    KV cache scales (k, v): the checkpoint's, 1.0 where it has none."""
    fmt = _int4_format(quant) if isinstance(quant, Int4Config) else _fp8_format(quant)
    if model.config.moe is not None:
        raise UnsupportedModelError(f"{fmt.method} checkpoints of MoE models ({model.config.architecture}) are not supported")
    tensors = list(weights)
    marked = {name.rpartition(".")[0] for name, _ in tensors if name.rpartition(".")[2] == fmt.marker}
    quantized: dict[str, dict[str, torch.Tensor]] = {}
    biases: dict[str, torch.Tensor] = {}
    plain: list[tuple[str, torch.Tensor]] = []
    kv_scales = [[1.0, 1.0] for _ in model.layers]
    for name, tensor in tensors:
        module, _, leaf = name.rpartition(".")
        if leaf in KV_SCALE_LEAVES and name.startswith("model.layers."):
            kv_scales[int(name.split(".")[2])][KV_SCALE_LEAVES.index(leaf)] = float(tensor.float().reshape(-1)[0])
        elif module in marked and leaf in fmt.leaves:
            quantized.setdefault(module, {})[leaf] = tensor
        elif leaf == "bias":
            biases[name] = tensor
        elif leaf == "input_scale":
            raise UnsupportedModelError(f"{name}: static activation scales are not supported")
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
            setattr(owner, fused, _linear(owner, fused, names, quantized, biases, fmt, device, dtype))
    if quantized:
        extra = sorted(quantized)
        raise UnsupportedModelError(
            f"quantized tensors of {extra[0]} (and {len(extra) - 1} more) have no place in {model.config.architecture}"
        )
    model.load_weights([*plain, *biases.items()])
    return [(k, v) for k, v in kv_scales]


def _linear(
    owner: nn.Module,
    fused: str,
    names: list[str],
    quantized: dict[str, dict[str, torch.Tensor]],
    biases: dict[str, torch.Tensor],
    fmt: _Format,
    device: torch.device,
    dtype: torch.dtype,
) -> nn.Module:
    current = getattr(owner, fused)
    assert isinstance(current, nn.Linear), "quantized projections replace the model's own nn.Linear"
    try:
        parts = [fmt.read(quantized.pop(name)) for name in names]
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
    try:
        return fmt.linear(parts, bias, device, dtype)
    except ValueError as err:
        raise UnsupportedModelError(f"{names[0]}: {err}") from None
