"""MoE decode in CUDA graphs, on a GPU: every supported MoE architecture (tiny random-weight
checkpoints written by transformers) replays captured decode graphs, both capture-safe expert
kernels among them (gather at batch 1, dense at the padded batch 4), and in fp32 its greedy
output equals transformers' on the GPU; the expert-distribution counts under graphs equal the
eager engine's, padding rows never counted.

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


@pytest.mark.timeout(180)
def test_graphed_moe_decode_matches_transformers(
    checkpoint: MoeCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert moe is not None
    kernels = {expert_kernel(bs, moe.top_k, moe.num_experts, torch.device(DEVICE)) for bs in (1, 4)}
    assert kernels <= {"gather", "dense"}
    for prompts in BATCHES:
        results = _generate(engine, prompts)
        for result, ref in zip(results, checkpoint.refs, strict=False):
            assert result["output_ids"] == ref.output_ids
            ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
            assert ours == pytest.approx(ref.logprobs, abs=1e-3)
    assert {1, 3} <= set(replayed)


def _counts(engine: Engine) -> tuple[torch.Tensor, int]:
    """The expert counts of generating BATCHES, and the tokens forwarded meanwhile: the
    uncached prompt, then every output token but the last (never fed back)."""
    recorder = engine.runner.expert_recorder
    assert recorder is not None
    engine.flush_cache()
    recorder.start()
    forwarded = 0
    for prompts in BATCHES:
        for result in _generate(engine, prompts):
            meta = result["meta_info"]
            forwarded += meta["prompt_tokens"] - meta["cached_tokens"] + meta["completion_tokens"] - 1
    recorder.stop()
    return recorder.counts.cpu(), forwarded


@pytest.mark.timeout(180)
def test_expert_counts_under_graphs_equal_eager(checkpoint: MoeCheckpoint) -> None:
    graphed = _engine(checkpoint.path)
    eager = _engine(checkpoint.path, disable_cuda_graph=True)
    assert graphed.runner.cuda_graph is not None and eager.runner.cuda_graph is None
    moe = graphed.runner.model_config.moe
    assert moe is not None
    counts, forwarded = _counts(graphed)
    assert counts.sum(dim=1).tolist() == [forwarded * moe.top_k] * counts.shape[0]
    eager_counts, eager_forwarded = _counts(eager)
    assert eager_forwarded == forwarded
    assert torch.equal(counts, eager_counts)
