"""The capture-safe expert kernels (gather, dense) of CUDA-graph MoE decode, on the CPU: they
equal the host-routed experts, trace without a single data-dependent op (which the routed
path cannot), keep greedy output token for token, and a captured graph's expert counts cover
only a batch's real rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from transformers import PreTrainedModel

from engine.engine import Engine
from engine.models import moe
from engine.models.expert_distribution import ExpertDistributionRecorder
from engine.models.moe import SparseMoeBlock
from engine.models.moe_static import ExpertKernel, expert_kernel
from tests.engine.models.conftest import TINY_PROMPTS, build_checkpoint, hf_greedy
from tests.engine.moe.conftest import MOE_CASES

STATIC: tuple[ExpertKernel, ...] = ("gather", "dense")
MAX_NEW = 6
GREEDY = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}


@dataclass(frozen=True)
class Case:
    model: PreTrainedModel
    engine: Engine
    blocks: list[SparseMoeBlock]


@pytest.fixture(scope="module", params=list(MOE_CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Case:
    path = tmp_path_factory.mktemp(request.param)
    model = build_checkpoint(path, MOE_CASES[request.param], tokenizer_dir)
    engine = Engine(str(path), max_total_tokens=1024, device="cpu", dtype="float32")
    blocks = [m for m in engine.runner.model.modules() if isinstance(m, SparseMoeBlock)]
    assert blocks
    return Case(model, engine, blocks)


def _hidden(block: SparseMoeBlock, tokens: int) -> torch.Tensor:
    torch.manual_seed(tokens)
    return torch.randn(tokens, block.gate.in_features)


@pytest.mark.parametrize("tokens", [1, 3, 16])
@pytest.mark.parametrize("kernel", STATIC)
def test_static_kernels_equal_the_routed_experts(case: Case, kernel: ExpertKernel, tokens: int) -> None:
    """fp32; only the summation order differs, hence 1e-5."""
    with torch.inference_mode():
        for block in case.blocks:
            x = _hidden(block, tokens)
            torch.testing.assert_close(block.forward_with(x, kernel), block.forward_with(x, "routed"), atol=1e-5, rtol=1e-5)


class _Kernel(nn.Module):
    def __init__(self, block: SparseMoeBlock, kernel: ExpertKernel) -> None:
        super().__init__()
        self.block = block
        self.kernel = kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block.forward_with(x, self.kernel)


@pytest.mark.parametrize("kernel", [*STATIC, "routed"])
def test_only_the_static_kernels_trace_without_data_dependent_ops(case: Case, kernel: ExpertKernel) -> None:
    """torch.export runs the block on fake tensors: reading routing on the host (``.tolist()``,
    ``.item()``, a branch on a value) raises; a nonzero or boolean mask would leave an
    unbacked (data-dependent) size in the graph. CUDA graph capture forbids both.

    NOTE: a fresh block of the model's routing shape: on the CPU the engine's gate runs a
    packed kernel that fake tensors cannot trace (CUDA runs nn.Linear)."""
    moe_config = case.engine.runner.model_config.moe
    assert moe_config is not None
    block = SparseMoeBlock(moe_config, case.blocks[0].gate.in_features, 0, None)
    torch.manual_seed(0)
    for param in block.parameters():
        nn.init.normal_(param, std=0.2)
    traced = _Kernel(block, kernel)
    x = _hidden(block, 4)
    if kernel == "routed":
        with pytest.raises(Exception, match="data-dependent|[Dd]ata dependent|unbacked"):
            torch.export.export(traced, (x,), strict=False)
        return
    program = torch.export.export(traced, (x,), strict=False)
    for node in program.graph.nodes:
        assert not free_unbacked_symbols(node.meta.get("val")), f"{node} has a data-dependent shape"
    with torch.inference_mode():
        torch.testing.assert_close(program.module()(x), traced(x))


@pytest.mark.parametrize("kernel", STATIC)
def test_greedy_is_unchanged_with_a_static_kernel(case: Case, kernel: ExpertKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every forward (prefill and decode) with the kernel CUDA decode uses forced on the
    CPU: transformers' greedy tokens and log-probs all the same."""
    monkeypatch.setattr(moe, "expert_kernel", lambda *_: kernel)
    results = case.engine.generate(input_ids=TINY_PROMPTS, sampling_params=GREEDY, return_logprob=True)
    assert isinstance(results, list)
    for result, prompt in zip(results, TINY_PROMPTS, strict=True):
        ref = hf_greedy(case.model, prompt, MAX_NEW)
        assert result["output_ids"] == ref.output_ids
        ours = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        assert ours == pytest.approx(ref.logprobs, abs=1e-4)


def test_a_captured_forward_counts_only_the_replayed_rows(case: Case) -> None:
    """What CudaGraphRunner does around capture and replay, on the CPU: the routing kept
    while capturing is counted after a replay, real rows only, warm-ups never."""
    block = case.blocks[0]
    num_experts = block.experts.num_experts
    recorder = ExpertDistributionRecorder([block.layer_id], num_experts, torch.device("cpu"))
    block.recorder = recorder
    try:
        recorder.start()
        x = _hidden(block, 8)
        # NOTE: as in CudaGraphRunner: the model forward in inference mode, the count outside.
        with torch.inference_mode(), recorder.capturing() as captured:
            block.forward_with(x, "dense")
        assert int(recorder.counts.sum()) == 0, "capturing counts nothing"
        recorder.record_replay(captured, 5)
        with torch.inference_mode():
            _, expert_ids = moe.route(block.gate(x), block.top_k, block.norm_topk_prob)
        expected = torch.bincount(expert_ids[:5].flatten(), minlength=num_experts)
        assert recorder.counts[0].tolist() == expected.tolist()
    finally:
        block.recorder = case.engine.runner.expert_recorder


def test_cuda_decode_picks_gather_then_dense_and_the_cpu_routed() -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    # NOTE: Qwen3-30B-A3B's routing: 128 experts, top-8.
    assert [expert_kernel(t, 8, 128, cuda) for t in (1, 5, 6, 256, 257)] == [
        "gather", "gather", "dense", "dense", "routed"
    ]
    assert expert_kernel(1, 8, 128, cpu) == "routed"
