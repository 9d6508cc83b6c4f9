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


OnDemand = dict[Connection, tuple[ChatStack, OpenWebUI]]


@pytest.fixture(scope="module")
def on_demand(
    tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path, open_webui_executable: Path
) -> Iterator[OnDemand]:
    """Per connection, a stack with no engine and an Open WebUI on it, the Open WebUIs started
    together (each takes ~20-60 s). OpenAI: `gomgr router start`, as the issue's user runs it;
    Ollama: `gomgr serve --ollama-port` (the background router has no Ollama port)."""
    started: OnDemand = {}
    stacks: list[ChatStack] = []
    try:
        for connection in Connection:
            root = tmp_path_factory.mktemp(f"on_demand_{connection}")
            stacks.append(stack := isolated_stack(root, smollm2_dir.parents[1]))
            if connection is Connection.OPENAI:
                stack.start_background_router()
            else:
                stack.serve_router(root / "router.log")
            started[connection] = (stack, launch_open_webui(open_webui_executable, connection, stack, root))
        for _, webui in started.values():
            webui.served.wait_ready(f"{webui.url}/health", START_TIMEOUT_S)
        yield started
    finally:
        for _, webui in started.values():
            webui.served.stop()
        for stack in stacks:
            stack.close()


@pytest.mark.parametrize("connection", list(Connection))
def test_lists_an_unloaded_model_and_chats_with_it(
    connection: Connection, on_demand: OnDemand, open_chat: OpenChat, smollm2_dir: Path
) -> None:
    on_demand_stack, webui = on_demand[connection]
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
