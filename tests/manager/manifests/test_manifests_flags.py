"""The flags a manifest implies are accepted by the engine's own parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.server.server_args import build_parser
from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.planning import plan_start
from manager.manifests.engine_support import ModelTraits
from manager.manifests.flags import tensor_parallel_size, to_engine_flags
from manager.manifests.resolve import resolve_manifest
from tests.manager.readiness.test_readiness_gpu import FakeNvmlProbe


@pytest.mark.parametrize(
    ("repo", "architecture"),
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "LlamaForCausalLM"),
        ("Qwen/Qwen2.5-7B-Instruct", None),
        ("someone/x", "Qwen3ForCausalLM"),
        ("meta-llama/Llama-3.1-8B-Instruct", None),
        ("mistralai/Mistral-7B-Instruct-v0.3", None),
        ("someone/unknown", None),
    ],
)
def test_engine_parser_accepts_the_flags(
    smollm2_dir: Path, repo: str, architecture: str | None
) -> None:
    effective = resolve_manifest(repo, ModelTraits(architecture))
    args = build_parser().parse_args(to_engine_flags(effective, smollm2_dir))
    assert args.model_path == str(smollm2_dir)
    assert args.served_model_name == effective.served_name
    assert args.context_length == effective.context_length
    assert args.tool_call_parser == effective.tool_call_parser
    assert args.reasoning_parser == effective.reasoning_parser
    assert args.trust_remote_code is True


def test_override_engine_args_reach_the_engine(smollm2_dir: Path, overrides_dir: Path) -> None:
    (overrides_dir / "smol.yaml").write_text(
        "overrides: smollm2\nengine_args: [--chunked-prefill-size, '512', --enable-metrics]\n"
    )
    effective = resolve_manifest("HuggingFaceTB/SmolLM2-135M-Instruct", None)
    args = build_parser().parse_args(to_engine_flags(effective, smollm2_dir))
    assert (args.chunked_prefill_size, args.enable_metrics) == (512, True)


def test_a_manifests_tp_size_reaches_the_engine_and_readiness(smollm2_dir: Path, overrides_dir: Path) -> None:
    (overrides_dir / "smol.yaml").write_text("overrides: smollm2\nengine_args: [--tp-size, '3']\n")
    effective = resolve_manifest("HuggingFaceTB/SmolLM2-135M-Instruct", None)
    assert build_parser().parse_args(to_engine_flags(effective, smollm2_dir)).tp_size == 3
    assert tensor_parallel_size(effective.engine_args) == 3
    assert tensor_parallel_size(("--tensor-parallel-size=2",)) == 2
    assert tensor_parallel_size(("--enable-metrics",)) == 1
    with pytest.raises(StartBlocked, match=r"--gpus 0 gives 1 GPU\(s\); the manifest's --tp-size 3 needs 3"):
        plan_start("HuggingFaceTB/SmolLM2-135M-Instruct", smollm2_dir, "process", None, None, gpus="0")


def test_a_tp_engine_is_pinned_to_the_gpus_with_most_room_fake_nvml(
    smollm2_dir: Path, overrides_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine has no NVIDIA GPU: readiness sees three through the fake NVML."""
    monkeypatch.setattr("manager.readiness.start.NvmlProbe", lambda: FakeNvmlProbe(10.0, 40.0, 30.0))
    (overrides_dir / "smol.yaml").write_text("overrides: smollm2\nengine_args: [--tp-size, '2']\n")
    plan = plan_start("HuggingFaceTB/SmolLM2-135M-Instruct", smollm2_dir, "process", None, None)
    assert ("CUDA_VISIBLE_DEVICES", "1,2") in plan.env
    pinned = plan_start("HuggingFaceTB/SmolLM2-135M-Instruct", smollm2_dir, "process", None, None, gpus="0,1")
    assert ("CUDA_VISIBLE_DEVICES", "0,1") in pinned.env


def test_vllm_flags_use_vllms_spelling() -> None:
    effective = resolve_manifest("Qwen/Qwen3-8B", None, variant="vllm-upstream")
    assert to_engine_flags(effective, "/model") == [
        "--model", "/model", "--served-model-name", "Qwen/Qwen3-8B", "--trust-remote-code",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--reasoning-parser", "qwen3",
    ]
