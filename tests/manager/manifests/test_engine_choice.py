"""The engine a model gets: gomgr's where it serves the model, the manifest's fallback
(vLLM unless an override says otherwise) where config.json names what it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.config.architectures import (
    ENCODER_ARCHITECTURES,
    REWARD_ARCHITECTURES,
    SPLIT_PROJECTION_DECODERS,
    SUPPORTED_ARCHITECTURES,
)
from engine.config.fp8_quantization import (
    COMPRESSED_TENSORS_FORMATS,
    COMPRESSED_TENSORS_STRATEGIES,
    FP8_ACTIVATION_SCHEMES,
    FP8_BLOCK_SIZES,
    FP8_FORMATS,
    FP8_METHODS,
)
from engine.config.model_config import SUPPORTED_ROPE_TYPES
from engine.config.quantization import (
    AWQ_VERSIONS,
    GPTQ_CHECKPOINT_FORMATS,
    INT4_BITS,
    INT4_GROUP_SIZES,
    INT4_METHODS,
)
from engine.gguf.hparams import GGUF_ARCHITECTURES
from manager.manifests.architecture import traits_of
from manager.manifests.engine_support import (
    GOMGR_ARCHITECTURES,
    GOMGR_AWQ_VERSIONS,
    GOMGR_COMPRESSED_TENSORS_FORMATS,
    GOMGR_COMPRESSED_TENSORS_STRATEGIES,
    GOMGR_FP8_ACTIVATION_SCHEMES,
    GOMGR_FP8_ARCHITECTURES,
    GOMGR_FP8_BLOCK_SIZES,
    GOMGR_FP8_FORMATS,
    GOMGR_FP8_METHODS,
    GOMGR_GGUF_ARCHITECTURES,
    GOMGR_GPTQ_FORMATS,
    GOMGR_GROUP_SIZES,
    GOMGR_INT4_ARCHITECTURES,
    GOMGR_INT4_BITS,
    GOMGR_QUANTIZATIONS,
    GOMGR_ROPE_TYPES,
    ModelTraits,
    unserved_by,
)
from manager.manifests.errors import ManifestError
from manager.manifests.flags import to_engine_flags
from manager.manifests.resolve import resolve_manifest
from tests.support.tiny_gguf import write_tiny_gguf

GOMGR = Path(sys.executable).parent / "gomgr"
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
AWQ = {**LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
AWQ_GEMV = {**LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": False}
FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def compressed_tensors(weights_type: str, strategy: str) -> dict[str, object]:
    weights = {"num_bits": 8, "type": weights_type, "strategy": strategy, "symmetric": True, "dynamic": False}
    group = {"targets": ["Linear"], "weights": weights, "input_activations": {"num_bits": 8, "type": weights_type, "dynamic": True}}
    return {"quant_method": "compressed-tensors", "format": f"{weights_type}-quantized", "config_groups": {"group_0": group}}


def model_dir(root: Path, config: Mapping[str, object]) -> Path:
    """A model directory as a hub repo holds it: config.json and one (tiny) safetensors file."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    save_file({"lm_head.qweight": torch.zeros(8, 4, dtype=torch.int32)}, root / "model.safetensors")
    return root


def test_the_managers_tables_equal_the_engines() -> None:
    engine = {*SUPPORTED_ARCHITECTURES, *REWARD_ARCHITECTURES, *ENCODER_ARCHITECTURES}
    assert engine == GOMGR_ARCHITECTURES
    assert set(SUPPORTED_ROPE_TYPES) == GOMGR_ROPE_TYPES
    assert {*INT4_METHODS, *FP8_METHODS} == GOMGR_QUANTIZATIONS and INT4_BITS == GOMGR_INT4_BITS
    assert set(FP8_METHODS) == GOMGR_FP8_METHODS and set(FP8_FORMATS) == GOMGR_FP8_FORMATS
    assert set(FP8_BLOCK_SIZES) == GOMGR_FP8_BLOCK_SIZES and set(FP8_ACTIVATION_SCHEMES) == GOMGR_FP8_ACTIVATION_SCHEMES
    assert set(COMPRESSED_TENSORS_FORMATS) == GOMGR_COMPRESSED_TENSORS_FORMATS
    assert set(COMPRESSED_TENSORS_STRATEGIES) == GOMGR_COMPRESSED_TENSORS_STRATEGIES
    assert set(SPLIT_PROJECTION_DECODERS) == GOMGR_FP8_ARCHITECTURES
    assert set(AWQ_VERSIONS) == GOMGR_AWQ_VERSIONS and set(GPTQ_CHECKPOINT_FORMATS) == GOMGR_GPTQ_FORMATS
    assert set(INT4_GROUP_SIZES) == GOMGR_GROUP_SIZES
    assert set(SPLIT_PROJECTION_DECODERS) == GOMGR_INT4_ARCHITECTURES
    assert set(GGUF_ARCHITECTURES) == GOMGR_GGUF_ARCHITECTURES


@pytest.mark.parametrize(
    ("config", "unserved"),
    [
        (AWQ_GEMV, "awq version 'gemv'"),
        ({**LLAMA, "quantization_config": {**GPTQ, "bits": 8}}, "gptq with bits 8"),
        ({**LLAMA, "quantization_config": {**GPTQ, "checkpoint_format": "gptq_v2"}}, "gptq checkpoint_format 'gptq_v2'"),
        (
            {**LLAMA, "quantization_config": {**FP8_BLOCK, "activation_scheme": "static"}},
            "fp8 with activation_scheme 'static'",
        ),
        ({**LLAMA, "quantization_config": {**FP8_BLOCK, "fmt": "e5m2"}}, "fp8 weights in e5m2"),
        ({**LLAMA, "quantization_config": compressed_tensors("int", "channel")}, "compressed-tensors format 'int-quantized'"),
        ({**LLAMA, "quantization_config": {"quant_method": "fbgemm_fp8"}}, "quantization 'fbgemm_fp8'"),
        (
            {"architectures": ["Gemma2ForCausalLM"], "quantization_config": AWQ["quantization_config"]},
            "awq checkpoints of 'Gemma2ForCausalLM'",
        ),
        ({"architectures": ["Gemma3ForConditionalGeneration"]}, "architecture 'Gemma3ForConditionalGeneration'"),
        ({"architectures": ["PhiMoEForCausalLM"]}, "architecture 'PhiMoEForCausalLM'"),
        ({**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}, "RoPE type 'dynamic'"),
        ({**LLAMA, "rope_parameters": {"rope_type": "mrope"}}, "RoPE type 'mrope'"),
    ],
)
def test_what_gomgr_does_not_serve_goes_to_vllm_and_says_why(
    tmp_path: Path, config: dict[str, object], unserved: str
) -> None:
    path = model_dir(tmp_path / "model", config)
    effective = resolve_manifest(str(path), traits_of(path))
    assert effective.engine == "vllm"
    assert effective.image == "vllm/vllm-openai:latest"
    assert effective.engine_reason == f"gomgr's engine does not serve {unserved}"
    assert effective.selected_by.startswith("fallback 'vllm-upstream' over default")
    assert to_engine_flags(effective, "/model")[:2] == ["--model", "/model"]


@pytest.mark.parametrize(
    "config",
    [
        {**LLAMA, "rope_scaling": {"rope_type": "llama3"}},
        {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        {"architectures": ["Gemma2ForCausalLM"]},
        {"architectures": ["Phi3ForCausalLM"], "rope_scaling": {"type": "longrope"}},
        AWQ,
        {**LLAMA, "quantization_config": GPTQ},
        {**LLAMA, "quantization_config": {**GPTQ, "group_size": -1, "sym": True, "checkpoint_format": "gptq"}},
        {**LLAMA, "quantization_config": FP8_BLOCK},
        {**LLAMA, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}},
        {**LLAMA, "quantization_config": compressed_tensors("float", "tensor")},
        {**LLAMA, "quantization_config": compressed_tensors("float", "channel")},
    ],
    ids=[
        "llama3-rope", "yarn-rope", "gemma2", "phi3-longrope", "awq-gemm", "gptq-act-order", "gptq-per-row",
        "fp8-block", "fp8-per-tensor", "ct-fp8-tensor", "ct-fp8-channel",
    ],
)
def test_a_model_gomgr_serves_stays_on_gomgr(tmp_path: Path, config: dict[str, object]) -> None:
    path = model_dir(tmp_path / "model", config)
    effective = resolve_manifest(str(path), traits_of(path))
    assert (effective.engine, effective.engine_reason) == ("gomgr", None)


def test_the_family_manifest_keeps_its_parsers_under_the_fallback() -> None:
    traits = ModelTraits("Qwen2ForCausalLM", quantization="fbgemm_fp8")
    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct-FP8", traits)
    assert (effective.engine, effective.tool_call_parser) == ("vllm", "qwen25")
    assert effective.context_length == resolve_manifest("Qwen/Qwen2.5-7B-Instruct", None).context_length


def test_an_override_picks_sglang_as_the_fallback(overrides_dir: Path) -> None:
    (overrides_dir / "fp8-on-sglang.yaml").write_text("repo: 'someone/*-FP8'\nfallback: sglang-upstream\n")
    effective = resolve_manifest("someone/model-FP8", ModelTraits("LlamaForCausalLM", "fbgemm_fp8"))
    assert effective.engine == "sglang"
    assert effective.engine_reason == "gomgr's engine does not serve quantization 'fbgemm_fp8'"
    assert resolve_manifest("other/model-FP8", ModelTraits("LlamaForCausalLM", "fbgemm_fp8")).engine == "vllm"


def test_an_override_without_fallback_refuses_in_one_line(overrides_dir: Path) -> None:
    (overrides_dir / "no-fallback.yaml").write_text("repo: 'someone/*'\nfallback: null\n")
    with pytest.raises(ManifestError) as caught:
        resolve_manifest("someone/model", ModelTraits("PhiMoEForCausalLM"))
    assert caught.value.message == (
        "gomgr's engine does not serve architecture 'PhiMoEForCausalLM', and manifest default "
        "names no fallback"
    )


def test_a_quantization_no_engine_serves_is_one_error_line() -> None:
    with pytest.raises(ManifestError) as caught:
        resolve_manifest("someone/model", ModelTraits("LlamaForCausalLM", "mystery-4bit"))
    assert caught.value.message == (
        "no engine serves someone/model: gomgr's engine does not serve quantization "
        "'mystery-4bit'; vllm does not serve quantization 'mystery-4bit'"
    )
    assert unserved_by("sglang", ModelTraits(quantization="mystery-4bit")) is not None


def test_an_explicit_variant_is_never_replaced() -> None:
    traits = ModelTraits("LlamaForCausalLM", "awq")
    effective = resolve_manifest("someone/model", traits, variant="sglang-upstream")
    assert (effective.engine, effective.engine_reason) == ("sglang", None)


def _gomgr(config_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOMGR_CONFIG_DIR": str(config_dir), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [str(GOMGR), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_doctor_and_manifests_show_name_the_same_decision(tmp_path: Path, config_dir: Path) -> None:
    path = model_dir(tmp_path / "awq-model", AWQ_GEMV)
    line = "engine: vllm (gomgr's engine does not serve awq version 'gemv')"
    doctor = _gomgr(config_dir, "doctor", str(path), "--runtime", "process")
    assert line in doctor.stdout, doctor.stdout + doctor.stderr
    as_json = json.loads(_gomgr(config_dir, "doctor", str(path), "--json").stdout)
    assert as_json["engine"] == {
        "name": "vllm", "reason": "gomgr's engine does not serve awq version 'gemv'", "error": None,
    }
    shown = _gomgr(config_dir, "manifests", "show", str(path))
    assert line in shown.stdout, shown.stdout + shown.stderr

    unknown = model_dir(tmp_path / "odd-model", {**LLAMA, "quantization_config": {"quant_method": "odd"}})
    refused = _gomgr(config_dir, "doctor", str(unknown), "--runtime", "process")
    assert refused.returncode == 1
    assert "engine: none (no engine serves" in refused.stdout


@pytest.mark.parametrize(("gguf_arch", "engine"), [("llama", "gomgr"), ("gemma2", "vllm"), ("phi3", "vllm")])
def test_a_gguf_file_goes_to_gomgr_only_where_its_gguf_loader_reads_the_family(
    tmp_path: Path, gguf_arch: str, engine: str
) -> None:
    path = write_tiny_gguf(tmp_path / f"tiny-{gguf_arch}.gguf", arch=gguf_arch)
    effective = resolve_manifest(str(path), traits_of(path))
    assert effective.engine == engine
    if engine == "vllm":
        assert effective.engine_reason == f"gomgr's engine does not serve GGUF architecture {gguf_arch!r}"
