"""The "triton" attention backend against the torch-native reference, through ForwardBatch."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.attention import create_attention_backend
from tests.engine.kernels.batches import attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance

# NOTE: bf16 math is wrong in Triton's CPU interpreter (ENVIRONMENT.md): bf16 attention is
# checked on GPUs only; the CPU covers bf16 in the load/store-only kernel tests.
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE.type == "cuda" else [])
DTYPE_IDS = [str(d).removeprefix("torch.") for d in DTYPES]
# (query heads, KV heads): plain multi-head, and GQA with a non-power-of-two group.
HEADS = [(2, 2), (6, 2)]


def _both(case_args: dict, dtype: torch.dtype, heads: tuple[int, int], head_dim: int) -> None:
    num_heads, num_kv_heads = heads
    case = attention_case(
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, dtype=dtype, device=DEVICE,
        **case_args,
    )
    reference = create_attention_backend("torch_native", num_heads, num_kv_heads, head_dim)
    triton_backend = create_attention_backend("triton", num_heads, num_kv_heads, head_dim)
    reference.init_forward_metadata(case.batch)
    expected = reference.forward(case.q, case.k, case.v, 0, case.batch)
    triton_backend.init_forward_metadata(case.batch)
    got = triton_backend.forward(case.q, case.k, case.v, 0, case.batch)
    assert got.shape == expected.shape == (case.q.shape[0], num_heads * head_dim)
    torch.testing.assert_close(got.float(), expected.float(), **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa3"])
def test_extend_over_cached_prefixes_matches_torch_native(dtype: torch.dtype, heads: tuple[int, int]) -> None:
    # NOTE: ragged: no prefix, a one-token extend, and a 40-token extend over a 37-token
    # prefix (more than one 32-row query block and several 32-key blocks).
    _both({"prefix_lens": [0, 5, 37], "new_lens": [7, 1, 40]}, dtype, heads, head_dim=32)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa3"])
def test_decode_matches_torch_native(dtype: torch.dtype, heads: tuple[int, int]) -> None:
    # NOTE: sequence lengths 1 (fewer keys than splits), 9 and 70 (several key blocks per split).
    _both({"prefix_lens": [0, 8, 69], "new_lens": [1, 1, 1]}, dtype, heads, head_dim=32)


def test_head_dim_that_is_not_a_power_of_two() -> None:
    _both({"prefix_lens": [3, 0], "new_lens": [4, 5]}, torch.float32, (4, 2), head_dim=24)
    _both({"prefix_lens": [3, 11], "new_lens": [1, 1]}, torch.float32, (4, 2), head_dim=24)


def test_extend_then_decode_sees_the_tokens_the_extend_stored() -> None:
    """Extend writes K/V through the backend; a decode step on top reads them back."""
    num_heads, num_kv_heads, head_dim = 4, 2, 32
    extend = attention_case([2, 0], [6, 3], num_heads, num_kv_heads, head_dim, torch.float32, DEVICE)
    backend = create_attention_backend("triton", num_heads, num_kv_heads, head_dim)
    backend.init_forward_metadata(extend.batch)
    backend.forward(extend.q, extend.k, extend.v, 0, extend.batch)

    batch = extend.batch
    seq_lens = [n + 1 for n in batch.seq_lens_cpu]
    table = batch.req_to_token
    free = sorted(set(range(1, batch.kv_pool.size + 1)) - set(table[batch.req_pool_indices].flatten().tolist()))
    new_slots = torch.tensor(free[:2], dtype=torch.int64, device=DEVICE)
    for row, seq_len, slot in zip(batch.req_pool_indices.tolist(), seq_lens, new_slots):
        table[row, seq_len - 1] = slot
    decode = type(batch)(
        mode=type(batch.mode).DECODE,
        input_ids=torch.zeros(2, dtype=torch.int64, device=DEVICE),
        positions=torch.tensor([s - 1 for s in seq_lens], device=DEVICE),
        out_cache_loc=new_slots,
        req_pool_indices=batch.req_pool_indices,
        seq_lens=torch.tensor(seq_lens, device=DEVICE),
        seq_lens_cpu=seq_lens,
        extend_prefix_lens_cpu=[s - 1 for s in seq_lens],
        extend_seq_lens_cpu=[1, 1],
        req_to_token=table,
        kv_pool=batch.kv_pool,
    )
    q = torch.randn(2, num_heads, head_dim, device=DEVICE)
    k = torch.randn(2, num_kv_heads, head_dim, device=DEVICE)
    v = torch.randn(2, num_kv_heads, head_dim, device=DEVICE)
    reference = create_attention_backend("torch_native", num_heads, num_kv_heads, head_dim)
    reference.init_forward_metadata(decode)
    expected = reference.forward(q, k, v, 0, decode)
    backend.init_forward_metadata(decode)
    torch.testing.assert_close(backend.forward(q, k, v, 0, decode), expected, **tolerance(torch.float32))
