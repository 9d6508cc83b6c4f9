"""The decode roofline: tokens/s if a decode step moved only the bytes it must read, at the
device's measured copy bandwidth.

A decode step of B requests reads every layer's weights once, the final norm, the head
(vocab x hidden) once, B rows of an untied input embedding (a tied one is the head, read
whole once), and each request's KV cache up to its length. Nothing else is compulsory:
activations are a few KB per request and stay in cache.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from bench.gpu_models import sync

_EMBEDDING = "embed_tokens.weight"
_HEAD = "lm_head.weight"


def copy_bandwidth(device: torch.device, size_bytes: int) -> float:
    """Copy bandwidth on ``device`` in bytes/s (each byte read once and written once)."""
    src = torch.empty(size_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    sync(device)
    start = time.perf_counter()
    repeats = 10
    for _ in range(repeats):
        dst.copy_(src)
    sync(device)
    return 2 * size_bytes * repeats / (time.perf_counter() - start)


def weight_bytes_read(params: Iterable[tuple[str, torch.Tensor]], batch_size: int) -> int:
    """Bytes of weights one decode step of ``batch_size`` requests reads.

    ``params``: the model's parameters, each once (``named_parameters()`` drops a tied head's
    duplicate). The embedding counts whole when no separate head exists (tied: the head reads
    it all), else as ``batch_size`` rows (each request looks up one token).
    """
    named = list(params)
    untied = any(name.endswith(_HEAD) for name, _ in named)
    total = 0
    for name, p in named:
        nbytes = p.numel() * p.element_size()
        if untied and name.endswith(_EMBEDDING):
            nbytes = min(batch_size, p.shape[0]) * nbytes // p.shape[0]
        total += nbytes
    return total


@dataclass(frozen=True)
class DecodeStep:
    """The compulsory bytes of one decode step, and the roofline they give."""

    batch_size: int
    weight_bytes: int
    kv_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes

    def roofline_tok_s(self, bandwidth: float) -> float:
        """Tokens/s at ``bandwidth`` bytes/s: B tokens per step of total_bytes / bandwidth s."""
        return self.batch_size * bandwidth / self.total_bytes


def decode_step(
    params: Iterable[tuple[str, torch.Tensor]], batch_size: int, mean_kv_len: float, kv_bytes_per_token: int
) -> DecodeStep:
    """A step of ``batch_size`` requests whose KV caches hold ``mean_kv_len`` tokens on average."""
    return DecodeStep(
        batch_size=batch_size,
        weight_bytes=weight_bytes_read(params, batch_size),
        kv_bytes=round(batch_size * mean_kv_len * kv_bytes_per_token),
    )
