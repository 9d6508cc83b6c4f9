"""Fixtures shared by the detokenizer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.text.tokenizer import TextTokenizer
from engine.text.tokenizer_files import load_tokenizer


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir: Path) -> TextTokenizer:
    """SmolLM2's byte-level BPE tokenizer (``<|im_end|>`` is special id 2)."""
    return load_tokenizer(str(smollm2_dir))
