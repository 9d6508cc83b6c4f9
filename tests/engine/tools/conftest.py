"""One real SmolLM2 server with tool calling, shared by the tool-calling API test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.engine.tools.tool_defs import MODEL
from tests.support.engine_process import EngineServer, engine_server


@pytest.fixture(scope="package")
def server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    args = (
        "--served-model-name", MODEL, "--skip-server-warmup", "--max-total-tokens", "8192",
        "--tool-call-parser", "qwen25", "--reasoning-parser", "qwen3",
    )  # fmt: skip
    with engine_server(smollm2_dir, tmp_path_factory.mktemp("tools-logs"), *args) as running:
        yield running


@pytest.fixture(scope="package")
def client(server: EngineServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=300)


@pytest.fixture(scope="package")
def claude(server: EngineServer) -> Anthropic:
    return Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=300)
