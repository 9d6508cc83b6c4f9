"""The overlap scheduler on a GPU changes no token: greedy and seeded sampling (with
penalties and log-probs) equal the plain scheduler's, with CUDA graphs, while requests
leave the batch at different steps. On CUDA its sampled tokens reach the host through a
non-blocking copy into pinned memory and its future-token entries are made on the device,
neither of which the CPU tests reach.

Skipped where torch sees no CUDA device; bench/gpu_check.sh runs tests/engine/gpu.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import LlamaConfig

from engine.engine import Engine
from tests.engine.models.conftest import TINY_PROMPTS, TINY_SHAPE, build_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# NOTE: length limits only, so both schedulers run the same batches step for step (a request
# ending on a stop token runs one more, discarded, step with overlap).
PARAMS: list[dict[str, Any]] = [
    {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True},
    {"temperature": 0.9, "seed": 11, "max_new_tokens": 7, "frequency_penalty": 0.6, "ignore_eos": True},
    {"temperature": 0.7, "top_p": 0.9, "seed": 3, "max_new_tokens": 3, "ignore_eos": True},
]


def _summary(engine: Engine) -> list[tuple[Any, ...]]:
    results = engine.generate(input_ids=TINY_PROMPTS, sampling_params=PARAMS, return_logprob=True)
    assert isinstance(results, list)
    return [(r["output_ids"], r["meta_info"]["output_token_logprobs"]) for r in results]


@pytest.mark.timeout(180)
def test_overlap_on_cuda_equals_the_plain_scheduler(tmp_path: Path, tokenizer_dir: Path) -> None:
    build_checkpoint(tmp_path, LlamaConfig(**TINY_SHAPE), tokenizer_dir)
    kwargs: dict[str, Any] = {"device": "cuda", "dtype": "float32", "max_total_tokens": 2048, "max_running_requests": 8}
    plain = Engine(str(tmp_path), **kwargs)
    overlap = Engine(str(tmp_path), enable_overlap_schedule=True, **kwargs)
    assert plain.runner.cuda_graph is not None
    first = _summary(plain)
    assert _summary(overlap) == first
    assert [len(ids) for ids, _ in first] == [p["max_new_tokens"] for p in PARAMS]
