"""Models on demand in Open WebUI (issue #23 done-when): with only the supervisor running
(`gomgr router start`; `gomgr serve` for the Ollama connection) and SmolLM2 in the store, no
`gomgr start`, Open WebUI's model picker lists the unloaded model and a chat with it gets an
answer, the first request loading it; through each of its connections."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.models.store import ModelStore, RepoId
from manager.state.records import RecordStore
from manager.supervisor.catalog import served_name
from manager.supervisor.client import catalog_states
from tests.e2e_chat_ui.open_webui import (
    START_TIMEOUT_S,
    Connection,
    OpenChat,
    OpenWebUI,
    launch_open_webui,
)
from tests.e2e_chat_ui.stack import SMOLLM2_REPO, ChatStack, isolated_stack

pytestmark = [pytest.mark.slow, pytest.mark.chat_ui]

# NOTE: the engine's start (on a busy CPU, a minute or more) comes before the answer.
LOAD_AND_ANSWER_MS = 420_000


@pytest.fixture(params=list(Connection))
def connection(request: pytest.FixtureRequest) -> Connection:
    return Connection(request.param)


@pytest.fixture
def on_demand_stack(
    tmp_path: Path, smollm2_dir: Path, connection: Connection
) -> Iterator[ChatStack]:
    """OpenAI: `gomgr router start`, as the issue's user runs it; Ollama: `gomgr serve
    --ollama-port` (the background router has no Ollama port)."""
    stack = isolated_stack(tmp_path, smollm2_dir.parents[1])
    try:
        if connection is Connection.OPENAI:
            stack.start_background_router()
        else:
            stack.serve_router(tmp_path / "router.log")
        yield stack
    finally:
        stack.close()


@pytest.fixture
def webui(
    tmp_path: Path, open_webui_executable: Path, on_demand_stack: ChatStack, connection: Connection
) -> Iterator[OpenWebUI]:
    started = launch_open_webui(open_webui_executable, connection, on_demand_stack, tmp_path)
    try:
        started.served.wait_ready(f"{started.url}/health", START_TIMEOUT_S)
        yield started
    finally:
        started.served.stop()


def test_lists_an_unloaded_model_and_chats_with_it(
    on_demand_stack: ChatStack, webui: OpenWebUI, open_chat: OpenChat, smollm2_dir: Path
) -> None:
    stored = ModelStore(smollm2_dir.parents[1]).get(RepoId.parse(SMOLLM2_REPO))
    assert stored is not None
    model = served_name(stored)
    states = catalog_states(on_demand_stack.router_url)
    assert states is not None and states[model] == "unloaded"
    assert RecordStore(on_demand_stack.state).all() == []

    chat = open_chat(webui)
    assert model in chat.listed_models()
    chat.pick(model)
    assert "Paris" in chat.ask("What is the capital of France?", timeout_ms=LOAD_AND_ANSWER_MS)

    states = catalog_states(on_demand_stack.router_url)
    assert states is not None and states[model] == "loaded"
    [engine] = RecordStore(on_demand_stack.state).all()
    assert engine.labels.get("gomgr.on_demand") == "1"
