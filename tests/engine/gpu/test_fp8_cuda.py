"""FP8 on CUDA (issue 26): ``torch._scaled_mm`` with dynamic per-token activation scales, the
Triton weight-only FP8 kernel inside the engine, and the FP8 KV cache read by the Triton
attention kernels under CUDA graphs.

- ``scaled_mm_per_token`` equals the float64 product of the activations as it rounds them
  (e4m3 per row, its own scale) with the dequantized weight, within bfloat16's output rounding
  (needs sm89+: skipped on older GPUs);
- the engine in float32 over a 128x128-block FP8 checkpoint runs the Triton kernel and equals
  transformers on the dequantized weights (fp32 on the GPU): greedy equal, log-probs within
  1e-3 as the other CUDA-path tests;
- in bfloat16 over a per-channel compressed-tensors checkpoint (sm89+) it runs ``_scaled_mm``,
  and with ``kv_cache_dtype="fp8_e4m3"`` the FP8 pool: first-step log-probs within 0.3 nats of
  the float64 reference (FP8 activations or K/V; the CPU tests measure ~0.13 for the pool).

Skipped where torch sees no CUDA device; bench/gpu_check.sh runs this package. Not yet run on
a GPU when written: the kernels' math is checked on CPU (tests/engine/kernels/test_fp8_linear.py
and test_fp8_kv_attention.py in Triton's interpreter, tests/engine/models/test_fp8_checkpoints.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from engine.engine import Engine
from engine.layers.fp8_linear import (
    SCALED_MM_PATH,
    TRITON_PATH,
    fp8_tensor_cores,
    scaled_mm_per_token,
)
from engine.memory.kv_pool import FP8_KV_DTYPE
from tests.engine.models.conftest import (
    TINY_PROMPTS,
    TINY_SHAPE,
    Reference,
    build_checkpoint,
    hf_greedy,
)
from tests.support.fp8_checkpoints import Fp8Variant, quantize_projection, write_fp8_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_fp8 = pytest.mark.skipif(
    not torch.cuda.is_available() or not fp8_tensor_cores(torch.device("cuda")), reason="needs FP8 tensor cores (sm89+)"
)

MAX_NEW = 8
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}
SHAPE = {**TINY_SHAPE, "hidden_size": 256, "intermediate_size": 512}
FP8_TOLERANCE = 0.3


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    path = tmp_path_factory.mktemp("llama")
    build_checkpoint(path, LlamaConfig(**SHAPE), tokenizer_dir)
    return path


def _checkpoint(base: Path, root: Path, variant: Fp8Variant, dtype: torch.dtype) -> tuple[Path, list[Reference]]:
    write_fp8_checkpoint(base, root / "fp8", root / "dequantized", variant)
    model = AutoModelForCausalLM.from_pretrained(str(root / "dequantized"), dtype=dtype).to("cuda")
    return root / "fp8", [hf_greedy(model, prompt, MAX_NEW) for prompt in TINY_PROMPTS]


def _first_step_close(results: object, refs: list[Reference]) -> None:
    assert isinstance(results, list)
    for result, ref in zip(results, refs, strict=True):
        for lp, token, _ in result["meta_info"]["output_top_logprobs"][0]:
            assert lp == pytest.approx(ref.first_logprobs[token].item(), abs=FP8_TOLERANCE)


@needs_fp8
def test_scaled_mm_equals_the_product_of_what_it_rounds() -> None:
    weight = torch.randn(256, 512) * 0.05
    tensors, dequantized = quantize_projection(weight, Fp8Variant("compressed-tensors", "channel"))
    x = torch.randn(7, 512).to(torch.bfloat16)
    w, scale = tensors["weight"].cuda(), tensors["weight_scale"].cuda().reshape(1, -1)
    got = scaled_mm_per_token(x.cuda(), w.t(), scale, None).double().cpu()
    x_scale = x.double().abs().amax(1, keepdim=True) / 448
    x_rounded = (x.double() / x_scale).to(torch.float8_e4m3fn).double() * x_scale
    expected = x_rounded @ dequantized.double().t()
    torch.testing.assert_close(got, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.timeout(180)
def test_block_fp8_runs_the_triton_kernel_and_matches_transformers(base: Path, tmp_path: Path) -> None:
    checkpoint, refs = _checkpoint(base, tmp_path, Fp8Variant("fp8", "block"), torch.float32)
    engine = Engine(str(checkpoint), device="cuda", dtype="float32", max_total_tokens=4096)
    assert engine.runner.weights.kernel == TRITON_PATH
    assert engine.runner.cuda_graph is not None
    results = engine.generate(input_ids=TINY_PROMPTS, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(results, list)
    for result, ref in zip(results, refs, strict=True):
        assert result["output_ids"] == ref.output_ids
        ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-3)


@needs_fp8
@pytest.mark.timeout(180)
def test_per_channel_fp8_runs_scaled_mm_in_bfloat16(base: Path, tmp_path: Path) -> None:
    checkpoint, refs = _checkpoint(base, tmp_path, Fp8Variant("compressed-tensors", "channel"), torch.float64)
    engine = Engine(str(checkpoint), device="cuda", dtype="bfloat16", max_total_tokens=4096)
    assert engine.runner.weights.kernel == SCALED_MM_PATH
    assert engine.runner.cuda_graph is not None
    _first_step_close(engine.generate(input_ids=TINY_PROMPTS, sampling_params=GREEDY, return_logprob=True, top_logprobs_num=5), refs)


@pytest.mark.timeout(180)
def test_the_fp8_kv_cache_on_cuda(base: Path, tmp_path: Path) -> None:
    variant = Fp8Variant("compressed-tensors", "channel", kv_scales=True)
    checkpoint, refs = _checkpoint(base, tmp_path, variant, torch.float64)
    engine = Engine(str(checkpoint), device="cuda", dtype="float32", max_total_tokens=4096, kv_cache_dtype="fp8_e4m3")
    assert engine.runner.kv_pool.k_buffer(0).dtype == FP8_KV_DTYPE
    assert engine.runner.kv_pool.scales[0] != (1.0, 1.0)
    assert engine.runner.cuda_graph is not None
    _first_step_close(engine.generate(input_ids=TINY_PROMPTS, sampling_params=GREEDY, return_logprob=True, top_logprobs_num=5), refs)
