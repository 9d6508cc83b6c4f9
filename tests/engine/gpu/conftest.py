"""The tokenizer for the GPU tests' random-weight checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tokenizer_dir(request: pytest.FixtureRequest) -> Path:
    """SmolLM2's tokenizer files: $GOMGR_TEST_TOKENIZER_DIR when set, else the model store.

    NOTE: GPU machines may have no network (bench/gpu_check.sh copies the two files over
    and sets the variable), so the store's `pull_model` is asked only when it is unset.
    """
    given = os.environ.get("GOMGR_TEST_TOKENIZER_DIR")
    if given:
        return Path(given)
    return request.getfixturevalue("smollm2_dir")
