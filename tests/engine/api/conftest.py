"""One real engine server on SmolLM2 shared by the API-surface test modules, on each way of
serving HTTP the engine has (issue 29)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import EngineServer, engine_server

SERVED_NAME = "smollm2"
# NOTE: a non-default Vertex route, so the tests also show $AIP_PREDICT_ROUTE is honoured.
VERTEX_ROUTE = "/v1/endpoints/test:predict"
# NOTE: the HTTP serving variants the whole API suite runs on: a name (the test id) and the
# server flags it adds. Every server of the suite (this shared one and the modules' own)
# takes them, through the session fixture ``serving_flags``.
# NOTE (issue 29): the serving options in one variant beside the default, so the whole API
# suite runs on Granian with HTTP/2 *and* over 3 tokenizer workers at the cost of one pass
# (a pass per option doubled the suite's longest part); each option alone has its own tests
# (test_api_http2.py, tests/engine/server/test_server_tokenizer_workers.py).
SERVING_VARIANTS: dict[str, tuple[str, ...]] = {
    "uvicorn": (),
    "granian-http2-3-workers": ("--enable-http2", "--tokenizer-worker-num", "3"),
}


@pytest.fixture(scope="session", params=list(SERVING_VARIANTS))
def serving_flags(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return SERVING_VARIANTS[request.param]


@pytest.fixture(scope="session")
def server(
    smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory, serving_flags: tuple[str, ...]
) -> Iterator[EngineServer]:
    """Plain server (no API key, no metrics); a module that needs flags defines its own."""
    args = ("--served-model-name", SERVED_NAME, "--skip-server-warmup", "--max-total-tokens", "16384")
    env = {"AIP_PREDICT_ROUTE": VERTEX_ROUTE}
    logs = tmp_path_factory.mktemp("api-logs")
    with engine_server(smollm2_dir, logs, *args, *serving_flags, env=env) as running:
        yield running
