"""Open WebUI as a user runs it offline against gomgr's router: one connection, no login."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from tests.e2e_chat_ui.chat_page import ChatPage
from tests.e2e_chat_ui.processes import Served, launch
from tests.e2e_chat_ui.stack import ChatStack
from tests.support.engine_process import free_port

START_TIMEOUT_S = 300.0
# NOTE: the settings docs/chat-ui.md gives: no hub, no login, no extra upstream requests per
# message (title, follow-up, tag and autocomplete generation each make one).
OFFLINE = {
    "OFFLINE_MODE": "True",
    "HF_HUB_OFFLINE": "1",
    "RAG_EMBEDDING_MODEL": "",
    "WEBUI_AUTH": "False",
    "ENABLE_VERSION_UPDATE_CHECK": "False",
    "ENABLE_TITLE_GENERATION": "False",
    "ENABLE_FOLLOW_UP_GENERATION": "False",
    "ENABLE_TAGS_GENERATION": "False",
    "ENABLE_AUTOCOMPLETE_GENERATION": "False",
}
# NOTE: "legacy" function calling: Open WebUI 0.12 otherwise sends its built-in tools with
# every message, which an engine without a tool-call parser (SmolLM2's) refuses. Greedy and
# short, so the answer is known and quick on a CPU.
MODEL_PARAMS = {"function_calling": "legacy", "temperature": 0, "max_tokens": 24}


class Connection(StrEnum):
    OPENAI = "openai"
    OLLAMA = "ollama"


@dataclass
class OpenWebUI:
    connection: Connection
    port: int
    served: Served

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def models(self) -> list[dict[str, Any]]:
        """GET /api/models as the (auto-created) admin: what its model picker is built from."""
        signin = httpx.post(f"{self.url}/api/v1/auths/signin", json={"email": "", "password": ""}, timeout=30)
        signin.raise_for_status()
        headers = {"authorization": f"Bearer {signin.json()['token']}"}
        reply = httpx.get(f"{self.url}/api/models", headers=headers, timeout=60)
        reply.raise_for_status()
        return list(reply.json()["data"])


OpenChat = Callable[[OpenWebUI], ChatPage]  # the `open_chat` fixture: a chat page, opened


def connection_env(connection: Connection, stack: ChatStack) -> dict[str, str]:
    if connection is Connection.OPENAI:
        return {
            "ENABLE_OPENAI_API": "True",
            "OPENAI_API_BASE_URL": f"{stack.router_url}/v1",
            "OPENAI_API_KEY": "any",
            "ENABLE_OLLAMA_API": "False",
        }
    return {"ENABLE_OPENAI_API": "False", "ENABLE_OLLAMA_API": "True", "OLLAMA_BASE_URL": stack.ollama_url}


def launch_open_webui(
    executable: Path, connection: Connection, stack: ChatStack, root: Path
) -> OpenWebUI:
    """Start `open-webui serve` with a fresh data dir (its settings live in its database)."""
    data_dir = root / f"open-webui-{connection}"
    data_dir.mkdir()
    port = free_port()
    env = {
        **os.environ,
        **OFFLINE,
        **connection_env(connection, stack),
        "DATA_DIR": str(data_dir),
        "WEBUI_SECRET_KEY": secrets.token_urlsafe(32),
        "DEFAULT_MODEL_PARAMS": json.dumps(MODEL_PARAMS),
        # NOTE: no "What's New" modal over the page on the first visit.
        "DEFAULT_INTERFACE_SETTINGS": json.dumps({"showChangelog": False}),
    }
    command = [str(executable), "serve", "--host", "127.0.0.1", "--port", str(port)]
    return OpenWebUI(connection, port, launch(command, env, root / f"open-webui-{connection}.log"))
