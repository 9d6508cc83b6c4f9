"""Open WebUI in headless Chromium against gomgr's router, through each of its connections.

The last test stops a model: keep it last (the package's engines are shared).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e_chat_ui.open_webui import Connection, OpenChat, OpenWebUI
from tests.e2e_chat_ui.stack import SECOND_MODEL, ChatStack

pytestmark = [pytest.mark.slow, pytest.mark.chat_ui]

DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "chat-ui.png"
# NOTE: set to 1 to refresh docs/chat-ui.png from the OpenAI-connection chat.
UPDATE_SCREENSHOT_ENV = "GOMGR_UPDATE_SCREENSHOT"


@pytest.mark.parametrize("connection", list(Connection))
def test_picks_the_model_and_chats(
    connection: Connection, chat_stack: ChatStack, open_webuis: dict[Connection, OpenWebUI],
    open_chat: OpenChat,
) -> None:  # fmt: skip
    webui = open_webuis[connection]
    chat = open_chat(webui)
    assert sorted(chat.listed_models()) == sorted(chat_stack.routed_models())
    # NOTE: each model came in through this connection, not the other one.
    assert {m["owned_by"] for m in webui.models()} == {str(connection)}
    chat.pick(chat_stack.model)
    assert "Paris" in chat.ask("What is the capital of France?")
    if connection is Connection.OPENAI and os.environ.get(UPDATE_SCREENSHOT_ENV) == "1":
        chat.screenshot(DOCS_SCREENSHOT)


def test_a_stopped_model_leaves_the_lists_on_reload(
    chat_stack: ChatStack, open_webuis: dict[Connection, OpenWebUI], open_chat: OpenChat
) -> None:
    chats = [open_chat(webui) for webui in open_webuis.values()]
    for chat in chats:
        assert SECOND_MODEL in chat.listed_models()
    chat_stack.stop_model(SECOND_MODEL)
    routed = chat_stack.routed_models()
    assert SECOND_MODEL not in routed and routed
    for chat in chats:
        chat.open()
        assert sorted(chat.listed_models()) == sorted(routed)
