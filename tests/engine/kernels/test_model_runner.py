"""A whole model on the Triton path against the torch path; backend and CUDA-graph switches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from transformers import AutoModelForCausalLM, LlamaConfig

from engine.attention.cpu_backend import CpuAttention
from engine.attention.triton_backend import TritonAttention
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.engine_config import EngineConfig
from engine.runtime.model_runner import ModelRunner
from tests.engine.kernels.conftest import DEVICE

PROMPTS = [[5, 17, 99, 3, 42, 8, 61], [7, 7, 120]]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer GQA Llama with random weights (norm weights too), written by transformers."""
    path = tmp_path_factory.mktemp("tiny_llama")
    config = LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        initializer_range=0.1,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
    model.save_pretrained(str(path))
    return path


def _runner(path: Path, backend: str | None) -> ModelRunner:
    return ModelRunner(
        EngineConfig(
            model_path=str(path), device=DEVICE.type, dtype="float32", max_total_tokens=64,
            context_length=32, max_running_requests=4, attention_backend=backend,
        )
    )


def _prefill_then_decode(runner: ModelRunner) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of a ragged two-request prefill, then of one decode step on top."""
    table = runner.req_to_token_pool
    rows = [table.alloc() for _ in PROMPTS]
    slots = [runner.allocator.alloc(len(p) + 1) for p in PROMPTS]
    for row, own in zip(rows, slots):
        table.write(row, 0, own)
    lens = [len(p) for p in PROMPTS]

    def batch(mode: ForwardMode, ids: list[int], positions: list[int], loc: torch.Tensor,
              seq_lens: list[int], prefix: list[int], new: list[int]) -> ForwardBatch:
        return ForwardBatch(
            mode=mode,
            input_ids=torch.tensor(ids, device=DEVICE),
            positions=torch.tensor(positions, device=DEVICE),
            out_cache_loc=loc,
            req_pool_indices=torch.tensor(rows, device=DEVICE),
            seq_lens=torch.tensor(seq_lens, device=DEVICE),
            seq_lens_cpu=seq_lens,
            extend_prefix_lens_cpu=prefix,
            extend_seq_lens_cpu=new,
            req_to_token=table.req_to_token,
            kv_pool=runner.kv_pool,
        )

    prefill = batch(
        ForwardMode.EXTEND, [t for p in PROMPTS for t in p], [i for n in lens for i in range(n)],
        torch.cat([own[:n] for own, n in zip(slots, lens)]), lens, [0, 0], lens,
    )
    prefill_logits = runner.forward(prefill)
    decode = batch(
        ForwardMode.DECODE, [int(t) for t in prefill_logits.argmax(-1)], lens,
        torch.stack([own[n] for own, n in zip(slots, lens)]), [n + 1 for n in lens], lens, [1, 1],
    )
    return prefill_logits, runner.forward(decode)


def _route_layers_to_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends RMSNorm, rotary and SiLU-and-mul to their Triton kernels on this device too
    (on CPU: the interpreter), as they go on CUDA."""
    for module in ("engine.layers.rmsnorm", "engine.layers.rotary", "engine.models.llama"):
        monkeypatch.setattr(f"{module}.use_triton_kernels", lambda x: True)


def test_triton_attention_backend_matches_torch_native_in_the_model(tiny_checkpoint: Path) -> None:
    expected = _prefill_then_decode(_runner(tiny_checkpoint, "torch_native"))
    got = _prefill_then_decode(_runner(tiny_checkpoint, "triton"))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


def test_every_triton_kernel_in_the_model_matches_the_torch_path(
    tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _prefill_then_decode(_runner(tiny_checkpoint, "torch_native"))
    _route_layers_to_triton(monkeypatch)
    got = _prefill_then_decode(_runner(tiny_checkpoint, "triton"))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(DEVICE.type == "cuda", reason="checks the CPU defaults")
def test_cpu_defaults_to_the_cpu_kernel_backend_and_never_builds_cuda_graphs(tiny_checkpoint: Path) -> None:
    runner = _runner(tiny_checkpoint, None)
    assert isinstance(runner.attention, CpuAttention)
    assert runner.cuda_graph is None
    # NOTE: even a capture-safe backend gets no graphs off CUDA.
    triton_runner = _runner(tiny_checkpoint, "triton")
    assert isinstance(triton_runner.attention, TritonAttention)
    assert triton_runner.cuda_graph is None
