"""One real engine server on SmolLM2 shared by the API-surface test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import EngineServer, engine_server

SERVED_NAME = "smollm2"
# NOTE: a non-default Vertex route, so the tests also show $AIP_PREDICT_ROUTE is honoured.
VERTEX_ROUTE = "/v1/endpoints/test:predict"


# NOTE: the serving variants every test on the shared server runs against: (id, extra flags).
SERVER_VARIANTS: list[tuple[str, tuple[str, ...]]] = [
    ("default", ()),
    ("tokenizer-workers-3", ("--tokenizer-worker-num", "3")),
]


@pytest.fixture(scope="session", params=[flags for _, flags in SERVER_VARIANTS], ids=[name for name, _ in SERVER_VARIANTS])
def server(
    request: pytest.FixtureRequest, smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineServer]:
    """Plain server (no API key, no metrics), once per serving variant; a module that needs
    flags defines its own."""
    variant: tuple[str, ...] = request.param
    args = ("--served-model-name", SERVED_NAME, "--skip-server-warmup", "--max-total-tokens", "16384", *variant)
    env = {"AIP_PREDICT_ROUTE": VERTEX_ROUTE}
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("api-logs"), *args, env=env) as running:
        yield running
