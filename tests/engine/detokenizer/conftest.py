"""Fixtures shared by the detokenizer tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir: Path) -> PreTrainedTokenizerBase:
    """SmolLM2's byte-level BPE tokenizer (``<|im_end|>`` is special id 2)."""
    return AutoTokenizer.from_pretrained(smollm2_dir)
