"""The CPU linear kernel (weights packed once into column panels) against float64 products,
and ``PackedLinear``, which uses it and falls back to oneDNN where it cannot be built."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.kernels.cpu import load_cpu_kernels
from engine.layers import packed_linear
from engine.layers.packed_linear import PackedEmbedding, PackedLinear
from tests.engine.kernels.cpu_features import require_cpu


@pytest.fixture(scope="module")
def kernels():
    loaded = load_cpu_kernels()
    assert loaded is not None, "the CPU kernels did not build; see the warning logged"
    return loaded


def _reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return F.linear(x.double(), weight.double(), None if bias is None else bias.double()).float()


def _tolerance(k: int) -> dict[str, float]:
    # NOTE: float32 sums of k products of N(0, 1) values, in another order than float64's.
    return {"rtol": 1e-5, "atol": 2e-6 * k**0.5 * 4}


# NOTE: rows around the 4-row tile and the 64-row block; columns around the 24-wide panel.
@pytest.mark.parametrize("rows", [1, 3, 4, 5, 32, 63, 64, 65, 130])
@pytest.mark.parametrize("out_features, in_features", [(960, 576), (24, 8), (25, 13), (7, 1536)])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
def test_packed_linear_matches_float64(kernels, rows: int, out_features: int, in_features: int, with_bias: bool) -> None:
    gen = torch.Generator().manual_seed(rows * out_features + in_features)
    weight = torch.randn(out_features, in_features, generator=gen)
    bias = torch.randn(out_features, generator=gen) if with_bias else None
    x = torch.randn(rows, in_features, generator=gen)
    packed = kernels.pack_linear_weight(weight)
    got = kernels.packed_linear(x, packed, bias, out_features)
    assert got.shape == (rows, out_features)
    torch.testing.assert_close(got, _reference(x, weight, bias), **_tolerance(in_features))


def test_packed_linear_reads_rows_of_a_wider_matrix(kernels) -> None:
    """x may be a column slice (rows contiguous, row stride wider than the width)."""
    weight = torch.randn(50, 40)
    wide = torch.randn(9, 64)
    x = wide[:, :40]
    got = kernels.packed_linear(x, kernels.pack_linear_weight(weight), None, 50)
    torch.testing.assert_close(got, _reference(x, weight, None), **_tolerance(40))


def test_packed_linear_refuses_mismatched_inputs(kernels) -> None:
    packed = kernels.pack_linear_weight(torch.randn(30, 16))
    with pytest.raises(RuntimeError, match="does not match"):
        kernels.packed_linear(torch.randn(2, 17), packed, None, 30)
    with pytest.raises(RuntimeError, match="does not match"):
        kernels.packed_linear(torch.randn(2, 16), packed, None, 60)
    with pytest.raises(RuntimeError, match="float32"):
        kernels.packed_linear(torch.randn(2, 16, dtype=torch.float64), packed, None, 30)
    with pytest.raises(RuntimeError, match="bias"):
        kernels.packed_linear(torch.randn(2, 16), packed, torch.randn(29), 30)


def test_packed_linear_layer_uses_the_kernel(kernels) -> None:
    weight, bias = torch.randn(100, 64), torch.randn(100)
    layer = PackedLinear(weight, bias)
    assert layer.packed_weight.shape == (5, 64, 24)  # ceil(100 / 24) panels of 64 x 24
    x = torch.randn(6, 128)[:, ::2]  # a strided view: copied to contiguous rows first
    torch.testing.assert_close(layer(x), _reference(x, weight, bias), **_tolerance(64))


def test_packed_linear_layer_falls_back_to_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernels cannot be built the weight is packed for oneDNN instead."""
    monkeypatch.setattr(packed_linear, "load_cpu_kernels", lambda: None)
    weight, bias = torch.randn(100, 64), torch.randn(100)
    layer = PackedLinear(weight, bias)
    assert layer.packed_weight.is_mkldnn
    x = torch.randn(6, 64)
    torch.testing.assert_close(layer(x), _reference(x, weight, bias), **_tolerance(64))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("rows", [1, 3, 8, 33, 64])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
def test_packed_linear_keeps_a_bf16_weight_in_bf16(
    kernels, monkeypatch: pytest.MonkeyPatch, isa: str, rows: int, with_bias: bool
) -> None:
    """bf16 panels, float32 in and out. The AVX512-BF16 path multiplies x rounded to bf16
    (nearest even): against that x the float64 product holds to float32 accumulation; the
    AVX2 path widens the weight and multiplies x itself."""
    if isa == "avx512":
        require_cpu("avx512f", "avx512_bf16")
    else:
        require_cpu("avx2", "fma")
    monkeypatch.setenv("GOMGR_CPU_QUANT_ISA", isa)
    gen = torch.Generator().manual_seed(rows)
    weight = torch.randn(50, 97, generator=gen).bfloat16()  # odd width: a lone last k pair
    bias = torch.randn(50, generator=gen) if with_bias else None
    x = torch.randn(rows, 97, generator=gen)
    layer = PackedLinear(weight, bias)
    assert layer.packed_weight.numel() == 4 * 49 * 16 * 2 * 2  # 4 panels of 16 x 49 k pairs, bf16
    x_used = x.bfloat16().float() if isa == "avx512" else x
    torch.testing.assert_close(layer(x), _reference(x_used, weight.float(), bias), **_tolerance(97))


def test_packed_linear_widens_a_bf16_weight_without_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed_linear, "load_cpu_kernels", lambda: None)
    weight = torch.randn(20, 32).bfloat16()
    layer = PackedLinear(weight, None)
    x = torch.randn(3, 32)
    torch.testing.assert_close(layer(x), _reference(x, weight.float(), None), **_tolerance(32))


# NOTE: a vocabulary that fills its last 24-wide panel, and one that leaves it part empty.
@pytest.mark.parametrize("vocab", [48, 61])
def test_tied_embedding_reads_the_heads_panels_exactly(kernels, vocab: int) -> None:
    table = torch.randn(vocab, 40, generator=torch.Generator().manual_seed(vocab))
    embedding = PackedEmbedding(PackedLinear(table, None))
    ids = torch.tensor([[0, vocab - 1, 23, 24], [25, 47, 5, 5]])
    assert torch.equal(embedding(ids), F.embedding(ids, table))

