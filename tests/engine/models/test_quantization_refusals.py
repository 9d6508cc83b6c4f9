"""Quantized checkpoints the engine does not load are refused at load, in one line naming the
variant (issue 26): other bit widths, AWQ's other kernel layouts, GPTQ v2, FP8's e5m2 weights,
other block sizes and static activation scales, compressed-tensors' int8 and other layouts,
unknown methods."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.core.errors import UnsupportedModelError
from engine.engine import Engine
from tests.engine.models.conftest import TINY_SHAPE, TOKENIZER_FILES

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **TINY_SHAPE}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
CT_WEIGHTS = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
CT_INPUTS = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}


def compressed_tensors(weights: dict[str, Any], inputs: dict[str, Any] | None = CT_INPUTS, **top: Any) -> dict[str, Any]:
    group = {"targets": ["Linear"], "weights": weights, "input_activations": inputs}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": group}, **top}


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({**GPTQ, "bits": 3}, "gptq with bits 3 is not supported (only 4)"),
    ({**GPTQ, "bits": 8}, "gptq with bits 8 is not supported (only 4)"),
    ({**AWQ, "bits": 8}, "awq with bits 8 is not supported (only 4)"),
    ({**AWQ, "version": "gemv"}, "awq version 'gemv' is not supported (only gemm)"),
    ({**AWQ, "version": "marlin"}, "awq version 'marlin' is not supported (only gemm)"),
    ({**AWQ, "version": "exllama"}, "awq version 'exllama' is not supported (only gemm)"),
    ({**AWQ, "zero_point": False}, "awq without zero_point is not supported"),
    ({**GPTQ, "group_size": 100}, "gptq with group_size 100 is not supported (supported: -1, 32, 64, 128)"),
    ({**GPTQ, "checkpoint_format": "gptq_v2"}, "gptq checkpoint_format 'gptq_v2' is not supported (only gptq, v1)"),
    (
        {"quant_method": "mystery-4bit", "bits": 4},
        "quantization 'mystery-4bit' is not supported (supported: awq, gptq, fp8, compressed-tensors)",
    ),
    ({**FP8, "fmt": "e5m2"}, "fp8 weights in e5m2 are not supported (only e4m3)"),
    ({**FP8, "activation_scheme": "static"}, "fp8 with activation_scheme 'static' is not supported (only dynamic)"),
    ({**FP8, "weight_block_size": [64, 64]}, "fp8 with weight_block_size [64, 64] is not supported (only [128, 128])"),
    (
        compressed_tensors({**CT_WEIGHTS, "type": "int"}),
        "compressed-tensors with int 8-bit weights is not supported (only float 8-bit: FP8)",
    ),
    (
        compressed_tensors({**CT_WEIGHTS, "strategy": "block"}),
        "compressed-tensors FP8 with weight strategy 'block' is not supported (supported: tensor, channel)",
    ),
    (
        compressed_tensors(CT_WEIGHTS, {**CT_INPUTS, "strategy": "tensor", "dynamic": False}),
        "compressed-tensors FP8 with static input activation scales is not supported",
    ),
    (
        compressed_tensors(CT_WEIGHTS, format="pack-quantized"),
        "compressed-tensors format 'pack-quantized' is not supported (only float-quantized: FP8)",
    ),
]


@pytest.fixture(scope="module")
def tokenizer_files(tokenizer_dir: Path) -> list[Path]:
    return [tokenizer_dir / name for name in TOKENIZER_FILES]


@pytest.mark.parametrize(("quantization", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_an_unsupported_variant_is_refused_in_one_line(
    tmp_path: Path, tokenizer_files: list[Path], quantization: dict[str, Any], message: str
) -> None:
    for file in tokenizer_files:
        shutil.copy(file, tmp_path / file.name)
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "quantization_config": quantization}))
    with pytest.raises(UnsupportedModelError) as refused:
        Engine(str(tmp_path), max_total_tokens=256, device="cpu")
    assert str(refused.value) == message


@pytest.mark.parametrize(("quantization", "method"), [(AWQ, "awq"), (FP8, "fp8")])
def test_a_checkpoint_of_a_family_the_loader_does_not_split_is_refused(
    tmp_path: Path, tokenizer_files: list[Path], quantization: dict[str, Any], method: str
) -> None:
    for file in tokenizer_files:
        shutil.copy(file, tmp_path / file.name)
    config = {**LLAMA, "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "quantization_config": quantization}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError) as refused:
        Engine(str(tmp_path), max_total_tokens=256, device="cpu")
    assert str(refused.value) == f"{method} checkpoints of Phi3ForCausalLM are not supported yet"
