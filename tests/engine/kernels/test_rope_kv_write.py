"""The fused RoPE + KV write kernel against what it replaces: ``RopeAngles.apply`` then
``KVPool.set_kv``, on pools in the model dtype and in FP8 (e4m3, with K and V scales); and
the Triton backend's fused path against torch-native's. (A whole model through the fused
path: test_model_runner.py's Triton backend tests.)

Tolerances: float32 within 1e-5 (the same float32 math, another op order); fp16 and bf16 within the
rotary kernel's (the reference rounds after each op, the kernel once, and the CPU
interpreter's bf16 store truncates: one to two ulps); an FP8 row within one e4m3 step of
the reference's on top (a rotation's ulp can tip a rounding), V's bytes exactly (nothing
rotates V).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.attention import create_attention_backend
from engine.config.model_config import RopeConfig
from engine.kernels.fp8_cast import E4M3, to_e4m3
from engine.kernels.triton.rope_kv_write import rope_kv_write
from engine.layers.rotary import RopeAngles, RotaryEmbedding
from engine.memory.kv_pool import FP8_KV_DTYPE, KVPool
from tests.engine.kernels.batches import attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance

TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 4e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 3.2e-2, "rtol": 1.6e-2},
}
SCALES = (0.5, 0.375)
# NOTE: a power of two: x * scale / scale is x again, so the midpoints stay exact ties.
EXACT_SCALES = (1.0, 0.5)
POOL_SLOTS = 40
# NOTE: 7 tokens at scattered positions (a prefill's or a decode batch's: the kernel cannot tell).
POSITIONS = [0, 1, 9, 63, 127, 200, 31]


@dataclass(frozen=True)
class _Step:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    angles: RopeAngles
    loc: torch.Tensor


def _step(dtype: torch.dtype, heads: tuple[int, int], head_dim: int, partial: float, rope_type: str) -> _Step:
    num_heads, num_kv_heads = heads
    rope = RopeConfig(
        theta=10000.0, rope_type=rope_type, factor=8.0, original_max_position_embeddings=64,
        partial_rotary_factor=partial,
    )
    rotary = RotaryEmbedding(rope, head_dim, 256, DEVICE)
    gen = torch.Generator().manual_seed(0)
    tokens = len(POSITIONS)
    # NOTE: q, k and v are strided views of one fused projection, as in the model.
    width = (num_heads + 2 * num_kv_heads) * head_dim
    qkv = (torch.randn(tokens, width, generator=gen) * 2).to(dtype=dtype, device=DEVICE)
    q, k, v = qkv.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    # NOTE: out_cache_loc as a strided view too, its slots neither sorted nor adjacent.
    slots = torch.randperm(POOL_SLOTS, generator=gen)[: 2 * tokens] + 1
    return _Step(
        q=q.view(tokens, num_heads, head_dim),
        k=k.view(tokens, num_kv_heads, head_dim),
        v=v.view(tokens, num_kv_heads, head_dim),
        angles=rotary.lookup(torch.tensor(POSITIONS, device=DEVICE), dtype),
        loc=slots.to(DEVICE)[::2],
    )


def _pool(kv_dtype: torch.dtype, heads: tuple[int, int], head_dim: int) -> KVPool:
    pool = KVPool(2, heads[1], head_dim, POOL_SLOTS, kv_dtype, DEVICE, [(1.0, 1.0), SCALES])
    for buffer in (pool.k_buffer(0), pool.v_buffer(0), pool.k_buffer(1), pool.v_buffer(1)):
        buffer[1:] = torch.full(buffer[1:].shape, 3.0, device=DEVICE).to(kv_dtype)
    return pool


def _fused(step: _Step, pool: KVPool, layer: int) -> torch.Tensor:
    return rope_kv_write(
        step.q, step.k, step.v, step.angles.cos, step.angles.sin_signed, step.loc,
        pool.k_buffer(layer), pool.v_buffer(layer), pool.scales[layer],
    )


def _bytes(buffer: torch.Tensor) -> torch.Tensor:
    return buffer.view(torch.uint8)


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("fp8", [False, True], ids=["model_dtype_pool", "fp8_pool"])
@pytest.mark.parametrize("heads", [(6, 2), (4, 4)], ids=["gqa3", "mha"])
@pytest.mark.parametrize(
    "head_dim, partial, rope_type", [(24, 1.0, "llama3"), (32, 0.75, "default")], ids=["full", "partial"]
)
def test_fused_write_matches_rope_then_set_kv(
    dtype: torch.dtype, fp8: bool, heads: tuple[int, int], head_dim: int, partial: float, rope_type: str
) -> None:
    step = _step(dtype, heads, head_dim, partial, rope_type)
    kv_dtype = FP8_KV_DTYPE if fp8 else dtype
    expected_pool, pool = _pool(kv_dtype, heads, head_dim), _pool(kv_dtype, heads, head_dim)
    layer = 1
    expected_q, expected_k = step.angles.apply(step.q, step.k)
    expected_pool.set_kv(layer, step.loc, expected_k, step.v)

    got_q = _fused(step, pool, layer)

    torch.testing.assert_close(got_q, expected_q, **TOLERANCE[dtype])
    every = torch.arange(POOL_SLOTS + 1, device=DEVICE)
    got_k, want_k = (p.read(layer, False, every, torch.float32) for p in (pool, expected_pool))
    if fp8:
        # NOTE: the rotation's tolerance plus one e4m3 step: at most 1/8 of the value (a
        # subnormal's: 2^-9 * scale).
        atol, rtol = TOLERANCE[dtype]["atol"] + 2**-9 * SCALES[0], TOLERANCE[dtype]["rtol"] + 0.125
        torch.testing.assert_close(got_k, want_k, atol=atol, rtol=rtol)
    else:
        torch.testing.assert_close(got_k, want_k, **TOLERANCE[dtype])
    # NOTE: every row compared, the ones no token writes (filled with 3.0) included.
    assert torch.equal(_bytes(pool.v_buffer(layer)), _bytes(expected_pool.v_buffer(layer)))


def test_fp8_encoding_is_the_hosts_bit_for_bit() -> None:
    """Every e4m3 value, the midpoints between neighbours (ties round to even) and either side
    of them, subnormals, values past the largest (saturated) and signed zeros, through V.
    (Random V under a scale that is no power of two: the bytes check of the test above.)"""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(E4M3).float()
    finite = codes[~codes.isnan()].unique()
    mids = (finite[1:] + finite[:-1]) / 2
    values = torch.cat([
        finite, mids, mids.nextafter(torch.tensor(1e9)), mids.nextafter(torch.tensor(-1e9)),
        torch.tensor([500.0, -1e6, 2.0**-12, -(2.0**-10), 2.0**-10 * 3, 0.0, -0.0, 1e-40]),
    ]) * EXACT_SCALES[1]
    head_dim, tokens = 128, -(-values.numel() // 128)
    v = torch.zeros(tokens * head_dim)
    v[: values.numel()] = values
    v = v.view(tokens, 1, head_dim).to(DEVICE)
    zeros = torch.zeros(tokens, 1, head_dim, device=DEVICE)
    pool = KVPool(2, 1, head_dim, tokens, FP8_KV_DTYPE, DEVICE, [(1.0, 1.0), EXACT_SCALES])
    loc = torch.arange(1, tokens + 1, device=DEVICE)
    ones = torch.ones(tokens, head_dim, device=DEVICE)
    rope_kv_write(zeros, zeros, v, ones, zeros.view(tokens, head_dim), loc, pool.k_buffer(1), pool.v_buffer(1), EXACT_SCALES)
    expected = to_e4m3(v, EXACT_SCALES[1]).view(torch.uint8)
    assert torch.equal(_bytes(pool.v_buffer(1))[1:], expected)


@pytest.mark.parametrize("kv_dtype", [torch.float32, FP8_KV_DTYPE], ids=["fp32_pool", "fp8_pool"])
def test_triton_backend_fused_decode_matches_torch_native(kv_dtype: torch.dtype) -> None:
    """The Triton backend's ``forward_rope`` (the fused kernel, then attention over the pool)
    against torch-native's (``RopeAngles.apply``, then ``set_kv`` and SDPA), on a decode step.
    NOTE: prefill goes through the same ``forward_rope``; the interpreter's extend kernel
    costs seconds, so the model test covers it."""
    heads, kv_heads, head_dim = 6, 2, 32
    case = attention_case(
        [0, 8, 69], [1, 1, 1], heads, kv_heads, head_dim, torch.float32, DEVICE, kv_dtype=kv_dtype, kv_scales=SCALES
    )
    rotary = RotaryEmbedding(RopeConfig(theta=10000.0), head_dim, 128, DEVICE)
    angles = rotary.lookup(case.batch.positions, torch.float32)
    reference = create_attention_backend("torch_native", heads, kv_heads, head_dim)
    reference.init_forward_metadata(case.batch)
    expected = reference.forward_rope(case.q, case.k, case.v, angles, 0, case.batch)
    fused = create_attention_backend("triton", heads, kv_heads, head_dim)
    assert fused.fuses_rope and not reference.fuses_rope
    fused.init_forward_metadata(case.batch)
    got = fused.forward_rope(case.q, case.k, case.v, angles, 0, case.batch)
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))
