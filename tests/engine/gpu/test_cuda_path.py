"""The CUDA path inside the whole engine, on a GPU: the Triton attention backend, the Triton
layer kernels and CUDA-graph decode, against transformers and against the engine's switches.

tests/engine/kernels checks each kernel's math, in Triton's CPU interpreter on CPU machines;
what only a GPU can check is the compiled code, CUDA-graph capture and replay (padding to a
captured batch size, the eager fallback above the largest) and all of it together. On
random-weight checkpoints written by transformers (a tiny Llama, a Llama with SmolLM2-135M's
shape, a tiny Qwen2 with its q/k/v biases):
- fp32 greedy with the GPU defaults (triton backend, CUDA graphs) equals transformers' greedy
  on the GPU, logprobs included;
- the same ids with CUDA graphs off, with the torch-native backend, without the radix cache,
  with small prefill chunks, and again for a repeated request served from the prefix cache;
- bf16: the first token agrees with transformers in bf16; graphs on and off agree;
- a batch larger than the largest captured graph, of requests that finish at different steps,
  equals the same batch without graphs;
- JSON-schema constrained decoding (xgrammar's token bitmask on CUDA logits) gives valid JSON.

Skipped where torch sees no CUDA device. The tokenizer comes from $GOMGR_TEST_TOKENIZER_DIR
when set, else from the model store (conftest.py); bench/gpu_check.sh runs this module.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    PretrainedConfig,
    Qwen2Config,
)

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.engine import Engine
from engine.runtime.cuda_graph_runner import capture_batch_sizes
from tests.engine.models.conftest import (
    TINY_PROMPTS,
    TINY_SHAPE,
    Reference,
    build_checkpoint,
    hf_greedy,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DEVICE = "cuda"
MAX_NEW = 16
_rng = random.Random(0)
# NOTE: two prompts longer than the attention kernels' 32-token blocks, so prefill and decode
# both cross block boundaries; all five are prefilled in one batch and decoded at batch 5,
# which replays the graph captured for 8 (padding rows).
PROMPTS: list[list[int]] = [
    *TINY_PROMPTS,
    _rng.choices(range(100, 49000), k=40),
    _rng.choices(range(100, 49000), k=100),
]
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}
# NOTE: the KV pool is always sized: left to mem_fraction_static it takes 85% of the free
# GPU memory, per engine, and this module builds several.
POOL_TOKENS = 4096

SMOLLM2_SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
    # NOTE: as in TINY_SHAPE; at the default 0.02 this shape's greedy output repeats one or
    # two tokens, which would hide a wrong position.
    "initializer_range": 0.1,
}

# NOTE: seeds for which every greedy step of every prompt has a top-2 log-prob margin above
# 1e-3 (hf_greedy asserts it; checked in fp32 on CPU, where the margins are the same to ~1e-5).
CHECKPOINTS: dict[str, tuple[type[PretrainedConfig], dict[str, Any], int]] = {
    "llama": (LlamaConfig, TINY_SHAPE, 0),
    "smollm2-shape": (LlamaConfig, SMOLLM2_SHAPE, 1),
    "qwen2-bias": (Qwen2Config, TINY_SHAPE, 0),
}

# The engine switches that take the GPU path apart piece by piece; each must change nothing.
SWITCHES: dict[str, dict[str, Any]] = {
    "triton-no-cuda-graph": {"disable_cuda_graph": True},
    "torch-native": {"attention_backend": "torch_native"},
    "no-radix-cache": {"disable_radix_cache": True},
    # NOTE: 16-token chunks put every longer prompt's later chunks on top of a cached prefix.
    "chunked-prefill": {"chunked_prefill_size": 16},
}

# Log-prob gap under which two runs may legitimately pick different tokens (see _assert_agree).
TIE_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.1}


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    refs: list[Reference]  # transformers' fp32 greedy continuation of each of PROMPTS, on the GPU


def _engine(path: Path, dtype: str = "float32", **kwargs: Any) -> Engine:
    kwargs.setdefault("max_total_tokens", POOL_TOKENS)
    return Engine(str(path), device=DEVICE, dtype=dtype, **kwargs)


def _generate(engine: Engine, prompts: list[list[int]], params: Any) -> list[dict[str, Any]]:
    results = engine.generate(
        input_ids=prompts, sampling_params=params, return_logprob=True, top_logprobs_num=5
    )
    assert isinstance(results, list) and len(results) == len(prompts)
    return results


def _assert_agree(ours: dict[str, Any], theirs: dict[str, Any], tie: float) -> None:
    """Two greedy runs of one prompt give the same ids, up to their first near-tie.

    NOTE: kernels that differ only in rounding (a graph captured for a larger batch than
    the one replayed runs other matmul shapes; bf16 rounds per kernel) can flip a top-2
    pair whose log-probs lie within ``tie`` of each other; from there the continuations
    legitimately differ. A wrong result would pick a token far below the top.
    """
    a, b = ours["output_ids"], theirs["output_ids"]
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            top = {tok: lp for lp, tok, _ in ours["meta_info"]["output_top_logprobs"][i]}
            assert y in top and top[x] - top[y] <= tie, f"step {i}: {x} vs {y} is no near-tie"
            return


def _assert_matches_refs(results: list[dict[str, Any]], refs: list[Reference]) -> None:
    for result, ref in zip(results, refs):
        assert result["output_ids"] == ref.output_ids
        ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-3)


def _record_decode_batches(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, bool]]:
    """(batch size, replayed from a CUDA graph) of every decode forward from now on."""
    runner = engine.runner
    graphs = runner.cuda_graph
    assert graphs is not None
    seen: list[tuple[int, bool]] = []
    forward: Callable[[ForwardBatch], torch.Tensor] = runner.forward

    def recording(batch: ForwardBatch) -> torch.Tensor:
        if batch.mode is ForwardMode.DECODE:
            seen.append((batch.batch_size, graphs.can_run(batch)))
        return forward(batch)

    monkeypatch.setattr(runner, "forward", recording)
    return seen


@pytest.fixture(scope="module", params=list(CHECKPOINTS))
def checkpoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path
) -> Checkpoint:
    config_cls, shape, seed = CHECKPOINTS[request.param]
    path = tmp_path_factory.mktemp(request.param)
    model = build_checkpoint(path, config_cls(**shape), tokenizer_dir, seed=seed).to(DEVICE)
    return Checkpoint(path, [hf_greedy(model, p, MAX_NEW) for p in PROMPTS])


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    path = tmp_path_factory.mktemp("tiny")
    build_checkpoint(path, LlamaConfig(**TINY_SHAPE), tokenizer_dir)
    return path


@pytest.mark.timeout(180)
def test_gpu_defaults_match_transformers(checkpoint: Checkpoint) -> None:
    engine = _engine(checkpoint.path)
    # NOTE: guards the test itself: the defaults on CUDA are the Triton path with graphs.
    assert type(engine.runner.attention).__name__ == "TritonAttention"
    assert engine.runner.cuda_graph is not None
    _assert_matches_refs(_generate(engine, PROMPTS, GREEDY), checkpoint.refs)
    again = _generate(engine, PROMPTS, GREEDY)
    _assert_matches_refs(again, checkpoint.refs)
    assert all(r["meta_info"]["cached_tokens"] > 0 for r in again)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("switch", list(SWITCHES))
def test_switches_change_nothing(checkpoint: Checkpoint, switch: str) -> None:
    engine = _engine(checkpoint.path, **SWITCHES[switch])
    assert (engine.runner.cuda_graph is None) == (
        switch in ("triton-no-cuda-graph", "torch-native")
    )
    first = _generate(engine, PROMPTS, GREEDY)
    again = _generate(engine, PROMPTS, GREEDY)
    for results in (first, again):
        assert [r["output_ids"] for r in results] == [ref.output_ids for ref in checkpoint.refs]
    cached = [r["meta_info"]["cached_tokens"] for r in again]
    if switch == "no-radix-cache":
        assert cached == [0] * len(PROMPTS)
    else:
        assert all(c > 0 for c in cached)


@pytest.mark.timeout(180)
def test_bf16_first_token_and_graphs(checkpoint: Checkpoint) -> None:
    params = {"temperature": 0, "max_new_tokens": 32, "ignore_eos": True}
    graphed = _generate(_engine(checkpoint.path, "bfloat16"), PROMPTS, params)
    eager = _generate(
        _engine(checkpoint.path, "bfloat16", disable_cuda_graph=True), PROMPTS, params
    )
    tie = TIE_TOLERANCE["bfloat16"]
    model = AutoModelForCausalLM.from_pretrained(str(checkpoint.path), dtype=torch.bfloat16)
    model = model.to(DEVICE).eval()
    for prompt, ours, theirs in zip(PROMPTS, graphed, eager):
        assert len(ours["output_ids"]) == 32
        _assert_agree(ours, theirs, tie)
        with torch.inference_mode():
            logits = model(torch.tensor([prompt], device=DEVICE)).logits[0, -1]
        reference = torch.log_softmax(logits.float(), -1)
        # NOTE: transformers and the engine round differently in bf16; the first token must
        # be transformers' argmax or within a near-tie of it, never far below.
        first = ours["output_ids"][0]
        assert reference[first] >= reference.max() - tie, f"first token {first} is off"


@pytest.mark.timeout(180)
def test_batch_above_the_largest_graph_with_mixed_lengths(
    tiny_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More running requests than the largest captured batch, finishing at different steps:
    decode runs eagerly above that size, then replays padded graphs as the batch shrinks."""
    running = 288
    largest = capture_batch_sizes(running)[-1]
    assert largest < running
    rng = random.Random(1)
    prompts = [rng.choices(range(100, 49000), k=rng.randint(1, 60)) for _ in range(running)]
    params = [
        {"temperature": 0, "max_new_tokens": 1 + i % 24, "ignore_eos": True} for i in range(running)
    ]
    pool = running * (60 + 24)
    graphed = _engine(tiny_path, max_total_tokens=pool, max_running_requests=running)
    seen = _record_decode_batches(graphed, monkeypatch)
    ours = _generate(graphed, prompts, params)
    eager = _engine(
        tiny_path, max_total_tokens=pool, max_running_requests=running, disable_cuda_graph=True
    )
    theirs = _generate(eager, prompts, params)
    sizes = set(capture_batch_sizes(running))
    # NOTE: guards the test itself: both the eager fallback and padded replays happened.
    assert any(bs > largest and not replayed for bs, replayed in seen)
    assert any(replayed and bs not in sizes for bs, replayed in seen)
    for p, a, b in zip(params, ours, theirs):
        assert len(a["output_ids"]) == p["max_new_tokens"]
        _assert_agree(a, b, TIE_TOLERANCE["float32"])


CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "capital": {"type": "boolean"},
        "climate": {"enum": ["dry", "wet", "cold"]},
        "rank": {"enum": [1, 2, 3]},
    },
    "required": ["capital", "climate", "rank"],
    "additionalProperties": False,
}


@pytest.mark.timeout(120)
def test_json_schema_on_gpu(tiny_path: Path) -> None:
    # NOTE: every value is bounded, so even a random model's greedy output completes the
    # object long before max_new_tokens; an unconstrained request shares the batch, so the
    # bitmask is applied to some rows of the CUDA logits only.
    engine = _engine(tiny_path)
    constrained = {"temperature": 0, "max_new_tokens": 64, "json_schema": json.dumps(CITY_SCHEMA)}
    free = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
    results = engine.generate(
        input_ids=PROMPTS[:3], sampling_params=[constrained, free, constrained]
    )
    assert isinstance(results, list)
    for result in (results[0], results[2]):
        assert result["meta_info"]["finish_reason"]["type"] == "stop"
        jsonschema.validate(json.loads(result["text"]), CITY_SCHEMA)
    assert len(results[1]["output_ids"]) == 8
