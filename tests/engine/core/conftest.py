"""Fixtures for engine-core tests on the real SmolLM2-135M-Instruct weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from engine.engine import Engine


@pytest.fixture(scope="session")
def smol_engine(smollm2_dir: Path) -> Engine:
    return Engine(str(smollm2_dir), max_total_tokens=16384, chunked_prefill_size=4096)


@pytest.fixture(scope="session")
def smol_overlap_engine(smollm2_dir: Path) -> Engine:
    """``smol_engine`` with the overlap scheduler on."""
    return Engine(str(smollm2_dir), max_total_tokens=16384, chunked_prefill_size=4096, enable_overlap_schedule=True)


@pytest.fixture(scope="session")
def hf_smol(smollm2_dir: Path) -> PreTrainedModel:
    return AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32).eval()


def chat(engine: Engine, question: str) -> list[int]:
    """Token ids of ``question`` as a user turn under the model's chat template."""
    text = engine.tokenizer.render_chat([{"role": "user", "content": question}], add_generation_prompt=True)
    return engine.tokenizer.encode(text, add_special_tokens=False)
