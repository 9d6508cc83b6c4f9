"""Attention over an FP8 (e4m3) KV pool (``--kv-cache-dtype fp8_e4m3``), with K and V scales:

- torch-native over the FP8 pool equals torch-native over a float32 pool holding the values
  the FP8 one means (``stored * scale``, read back by ``KVPool.read``), new tokens included
  (``as_stored``): within 1e-6, so the FP8 path changes only what is stored;
- the Triton kernels (in the interpreter on CPU, compiled on CUDA), which decode the bytes
  themselves, equal torch-native over the same FP8 pool within the float32 tolerances.
"""

from __future__ import annotations

import pytest
import torch

from engine.attention import create_attention_backend
from engine.memory.kv_pool import FP8_KV_DTYPE
from tests.engine.kernels.batches import AttentionCase, attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance

HEADS, KV_HEADS, HEAD_DIM = 6, 2, 32
# NOTE: a prefill over cached prefixes, and a decode step.
SHAPES = {"extend": ([0, 5, 37], [7, 1, 40]), "decode": ([0, 8, 69], [1, 1, 1])}
SCALES = (0.5, 0.125)


def _fp8_case(shape: str) -> AttentionCase:
    prefix, new = SHAPES[shape]
    return attention_case(prefix, new, HEADS, KV_HEADS, HEAD_DIM, torch.float32, DEVICE, kv_dtype=FP8_KV_DTYPE, kv_scales=SCALES)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_torch_native_reads_what_the_fp8_pool_means(shape: str) -> None:
    case = _fp8_case(shape)
    prefix, new = SHAPES[shape]
    plain = attention_case(prefix, new, HEADS, KV_HEADS, HEAD_DIM, torch.float32, DEVICE)
    fp8_pool, pool = case.batch.kv_pool, plain.batch.kv_pool
    every = torch.arange(pool.size + 1, device=DEVICE)
    backend = create_attention_backend("torch_native", HEADS, KV_HEADS, HEAD_DIM)
    backend.init_forward_metadata(case.batch)
    got = backend.forward(case.q, case.k, case.v, 0, case.batch)
    # NOTE: the same seed gives the same slots; the float pool gets what the FP8 pool holds.
    pool.k_buffer(0).copy_(fp8_pool.read(0, False, every, torch.float32))
    pool.v_buffer(0).copy_(fp8_pool.read(0, True, every, torch.float32))
    k, v = fp8_pool.as_stored(0, False, case.k), fp8_pool.as_stored(0, True, case.v)
    backend.init_forward_metadata(plain.batch)
    expected = backend.forward(case.q, k, v, 0, plain.batch)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    assert fp8_pool.k_buffer(0).dtype == FP8_KV_DTYPE and fp8_pool.nbytes * 4 == pool.nbytes


@pytest.mark.parametrize("shape", list(SHAPES))
def test_triton_kernels_read_the_fp8_pool_as_torch_native_does(shape: str) -> None:
    pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")
    case = _fp8_case(shape)
    reference = create_attention_backend("torch_native", HEADS, KV_HEADS, HEAD_DIM)
    reference.init_forward_metadata(case.batch)
    expected = reference.forward(case.q, case.k, case.v, 0, case.batch)
    triton_backend = create_attention_backend("triton", HEADS, KV_HEADS, HEAD_DIM)
    triton_backend.init_forward_metadata(case.batch)
    got = triton_backend.forward(case.q, case.k, case.v, 0, case.batch)
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))
