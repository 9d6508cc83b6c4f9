"""One real engine server on SmolLM2 for the structured-output tests, and the grammars they use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import EngineServer, engine_server

SERVED_NAME = "smollm2"


@pytest.fixture(scope="package")
def server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    args = (
        "--served-model-name",
        SERVED_NAME,
        "--skip-server-warmup",
        "--max-total-tokens",
        "16384",
    )
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("structured-logs"), *args) as running:
        yield running
