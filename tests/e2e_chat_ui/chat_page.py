"""Open WebUI's chat page (0.12.4) in a real browser, driven the way a user clicks it."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

PAGE_TIMEOUT_MS = 120_000
ANSWER_TIMEOUT_MS = 180_000


class ChatPage:
    def __init__(self, page: Page, url: str) -> None:
        self._page = page
        self._url = url

    def open(self) -> None:
        """Load (or reload) the page, until its chat input shows."""
        self._page.goto(self._url, wait_until="load", timeout=PAGE_TIMEOUT_MS)
        self._page.locator("#chat-input").wait_for(timeout=PAGE_TIMEOUT_MS)

    def listed_models(self) -> list[str]:
        """The model ids the model picker offers."""
        self._page.locator("#model-selector-model-button").click()
        self._page.locator("#model-selector-list").wait_for()
        options = self._page.locator("#model-selector-list [role=option]").all()
        listed = [str(option.get_attribute("data-value")) for option in options]
        self._page.keyboard.press("Escape")
        return listed

    def pick(self, model: str) -> None:
        self._page.locator("#model-selector-model-button").click()
        self._page.locator(f'#model-selector-list [role=option][data-value="{model}"]').click()

    def ask(self, question: str, timeout_ms: float = ANSWER_TIMEOUT_MS) -> str:
        """Type `question`, send it, wait until the answer is complete; the answer's text."""
        self._page.locator("#chat-input").click()
        self._page.keyboard.type(question)
        self._page.locator("#send-message-button").click()
        self._page.locator('button[aria-label="Regenerate"]').wait_for(timeout=timeout_ms)
        return self._page.locator("#response-content-container").last.inner_text()

    def screenshot(self, path: Path) -> None:
        self._page.screenshot(path=str(path))
