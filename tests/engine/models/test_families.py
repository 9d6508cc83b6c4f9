"""Gemma 2, Gemma 3, Phi-3 (longrope) and Phi-4-mini (partial rotary), yarn RoPE and the sliding-window Mistral and Qwen2
models generate exactly what transformers generates from the same tiny checkpoint (fp32,
greedy, log-probs within 1e-4), with the radix cache and chunked prefill on, and past their
window: prompt plus generation outrun the 16-token window, a cached prefix is longer than it,
and each windowed model shows that without the window its results differ."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (
    Gemma2Config,
    Gemma3TextConfig,
    LlamaConfig,
    MistralConfig,
    Phi3Config,
    PretrainedConfig,
    Qwen2Config,
)

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.engine import Engine
from tests.engine.models.conftest import (
    TINY_SHAPE,
    Reference,
    assert_matches,
    build_checkpoint,
    hf_greedy,
)

WINDOW = 16
MAX_NEW = 12
CHUNK = 8  # NOTE: the 20-token prompt prefills in chunks of 8, 8 and 4
LONG = [700, 31, 2, 4095, 123, 55, 999, 8, 2048, 77, 13, 17, 305, 42, 9, 1204, 88, 3071, 5, 640]
# NOTE: run after LONG: the same prompt (a full radix-cache hit, longer than the window) and
# one sharing LONG's first 14 tokens.
AGAIN = [LONG, LONG[:14] + [211, 66, 1500, 4, 820, 3]]
GEMMA = {"head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": WINDOW}
LONGROPE = {
    "rope_type": "longrope",
    "rope_theta": 10000.0,
    "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8],
    "long_factor": [1.0, 1.5, 2.4, 3.9, 6.0, 9.0, 13.0, 18.0],
    "original_max_position_embeddings": 32,  # NOTE: prompt + generation stays below it
}

CASES: dict[str, tuple[type[PretrainedConfig], dict[str, Any]]] = {
    "mistral": (MistralConfig, {"sliding_window": WINDOW}),
    # NOTE: Qwen2 slides from layer max_window_layers on: layer 0 global, layer 1 windowed.
    "qwen2": (Qwen2Config, {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 1}),
    "gemma2": (Gemma2Config, {**GEMMA, "attn_logit_softcapping": 2.0, "final_logit_softcapping": 5.0}),
    "gemma3": (Gemma3TextConfig, {
        **GEMMA,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        },
    }),
    "phi3": (Phi3Config, {"rope_parameters": LONGROPE, "original_max_position_embeddings": 32, "pad_token_id": 0}),
    # NOTE: Phi-4-mini rotates three quarters of each head (12 of 16 dims: 6 frequencies).
    "phi4-mini": (Phi3Config, {
        "rope_parameters": {**LONGROPE, "short_factor": LONGROPE["short_factor"][:6],
                            "long_factor": LONGROPE["long_factor"][:6], "partial_rotary_factor": 0.75},
        "original_max_position_embeddings": 32, "pad_token_id": 0, "partial_rotary_factor": 0.75,
    }),
    "llama-yarn": (LlamaConfig, {"rope_parameters": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
    }}),
}
WINDOWED = ("mistral", "qwen2", "gemma2", "gemma3")


@dataclass(frozen=True)
class Family:
    name: str
    path: Path
    refs: dict[tuple[int, ...], Reference]  # transformers' continuation of each prompt


def _engine(path: Path, backend: str = "cpu") -> Engine:
    return Engine(
        str(path), max_total_tokens=2048, device="cpu", dtype="float32", chunked_prefill_size=CHUNK,
        attention_backend=backend,
    )


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Callable[[str], Family]:
    """Writes a family's checkpoint and transformers' references once per module."""

    @cache
    def built(name: str) -> Family:
        config_cls, overrides = CASES[name]
        path = tmp_path_factory.mktemp(name)
        model = build_checkpoint(path, config_cls(**TINY_SHAPE, **overrides), tokenizer_dir)
        return Family(name, path, {tuple(p): hf_greedy(model, p, MAX_NEW) for p in [LONG, *AGAIN]})

    return built


@pytest.fixture(scope="module", params=list(CASES))
def family(request: pytest.FixtureRequest, build: Callable[[str], Family]) -> Family:
    return build(request.param)


@pytest.fixture(scope="module", params=WINDOWED)
def windowed(request: pytest.FixtureRequest, build: Callable[[str], Family]) -> Family:
    return build(request.param)


def _record_extends(engine: Engine) -> list[tuple[int, int]]:
    """(cached prefix, new tokens) of every prefill forward the engine runs from now on."""
    seen: list[tuple[int, int]] = []
    backend = engine.runner.attention
    init = backend.init_forward_metadata

    def recording(batch: ForwardBatch) -> None:
        if batch.mode is ForwardMode.EXTEND:
            seen.extend(zip(batch.extend_prefix_lens_cpu, batch.extend_seq_lens_cpu))
        init(batch)

    backend.init_forward_metadata = recording  # type: ignore[method-assign]
    return seen


def test_generation_matches_transformers_with_cache_and_chunks(family: Family) -> None:
    engine = _engine(family.path)
    extends = _record_extends(engine)
    assert engine.runner.model_config.architecture == json.loads((family.path / "config.json").read_text())[
        "architectures"
    ][0]
    assert engine.runner.context_length == TINY_SHAPE["max_position_embeddings"]
    rotating = 12 if family.name == "phi4-mini" else 16  # NOTE: guards the partial-rotary case
    assert engine.runner.model.rotary.cos_cache.shape[-1] == rotating
    assert_matches(engine, [LONG], [family.refs[tuple(LONG)]], MAX_NEW)
    assert extends == [(0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, len(LONG) - 2 * CHUNK)]
    # NOTE: both prompts now extend a radix-cache prefix; LONG's is longer than the window.
    results = engine.generate(input_ids=AGAIN, sampling_params={"max_new_tokens": 1})
    assert [r["meta_info"]["cached_tokens"] for r in results] == [len(LONG) - 1, 14]
    assert_matches(engine, AGAIN, [family.refs[tuple(p)] for p in AGAIN], MAX_NEW)


def test_the_torch_native_backend_matches_too(windowed: Family) -> None:
    """The C++ kernel serves the test above; the reference backend (SDPA, or the written-out
    softmax under Gemma 2's logit cap) serves the same requests."""
    engine = _engine(windowed.path, "torch_native")
    assert_matches(engine, [LONG], [windowed.refs[tuple(LONG)]], MAX_NEW)
    assert_matches(engine, AGAIN, [windowed.refs[tuple(p)] for p in AGAIN], MAX_NEW)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the Triton kernels run in the interpreter on CPU tensors here")
def test_the_triton_backend_matches_in_the_interpreter(build: Callable[[str], Family]) -> None:
    """Gemma 2 has all of it at once: windowed and global layers, a logit cap, its own scale."""
    pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")
    gemma2 = build("gemma2")
    engine = _engine(gemma2.path, "triton")
    # NOTE: 3 tokens (the interpreter is slow): chunked prefill, then decodes past the window;
    # again, all but the last prompt token from the radix cache.
    ref = gemma2.refs[tuple(LONG)]
    short = Reference(ref.output_ids[:3], ref.logprobs[:3], ref.first_logprobs)
    assert_matches(engine, [LONG], [short], 3)
    assert_matches(engine, [LONG], [short], 3)


def test_without_the_window_the_results_differ(windowed: Family, tmp_path: Path) -> None:
    """Guards the test above: the window decides these outputs, so an engine that ignored it
    would fail there."""
    family = windowed
    shutil.copytree(family.path, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "sliding_window": None}))
    engine = _engine(tmp_path)
    assert engine.runner.model_config.attention.sliding_window is None
    ref = family.refs[tuple(LONG)]
    result = engine.generate(input_ids=LONG, sampling_params={"temperature": 0, "max_new_tokens": MAX_NEW,
                                                              "ignore_eos": True}, return_logprob=True)
    assert isinstance(result, dict)
    ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
    assert result["output_ids"] != ref.output_ids or ours != pytest.approx(ref.logprobs, abs=1e-3)
