"""What readiness sizes a GGUF model by, from its header's `general.*` and `<arch>.*` keys."""

from __future__ import annotations

from dataclasses import dataclass

from manager.gguf.byte_source import HeaderReadError
from manager.gguf.header import GgufHeader


@dataclass(frozen=True)
class GgufModelFacts:
    architecture: str  # general.architecture, e.g. "llama", "qwen2"
    name: str | None  # general.name
    block_count: int
    context_length: int | None  # the model's trained context (<arch>.context_length)
    kv_heads_per_layer: tuple[int, ...]
    key_length: int
    value_length: int

    def kv_cache_bytes(self, context_tokens: int, dtype_bytes: int) -> int:
        """Keys and values of every layer for `context_tokens` tokens: the GGUF form of
        `2 * layers * kv_heads * head_dim * dtype_bytes * tokens`, per layer, K and V apart."""
        per_token = sum(
            heads * (self.key_length + self.value_length) for heads in self.kv_heads_per_layer
        )
        return per_token * dtype_bytes * context_tokens


def model_facts(header: GgufHeader, name: str) -> GgufModelFacts:
    """The facts of a GGUF whose header is `header` (`name` names it in error lines)."""
    arch = header.get("general.architecture")
    if not isinstance(arch, str):
        raise HeaderReadError(f"{name} has no general.architecture in its GGUF header")
    layers = _int(header, f"{arch}.block_count", name)
    heads = _per_layer(header, f"{arch}.attention.head_count", layers, name)
    kv_key = f"{arch}.attention.head_count_kv"
    kv_heads = _per_layer(header, kv_key, layers, name) if header.get(kv_key) is not None else heads
    # NOTE: without key/value lengths a head is embedding_length / head_count wide (Llama's rule).
    default_head_dim = _int(header, f"{arch}.embedding_length", name) // max(max(heads), 1)
    context = header.get(f"{arch}.context_length")
    general_name = header.get("general.name")
    return GgufModelFacts(
        architecture=arch,
        name=general_name if isinstance(general_name, str) else None,
        block_count=layers,
        context_length=context
        if isinstance(context, int) and not isinstance(context, bool)
        else None,
        kv_heads_per_layer=kv_heads,
        key_length=_optional_int(header, f"{arch}.attention.key_length", name) or default_head_dim,
        value_length=_optional_int(header, f"{arch}.attention.value_length", name)
        or default_head_dim,
    )


def _int(header: GgufHeader, key: str, name: str) -> int:
    value = _optional_int(header, key, name)
    if value is None:
        raise HeaderReadError(f"{name} has no {key} in its GGUF header")
    return value


def _optional_int(header: GgufHeader, key: str, name: str) -> int | None:
    value = header.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HeaderReadError(f"{name}: {key} in its GGUF header is not an integer")
    return value


def _per_layer(header: GgufHeader, key: str, layers: int, name: str) -> tuple[int, ...]:
    """A head count as one number per layer: GGUF gives one for all layers, or an array."""
    value = header.get(key)
    if isinstance(value, tuple):
        counts = tuple(int(v) for v in value)
        if len(counts) != layers:
            raise HeaderReadError(f"{name}: {key} has {len(counts)} entries for {layers} layers")
        return counts
    return (_int(header, key, name),) * layers
