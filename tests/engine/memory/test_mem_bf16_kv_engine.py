"""``--kv-cache-dtype bf16`` on CPU: the pool in bfloat16 (half the bytes of float32), stored
and read by the C++ kernels in the decode stack, the Python layers and prefill alike, and a
radix-cache hit answering exactly as the first, uncached request did; the real SmolLM2 greedy
answers as with the float32 pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from gguf import GGMLQuantizationType

from engine.engine import Engine
from engine.engine_config import EngineConfig
from engine.models.llama import LlamaFamilyForCausalLM
from engine.server.server_args import parse_server_args
from tests.support.gguf_files import tiny_gguf

PROMPTS = [[1, 504, 2365, 3421, 30], [42, 7, 9001, 12, 33, 5], [4093, 314, 2253]]
PARAMS = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}


def _generate(engine: Engine, prompts: list[list[int]] = PROMPTS) -> list[Any]:
    results = engine.generate(input_ids=prompts, sampling_params=PARAMS, return_logprob=True)
    assert isinstance(results, list)
    return [(r["output_ids"], r["meta_info"]["output_token_logprobs"]) for r in results]


def test_a_bf16_pool_is_half_the_bytes_and_every_path_reads_it_alike() -> None:
    path = str(tiny_gguf("qwen2", GGMLQuantizationType.Q4_K))
    fp32 = Engine(path, max_total_tokens=512, context_length=128)
    engine = Engine(path, max_total_tokens=512, context_length=128, kv_cache_dtype="bf16")
    pool = engine.runner.kv_pool
    assert pool.dtype == torch.bfloat16
    assert pool.nbytes * 2 == fp32.runner.kv_pool.nbytes
    assert engine.scheduler.stats().kv_pool_dtype == "bfloat16"
    first = _generate(engine)
    # NOTE: the same prompts again: every prefix now comes from the radix cache's bf16 rows.
    assert _generate(engine) == first
    model = engine.runner.model
    assert isinstance(model, LlamaFamilyForCausalLM) and model.decode_stack is not None
    model.decode_stack = None  # the Python layers over the same pool
    engine.flush_cache()
    assert _generate(engine) == first


def test_smollm2_greedy_with_a_bf16_pool_answers_as_with_float32(smollm2_dir: Path) -> None:
    """The rounding of K and V to bf16 (8 significant bits) moves SmolLM2's log-probs by
    hundredths of a nat: the same greedy tokens, their log-probs within 0.05."""
    prompts = [[1, 504, 3458, 282, 4649, 314], [1, 1262, 28, 253, 1745, 1188, 30]]
    answers = []
    for kv in ("auto", "bf16"):
        engine = Engine(str(smollm2_dir), max_total_tokens=1024, dtype="float32", kv_cache_dtype=kv)
        results = engine.generate(
            input_ids=prompts, sampling_params={"temperature": 0, "max_new_tokens": 12}, return_logprob=True
        )
        assert isinstance(results, list)
        answers.append(results)
    for fp32, bf16 in zip(*answers, strict=True):
        assert bf16["output_ids"] == fp32["output_ids"]
        for (got, *_), (expected, *_) in zip(
            bf16["meta_info"]["output_token_logprobs"], fp32["meta_info"]["output_token_logprobs"], strict=True
        ):
            assert abs(got - expected) < 0.05


def test_the_flag_takes_sglangs_names_and_refuses_others() -> None:
    path = str(tiny_gguf("qwen2", GGMLQuantizationType.Q4_K))
    assert parse_server_args(["--model-path", path, "--kv-cache-dtype", "bf16"]).engine_config().kv_cache_dtype == "bf16"
    assert EngineConfig("m", kv_cache_dtype="bfloat16").kv_cache_dtype == "bfloat16"
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of auto, fp8_e4m3, bf16, bfloat16"):
        EngineConfig("m", kv_cache_dtype="fp16")


def test_a_bf16_pool_under_float16_activations_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="kv_cache_dtype bf16 is for CPU engines computing in float32"):
        Engine(str(tiny_gguf("qwen2", GGMLQuantizationType.Q4_K)), max_total_tokens=256, dtype="float16",
               kv_cache_dtype="bf16")  # fmt: skip
