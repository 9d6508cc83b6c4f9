"""MoE decode in CUDA graphs, on a GPU: every supported MoE architecture (tiny random-weight
checkpoints written by transformers) replays captured decode graphs, both capture-safe expert
kernels among them (gather at batch 1 where 3 × top_k <= experts, dense at the padded batch
4), and in fp32 its greedy output equals transformers' on the GPU; the expert-distribution
counts cover exactly the tokens forwarded, a graph's padding rows never counted.

Skipped where torch sees no CUDA device; bench/gpu_check.sh runs tests/engine/gpu.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.core.forward_batch import ForwardBatch
from engine.engine import Engine
from engine.models.moe_static import expert_kernel
from tests.engine.models.conftest import TINY_PROMPTS, Reference, build_checkpoint, hf_greedy
from tests.engine.moe.conftest import MOE_CASES

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DEVICE = "cuda"
MAX_NEW = 8
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}
# NOTE: the three prompts decode at batch 3 (the graph for 4, one padding row), the first
# alone at batch 1.
BATCHES = [TINY_PROMPTS, TINY_PROMPTS[:1]]


@dataclass(frozen=True)
class MoeCheckpoint:
    path: Path
    refs: list[Reference]  # transformers' fp32 greedy continuation of each of TINY_PROMPTS


@pytest.fixture(scope="module", params=list(MOE_CASES))
def checkpoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path
) -> MoeCheckpoint:
    path = tmp_path_factory.mktemp(request.param)
    model = build_checkpoint(path, MOE_CASES[request.param], tokenizer_dir).to(DEVICE)
    return MoeCheckpoint(path, [hf_greedy(model, p, MAX_NEW) for p in TINY_PROMPTS])


def _engine(path: Path, **kwargs: Any) -> Engine:
    # NOTE: 8 running requests: graphs for 1, 2, 4 and 8 only, a quick capture.
    return Engine(
        str(path), device=DEVICE, dtype="float32", max_total_tokens=2048, max_running_requests=8, **kwargs
    )


def _generate(engine: Engine, prompts: list[list[int]]) -> list[dict[str, Any]]:
    results = engine.generate(input_ids=prompts, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(results, list) and len(results) == len(prompts)
    return results


@pytest.mark.timeout(120)
def test_graphed_moe_decode_matches_transformers_and_counts_real_rows(
    checkpoint: MoeCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One engine per architecture (the GPU check's time is short): greedy equals
    transformers, both batches replay graphs, and the expert counts cover exactly the tokens
    forwarded (the graphs' padding rows, warm-ups and captures never counted)."""
    engine = _engine(checkpoint.path)
    graphs = engine.runner.cuda_graph
    assert graphs is not None, "MoE models decode in CUDA graphs"
    replayed: list[int] = []
    replay = graphs.replay

    def counting(batch: ForwardBatch) -> torch.Tensor:
        replayed.append(batch.batch_size)
        return replay(batch)

    monkeypatch.setattr(graphs, "replay", counting)
    moe = engine.runner.model_config.moe
    recorder = engine.runner.expert_recorder
    assert moe is not None and recorder is not None
    kernels = {expert_kernel(bs, moe.top_k, moe.num_experts, torch.device(DEVICE)) for bs in (1, 4)}
    assert kernels <= {"gather", "dense"}
    recorder.start()
    forwarded = 0
    for prompts in BATCHES:
        results = _generate(engine, prompts)
        for result, ref in zip(results, checkpoint.refs, strict=False):
            assert result["output_ids"] == ref.output_ids
            meta = result["meta_info"]
            assert [lp for lp, *_ in meta["output_token_logprobs"]] == pytest.approx(ref.logprobs, abs=1e-3)
            # NOTE: the uncached prompt, then every output token but the last (never fed back).
            forwarded += meta["prompt_tokens"] - meta["cached_tokens"] + meta["completion_tokens"] - 1
    recorder.stop()
    assert {1, 3} <= set(replayed)
    counts = recorder.counts.cpu()
    assert counts.sum(dim=1).tolist() == [forwarded * moe.top_k] * counts.shape[0]
