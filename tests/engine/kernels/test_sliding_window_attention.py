"""Sliding-window masks and logit caps in every attention backend that runs here (the C++ CPU
kernel, torch-native, and the Triton kernels in the interpreter), against attention written
out in float64 from each request's positions; and the window must change the result. On a
CUDA machine (bench/gpu_check.sh) the Triton kernels run compiled there."""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionBackend, LayerAttention, create_attention_backend
from engine.attention.cpu_backend import CpuAttention
from tests.engine.kernels.batches import AttentionCase, attention_case
from tests.engine.kernels.conftest import DEVICE

BACKENDS = ["cpu", "torch_native", "triton"]
HEADS, KV_HEADS, HEAD_DIM = 6, 2, 32
# NOTE: a fresh prompt longer than the window, a one-token extend over a prefix, and a
# 40-token extend over a 37-token prefix (more than one 32-row query block and key block).
EXTEND = {"prefix_lens": [0, 9, 37], "new_lens": [23, 1, 40]}
# NOTE: sequence lengths 1 (inside any window), 9 and 70 (past it).
DECODE = {"prefix_lens": [0, 8, 69], "new_lens": [1, 1, 1]}
LAYERS = {
    "window": LayerAttention(sliding_window=7),
    "window-1": LayerAttention(sliding_window=1),
    "window-cap-scale": LayerAttention(sliding_window=16, logit_cap=3.0, scale=0.3),
    "cap": LayerAttention(logit_cap=2.0),
}


def _reference(case: AttentionCase, layer: LayerAttention) -> torch.Tensor:
    """Each new token's attention over its request's pool rows, from positions alone, float64."""
    batch, pool = case.batch, case.batch.kv_pool
    group = HEADS // KV_HEADS
    scale = layer.scale if layer.scale is not None else HEAD_DIM**-0.5
    outs = []
    offset = 0
    for row, prefix, new in zip(batch.req_pool_indices.tolist(), batch.extend_prefix_lens_cpu, batch.extend_seq_lens_cpu):
        slots = batch.req_to_token[row, : prefix + new]
        keys = pool.k_buffer(0)[slots].cpu().double().repeat_interleave(group, dim=1)  # [L, heads, D]
        values = pool.v_buffer(0)[slots].cpu().double().repeat_interleave(group, dim=1)
        q = case.q[offset : offset + new].cpu().double()  # [new, heads, D]
        scores = torch.einsum("qhd,khd->hqk", q, keys) * scale
        if layer.logit_cap is not None:
            scores = torch.tanh(scores / layer.logit_cap) * layer.logit_cap
        query_pos = torch.arange(prefix, prefix + new)[:, None]
        key_pos = torch.arange(prefix + new)[None, :]
        visible = key_pos <= query_pos
        if layer.sliding_window is not None:
            visible &= key_pos > query_pos - layer.sliding_window
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        outs.append(torch.einsum("hqk,khd->qhd", probs, values).reshape(new, -1))
        offset += new
    return torch.cat(outs)


def _run(name: str, case_args: dict[str, list[int]], layer: LayerAttention) -> tuple[torch.Tensor, AttentionCase]:
    if name == "triton":
        pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")
    device = DEVICE if name == "triton" else torch.device("cpu")
    case = attention_case(num_heads=HEADS, num_kv_heads=KV_HEADS, head_dim=HEAD_DIM, dtype=torch.float32,
                          device=device, **case_args)
    backend: AttentionBackend = create_attention_backend(name, HEADS, KV_HEADS, HEAD_DIM)
    backend.init_forward_metadata(case.batch)
    if isinstance(backend, CpuAttention):
        assert backend.decodes_with_kernel(case.batch), "the C++ kernel must be what runs"
    return backend.forward(case.q, case.k, case.v, 0, case.batch, layer), case


@pytest.mark.parametrize("layer", list(LAYERS.values()), ids=list(LAYERS))
@pytest.mark.parametrize("shape", [EXTEND, DECODE], ids=["extend", "decode"])
@pytest.mark.parametrize("name", BACKENDS)
def test_backend_matches_the_written_out_reference(name: str, shape: dict[str, list[int]], layer: LayerAttention) -> None:
    got, case = _run(name, shape, layer)
    torch.testing.assert_close(got.cpu().double(), _reference(case, layer), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("shape", [EXTEND, DECODE], ids=["extend", "decode"])
def test_the_window_changes_the_result(shape: dict[str, list[int]]) -> None:
    """Guards the test itself: these batches reach past the window, so a backend that ignored
    it would fail the comparison above."""
    windowed, case = _run("torch_native", shape, LAYERS["window"])
    full = _reference(case, LayerAttention())
    assert not torch.allclose(windowed.double(), full, atol=1e-3)
