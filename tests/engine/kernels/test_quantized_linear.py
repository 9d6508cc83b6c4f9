"""The quantized CPU linear kernels (GGUF block types, bf16, fp16) on every path this CPU can
run, against float64 products of the ``gguf`` package's dequantized weights.

Two references, two tolerances:
(a) the weights times the activations as the kernel rounds them (int8 per block of 32, or
    bf16 for vdpbf16ps): what is left is float32 accumulation, bounded by 1e-5 of the sum of
    the products' magnitudes (K/32 <= 48 float32 adds of error 6e-8 each: 3e-6 at worst);
(b) the weights times the float activations: the activation rounding's own worst case on top,
    half a step (max|x_block| / 254 for int8, 2^-8 |x| for bf16) times |w|, summed over k.
The AMX path widens int weights to bf16 from AMX_WIDEN_ROWS rows: there (a) is bf16 x times bf16
w, and (b) adds the weights' rounding (2^-8 |w|) times |x| as well.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.block_unpack import unpack_blocks
from engine.kernels.cpu.quantized import Isa, PackedFormat, pack_blocks, quantize_activations
from engine.layers import quantized_linear
from engine.layers.block_tensor import BlockTensor
from engine.layers.quantized_linear import TORCH_PATH, QuantizedEmbedding, QuantizedLinear
from tests.engine.kernels.cpu_features import CPU_FLAGS, require_cpu
from tests.support.random_blocks import HALF_TYPES, random_block_tensor

T = GGMLQuantizationType
INT_TYPES = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K)
ISAS = pytest.mark.parametrize(
    "isa", [Isa.AVX2, Isa.AVX512, Isa.AMX, Isa.AVX_VNNI], ids=["avx2", "avx512", "amx", "avx_vnni"]
)
# NOTE: the start of each path's kernel_path (F16 weights have one path, F16C; AVX-VNNI is for
# the int formats, BF16 then takes the AVX2 kernel).
_PATH_PREFIX = {Isa.AVX2: "avx2", Isa.AVX512: "avx512", Isa.AMX: "amx", Isa.AVX_VNNI: "avx-vnni"}
AMX_WIDEN_ROWS = 64  # quantized_linear.cpp's kWidenRows

@pytest.fixture(scope="module")
def kernels():
    loaded = load_cpu_kernels()
    assert loaded is not None, "the CPU kernels did not build; see the warning logged"
    return loaded


def _require_isa(qtype: GGMLQuantizationType, isa: Isa) -> None:
    if isa == Isa.AVX_VNNI:
        require_cpu("avx_vnni", "avx2", "fma", "f16c")
    elif isa == Isa.AMX and qtype != T.F16:
        require_cpu("amx_tile", "amx_int8", "amx_bf16", "avx512_vnni", "avx512_bf16")
    elif isa == Isa.AVX512 and qtype == T.BF16:
        require_cpu("avx512f", "avx512_bf16")
    elif isa == Isa.AVX512 and qtype in INT_TYPES:
        require_cpu("avx512f", "avx512bw", "avx512vl", "avx512_vnni")
    else:
        require_cpu("avx2", "fma", "f16c")


def _widened(qtype: GGMLQuantizationType, isa: Isa, rows: int) -> bool:
    """Whether the kernel multiplies bf16 weights and activations (AMX, from AMX_WIDEN_ROWS rows)."""
    return (qtype == T.BF16 and isa in (Isa.AVX512, Isa.AMX)) or (
        qtype in INT_TYPES and isa == Isa.AMX and rows >= AMX_WIDEN_ROWS
    )


def _rounded_activations(kernels, x: torch.Tensor, qtype: GGMLQuantizationType, isa: Isa) -> torch.Tensor:
    """``x`` as the kernel multiplies it, in float64."""
    if _widened(qtype, isa, x.shape[0]):
        return x.bfloat16().double()
    if qtype in INT_TYPES:
        q, scale = quantize_activations(kernels, x)
        return q.double() * scale.double().repeat_interleave(32, dim=1)
    return x.double()


def _check(got: torch.Tensor, x_used: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           rounding: torch.Tensor, widened_weights: bool = False) -> None:
    """(a) within 1e-5 of |x_used| |W_used|^T of x_used W_used^T (W_used: W, or W rounded to bf16
    where ``widened_weights``); (b) within ``rounding`` |W|^T (and 2^-8 |x_used| |W|^T for the
    widened weights) more of x W^T."""
    w = weight.double()
    w_used = weight.bfloat16().double() if widened_weights else w
    b = 0 if bias is None else bias.double()
    accumulation = 1e-5 * (x_used.abs() @ w_used.abs().T) + 1e-6
    error_a = (got.double() - (x_used @ w_used.T + b)).abs()
    assert (error_a <= accumulation).all(), f"reference (a): worst excess {(error_a - accumulation).max():.3g}"
    error_b = (got.double() - (x.double() @ w.T + b)).abs()
    bound_b = accumulation + rounding @ w.abs().T + (2.0**-8 * x_used.abs() @ w.abs().T if widened_weights else 0)
    assert (error_b <= bound_b).all(), f"reference (b): worst excess {(error_b - bound_b).max():.3g}"


def _rounding_bound(x: torch.Tensor, qtype: GGMLQuantizationType, isa: Isa) -> torch.Tensor:
    """Worst-case |x - x_used| per element: half an int8 step of its block, or bf16's."""
    if _widened(qtype, isa, x.shape[0]):
        return x.double().abs() * 2.0**-8
    if qtype in INT_TYPES:
        block_max = x.double().abs().view(x.shape[0], -1, 32).amax(dim=2)
        return (block_max / 254).repeat_interleave(32, dim=1) * (1 + 1e-6)
    return torch.zeros_like(x, dtype=torch.float64)


@ISAS
@pytest.mark.parametrize("qtype", INT_TYPES + HALF_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [1, 3, 8, 33, 64])
def test_quantized_linear_matches_float64(kernels, qtype: GGMLQuantizationType, isa: Isa, rows: int) -> None:
    _require_isa(qtype, isa)
    in_features = 512 if qtype in INT_TYPES else 131  # half types: an odd width, a lone last k
    weight = random_block_tensor(qtype, 37, in_features, seed=rows)
    x = torch.randn(rows, in_features, generator=torch.Generator().manual_seed(rows))
    layer = QuantizedLinear([weight], isa=isa)
    prefix = "f16c" if qtype == T.F16 else "avx2" if (qtype, isa) == (T.BF16, Isa.AVX_VNNI) else _PATH_PREFIX[isa]
    assert layer.kernel_path.startswith(prefix), layer.kernel_path
    got = layer(x)
    assert got.shape == (rows, 37) and got.dtype == torch.float32
    _check(got, _rounded_activations(kernels, x, qtype, isa), x, weight.dequantize(), None,
           _rounding_bound(x, qtype, isa), widened_weights=qtype in INT_TYPES and _widened(qtype, isa, rows))


@ISAS
def test_fused_parts_of_mixed_types_with_bias(kernels, isa: Isa) -> None:
    """q/k/v-like parts of three types (column counts across panel edges) and one bias."""
    _require_isa(T.Q4_K, isa)
    parts = [random_block_tensor(T.Q4_K, 17, 256, 1), random_block_tensor(T.Q6_K, 21, 256, 2), random_block_tensor(T.Q8_0, 16, 256, 3)]
    bias = torch.randn(54)
    x = torch.randn(9, 256)
    got = QuantizedLinear(parts, bias, isa=isa)(x)
    weight = torch.cat([part.dequantize() for part in parts])
    _check(got, _rounded_activations(kernels, x, T.Q4_K, isa), x, weight, bias, _rounding_bound(x, T.Q4_K, isa))


# NOTE: one row; a tile of the rest (16-row tiles on AVX-512); two 256-row blocks and a partial.
@ISAS
@pytest.mark.parametrize("rows", [1, 37, 600])
def test_fused_gate_up_is_silu_and_mul_of_the_product_bit_for_bit(kernels, isa: Isa, rows: int) -> None:
    """Gate and up of two types (a last panel of 5 columns) with a bias, against the unfused
    product and the SiLU kernel; the fp32 MLP's reference is that pair."""
    _require_isa(T.Q4_K, isa)
    parts = [random_block_tensor(T.Q4_K, 37, 256, 1), random_block_tensor(T.Q8_0, 37, 256, 2)]
    layer = QuantizedLinear(parts, torch.randn(74), isa=isa)
    x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows))
    expected = torch.empty(rows, 37)
    kernels.silu_and_mul(layer(x), expected)
    got = layer.gated(x)
    assert got is not None and torch.equal(got, expected)


@pytest.mark.parametrize("qtype", INT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [16, 40])
def test_amx_int8_gives_the_bits_of_the_vnni_kernel(kernels, qtype: GGMLQuantizationType, rows: int) -> None:
    """The AMX tiles' integer dots are the VNNI kernel's, and the float formula is the same
    code: whole tiles (and, at 40 rows, 8 rows on VNNI) equal bit for bit, for an odd number
    of groups too (288 = 9 groups of 32; the K-quants need 256s)."""
    _require_isa(qtype, Isa.AMX)
    in_features = 288 if qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0) else 768
    weight = random_block_tensor(qtype, 37, in_features, seed=rows)
    x = torch.randn(rows, in_features, generator=torch.Generator().manual_seed(rows))
    bias = torch.randn(37)
    got = QuantizedLinear([weight], bias, isa=Isa.AMX)(x)
    assert torch.equal(got, QuantizedLinear([weight], bias, isa=Isa.AVX512)(x))


def test_gate_up_of_unequal_parts_is_not_fused(kernels) -> None:
    layer = QuantizedLinear([random_block_tensor(T.Q8_0, 32, 256, 1), random_block_tensor(T.Q8_0, 16, 256, 2)])
    assert layer.gated(torch.randn(2, 256)) is None


def test_activations_are_rounded_to_int8_per_block_of_32(kernels) -> None:
    """The rounding reference (a) rests on: q = round(x * 127 / max|x_block|)."""
    x = torch.randn(5, 96) * torch.logspace(-3, 3, 96)
    q, scale = quantize_activations(kernels, x)
    blocks = x.view(5, 3, 32)
    expected_scale = blocks.abs().amax(dim=2) / 127
    torch.testing.assert_close(scale, expected_scale)
    expected_q = torch.round(blocks * (127 / blocks.abs().amax(dim=2, keepdim=True))).view(5, 96)
    assert (q.int() - expected_q.int()).abs().max() <= 1  # float32 ties may round either way
    assert q.abs().max() <= 127


@pytest.mark.parametrize("qtype", INT_TYPES + HALF_TYPES, ids=lambda t: t.name)
def test_embedding_rows_are_exact(kernels, qtype: GGMLQuantizationType) -> None:
    weight = random_block_tensor(qtype, 40, 256, seed=7)
    embedding = QuantizedEmbedding(weight)
    ids = torch.tensor([[0, 39, 17], [16, 15, 0]])
    got = embedding(ids)
    assert got.shape == (2, 3, 256)
    torch.testing.assert_close(got, weight.dequantize()[ids], rtol=0, atol=0)


def test_tied_head_shares_the_embedding_panels(kernels) -> None:
    weight = random_block_tensor(T.Q8_0, 40, 256, seed=8)
    embedding = QuantizedEmbedding(weight)
    head = embedding.as_linear()
    (panels, _), = head.packed_parts
    assert head.weight_bytes == panels.numel()
    # NOTE: 8-bit quants plus an fp16 scale per 32 weights (no min): 8.5 bits per weight.
    assert head.weight_bytes == 48 * 256 * 17 // 16  # 40 rows padded to 3 panels of 16
    x = torch.randn(2, 256)
    _check(head(x), _rounded_activations(kernels, x, T.Q8_0, Isa.BEST), x, weight.dequantize(), None,
           _rounding_bound(x, T.Q8_0, Isa.BEST))


@pytest.mark.parametrize(
    ("isa", "feature"), [(Isa.AVX512, "avx512_vnni"), (Isa.AMX, "amx_int8"), (Isa.AVX_VNNI, "avx_vnni")],
    ids=["avx512", "amx", "avx_vnni"],
)
def test_forcing_a_path_the_cpu_lacks_names_the_feature(kernels, isa: Isa, feature: str) -> None:
    if feature in CPU_FLAGS:
        pytest.skip(f"this CPU has {feature}: the path runs here")
    with pytest.raises(RuntimeError, match=feature):
        QuantizedLinear([random_block_tensor(T.Q4_0, 16, 64, 0)], isa=isa)


def test_f32_weights_use_the_fp32_packed_kernel(kernels) -> None:
    weight = torch.randn(30, 64)
    layer = QuantizedLinear([BlockTensor(T.F32, 30, 64, weight)])
    assert layer.kernel_path == quantized_linear.FP32_PATH
    x = torch.randn(3, 64)
    torch.testing.assert_close(layer(x), x @ weight.T, rtol=1e-5, atol=1e-5)


def test_torch_fallback_without_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernels cannot be built (and on CUDA) the weight is dequantized once at load."""
    monkeypatch.setattr(quantized_linear, "load_cpu_kernels", lambda: None)
    parts = [random_block_tensor(T.Q4_K, 20, 256, 4), random_block_tensor(T.BF16, 12, 256, 5)]
    bias = torch.randn(32)
    layer = QuantizedLinear(parts, bias)
    assert layer.kernel_path == TORCH_PATH
    x = torch.randn(4, 256)
    weight = torch.cat([part.dequantize() for part in parts])
    torch.testing.assert_close(layer(x), x @ weight.T + bias, rtol=1e-5, atol=1e-4)
    embedding = QuantizedEmbedding(parts[0])
    torch.testing.assert_close(embedding(torch.tensor([3, 19])), parts[0].dequantize()[[3, 19]], rtol=0, atol=0)


def test_tall_weights_are_packed_a_slice_of_rows_at_a_time(kernels) -> None:
    """Past 4,096 rows the packing goes slice by slice; the rows come out as one weight."""
    weight = random_block_tensor(T.Q4_1, 4096 + 37, 64, seed=9)
    embedding = QuantizedEmbedding(weight)
    ids = torch.tensor([0, 4095, 4096, 4132, 17])
    torch.testing.assert_close(embedding(ids), weight.dequantize()[ids], rtol=0, atol=0)
    x = torch.randn(2, 64)
    _check(embedding.as_linear()(x), _rounded_activations(kernels, x, T.Q4_1, Isa.BEST), x, weight.dequantize(), None,
           _rounding_bound(x, T.Q4_1, Isa.BEST))


def test_q8_0_keeps_fp16_scales_where_its_min_would_overflow_fp16(kernels) -> None:
    """Q8_0's min is -128 d, no fp16 past |d| = 511.75: the packed weight keeps no min (its zero
    point is the kernel's), so its scales stay fp16 and its rows come back exact."""
    data = random_block_tensor(T.Q8_0, 16, 64, seed=10).data.clone()
    data[3, :2] = torch.from_numpy(np.array([600.0], np.float16).view(np.uint8))  # row 3's first d
    large = BlockTensor(T.Q8_0, 16, 64, data)
    embedding = QuantizedEmbedding(large)
    assert embedding.as_linear().packed_parts[0][1] == PackedFormat.FULL32_HALF_ZERO128
    ids = torch.arange(16)
    torch.testing.assert_close(embedding(ids), large.dequantize(), rtol=0, atol=0)


# NOTE: panel_kernels.h's zero_point() of each format: the kernel starts a group's dot at -zero
# point * sum(x) and never reads the stored min, so the min must be exactly that.
@pytest.mark.parametrize(
    ("qtype", "fmt", "zero_point"),
    [(T.Q4_0, PackedFormat.NIBBLE32_HALF_ZERO8, 8), (T.Q5_0, PackedFormat.FIVE32_HALF_ZERO16, 16),
     (T.Q8_0, PackedFormat.FULL32_HALF_ZERO128, 128), (T.Q6_K, PackedFormat.BYTE16_ZERO32, 32)],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_symmetric_types_pack_to_their_zero_point_format(qtype: GGMLQuantizationType, fmt: PackedFormat, zero_point: int) -> None:
    weight = random_block_tensor(qtype, 16, 256, seed=4)
    unpacked = unpack_blocks(weight.data.numpy(), qtype, 16, 256)
    np.testing.assert_array_equal(unpacked.min, -zero_point * unpacked.scale)
    panels, packed = pack_blocks(weight.data, qtype, 16, 256)
    assert packed == fmt
    if qtype != T.Q6_K:  # NOTE: an fp16 scale and the quants: the file's own bytes (Q6_K: a byte a quant)
        assert panels.numel() == weight.data.numel()
