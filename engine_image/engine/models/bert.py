"""BERT-style encoder (``BertModel``): bidirectional attention over a padded batch, no KV cache."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.core.errors import UnsupportedModelError

_ROBERTA_TYPES = ("roberta", "xlm-roberta")


@dataclass(frozen=True)
class BertConfig:
    model_path: str
    architecture: str
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    raw: dict[str, Any]
    # NOTE: the RoBERTa family (XLM-R) counts positions from padding_idx + 1, not from 0.
    position_offset: int = 0

    @classmethod
    def from_dir(cls, model_path: str | Path) -> BertConfig:
        raw = json.loads((Path(model_path) / "config.json").read_text())
        if raw.get("hidden_act", "gelu") != "gelu":
            raise UnsupportedModelError(f"hidden_act {raw['hidden_act']!r} is not supported (only gelu)")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise UnsupportedModelError("only absolute position embeddings are supported")
        return cls(
            model_path=str(model_path),
            architecture=(raw.get("architectures") or ["BertModel"])[0],
            model_type=str(raw.get("model_type", "bert")),
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=int(raw["num_attention_heads"]),
            max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            raw=raw,
            position_offset=int(raw.get("pad_token_id", 1)) + 1 if raw.get("model_type") in _ROBERTA_TYPES else 0,
        )


class _Embeddings(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.position_offset = config.position_offset
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        offset = self.position_offset
        positions = torch.arange(offset, offset + input_ids.shape[1], device=input_ids.device)
        # NOTE: without token types, one segment per input: type 0 everywhere, as sentence-transformers sends.
        types = (
            self.token_type_embeddings.weight[0]
            if token_type_ids is None
            else self.token_type_embeddings(token_type_ids)
        )
        summed = self.word_embeddings(input_ids) + self.position_embeddings(positions)[None] + types
        normed: torch.Tensor = self.LayerNorm(summed)
        return normed


class _SelfAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        batch, length, width = hidden.shape

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, length, self.num_heads, -1).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            heads(self.query(hidden)), heads(self.key(hidden)), heads(self.value(hidden)), attn_mask=key_mask
        )
        return out.transpose(1, 2).reshape(batch, length, width)


class _DenseNorm(nn.Module):
    """``LayerNorm(dense(x) + residual)``: the output block after attention and after the MLP."""

    def __init__(self, d_in: int, d_out: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, d_out)
        self.LayerNorm = nn.LayerNorm(d_out, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        normed: torch.Tensor = self.LayerNorm(self.dense(x) + residual)
        return normed


class _Attention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = _SelfAttention(config)  # NOTE: the checkpoint names it "self"
        self.output = _DenseNorm(config.hidden_size, config.hidden_size, config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.output(self.self(hidden, key_mask), hidden)
        return out


class _Intermediate(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = _Attention(config)
        self.intermediate = _Intermediate(config)
        self.output = _DenseNorm(config.intermediate_size, config.hidden_size, config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        attended = self.attention(hidden, key_mask)
        out: torch.Tensor = self.output(self.intermediate(attended), attended)
        return out


class _Encoder(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(config) for _ in range(config.num_layers))


class BertModel(nn.Module):
    """Parameter names follow the Hugging Face checkpoint, so weights load by name."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = _Encoder(config)

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input_ids, attention_mask, token_type_ids: [B, L] (mask 1 on real tokens) -> last hidden states [B, L, H]."""
        key_mask = attention_mask.bool()[:, None, None, :]
        hidden: torch.Tensor = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder.layer:
            hidden = layer(hidden, key_mask)
        return hidden

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        missing = set(params)
        for checkpoint_name, tensor in weights:
            name = checkpoint_name.removeprefix("bert.")
            # NOTE: the pooler (tanh over [CLS]) is the NSP head's input, unused by embeddings.
            if name.startswith("pooler.") or name == "embeddings.position_ids":
                continue
            if name not in params:
                raise ValueError(f"checkpoint tensor {checkpoint_name!r} has no place in {self.config.architecture}")
            if params[name].shape != tensor.shape:
                raise ValueError(
                    f"checkpoint tensor {checkpoint_name!r} has shape {tuple(tensor.shape)}, "
                    f"expected {tuple(params[name].shape)}"
                )
            with torch.no_grad():
                params[name].copy_(tensor)
            missing.discard(name)
        if missing:
            raise ValueError(f"checkpoint is missing {len(missing)} tensors, e.g. {min(missing)}")
