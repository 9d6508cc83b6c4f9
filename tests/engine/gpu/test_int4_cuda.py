"""AWQ and GPTQ (act-order) checkpoints on CUDA: the engine's Triton int4 dequantize-GEMM under
CUDA graphs, in fp32, equals transformers' greedy on the same model dequantized (fp32 on the
GPU), log-probs within 1e-3 as the other CUDA-path tests.

Skipped where torch sees no CUDA device; bench/gpu_check.sh runs this package. Not yet run on
a GPU when written (issue 26): the kernel's math is checked in Triton's interpreter
(tests/engine/kernels/test_int4_linear.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from engine.engine import Engine
from engine.layers.int4_linear import TRITON_PATH
from tests.engine.models.conftest import TINY_PROMPTS, TINY_SHAPE, build_checkpoint, hf_greedy
from tests.support.int4_checkpoints import Int4Variant, write_int4_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

MAX_NEW = 8
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}
SHAPE = {**TINY_SHAPE, "hidden_size": 256, "intermediate_size": 512}
VARIANTS = [Int4Variant("awq", 128), Int4Variant("gptq", 128, desc_act=True, sym=False)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    path = tmp_path_factory.mktemp("qwen2")
    build_checkpoint(path, Qwen2Config(**SHAPE), tokenizer_dir)
    return path


@pytest.mark.timeout(180)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_int4_on_cuda_matches_transformers(base: Path, tmp_path: Path, variant: Int4Variant) -> None:
    write_int4_checkpoint(base, tmp_path / "int4", tmp_path / "dequantized", variant)
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "dequantized"), dtype=torch.float32).to("cuda")
    refs = [hf_greedy(model, prompt, MAX_NEW) for prompt in TINY_PROMPTS]
    engine = Engine(str(tmp_path / "int4"), device="cuda", dtype="float32", max_total_tokens=4096)
    assert engine.runner.weights.kernel == TRITON_PATH
    assert engine.runner.cuda_graph is not None
    results = engine.generate(input_ids=TINY_PROMPTS, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(results, list)
    for result, ref in zip(results, refs, strict=True):
        assert result["output_ids"] == ref.output_ids
        ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-3)
