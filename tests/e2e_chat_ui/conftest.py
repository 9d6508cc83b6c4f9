"""Fixtures for chat clients end to end: gomgr's router and SmolLM2, the official `ollama`
client, and Open WebUI in headless Chromium (tests marked `chat_ui`).

Where Open WebUI's venv or chromium cannot be installed these tests skip, except where
$GOMGR_REQUIRE_WEBUI=1 (CI sets it), where that fails them: CI must never pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, sync_playwright

from tests.e2e_chat_ui.chat_page import ChatPage
from tests.e2e_chat_ui.open_webui import (
    START_TIMEOUT_S,
    Connection,
    OpenChat,
    OpenWebUI,
    launch_open_webui,
)
from tests.e2e_chat_ui.provision import Unavailable, chromium, open_webui_venv
from tests.e2e_chat_ui.stack import SECOND_MODEL, ChatStack, isolated_stack

REQUIRE_ENV = "GOMGR_REQUIRE_WEBUI"


@pytest.fixture(scope="package")
def chat_stack(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Iterator[ChatStack]:
    """`gomgr serve --ollama-port`, then `gomgr start` SmolLM2 under two served names.

    NOTE: test_open_webui.py's last test stops SECOND_MODEL; it runs after the others here.
    """
    root = tmp_path_factory.mktemp("chat_stack")
    stack = isolated_stack(root, smollm2_dir.parents[1])
    try:
        stack.serve_router(root / "router.log")
        stack.start_model()
        stack.start_model("--served-model-name", SECOND_MODEL)
        yield stack
    finally:
        stack.close()


def _provided(install: Callable[[], Path]) -> Path:
    try:
        return install()
    except Unavailable as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def open_webui_executable() -> Path:
    return _provided(open_webui_venv)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = _provided(chromium)
    with sync_playwright() as playwright:
        # NOTE: Debian's chromium, not Playwright's download; no sandbox, as tests run as root in CI.
        launched = playwright.chromium.launch(executable_path=str(executable), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="package")
def open_webuis(
    tmp_path_factory: pytest.TempPathFactory, open_webui_executable: Path, chat_stack: ChatStack
) -> Iterator[dict[Connection, OpenWebUI]]:
    """One Open WebUI per connection to the router, started together (each takes ~20-60 s)."""
    root = tmp_path_factory.mktemp("open_webui")
    started: dict[Connection, OpenWebUI] = {}
    try:
        for connection in Connection:
            started[connection] = launch_open_webui(open_webui_executable, connection, chat_stack, root)
        for webui in started.values():
            webui.served.wait_ready(f"{webui.url}/health", START_TIMEOUT_S)
        yield started
    finally:
        for webui in started.values():
            webui.served.stop()



@pytest.fixture
def open_chat(browser: Browser) -> Iterator[OpenChat]:
    """Opens an Open WebUI's chat page in a new browser context; closes them after the test."""
    contexts: list[BrowserContext] = []

    def open_page(webui: OpenWebUI) -> ChatPage:
        contexts.append(context := browser.new_context(viewport={"width": 1280, "height": 720}))
        chat = ChatPage(context.new_page(), webui.url)
        chat.open()
        return chat

    yield open_page
    for context in contexts:
        context.close()
