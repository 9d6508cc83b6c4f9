"""The supervisor as its clients (`gomgr models list`, the TUI) reach it: through the router's
own API, so the supervisor stays the one writer of the engines it loads.

The catalog's load states come from `/v1/models` (its `status` extension field); a model is
loaded or unloaded with Ollama's empty `/api/generate`, which answers once the model is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from manager.lifecycle.errors import RouterUnavailable

LIST_TIMEOUT_S = 2.0
LOAD_PATH = "/api/generate"
# NOTE: the router's Ollama field; 0 unloads once no request is in flight (router/keep_alive.py).
KEEP_ALIVE_FIELD = "keep_alive"
UNLOADED = "unloaded"


def catalog_states(url: str) -> Mapping[str, str] | None:
    """Each catalog model's load state (unloaded, loading, loaded, unloading) by its served
    name; None when no router answers at `url`, or it is a bare router with no loader."""
    try:
        reply = httpx.get(f"{url}/v1/models", timeout=LIST_TIMEOUT_S)
    except httpx.TransportError:
        return None
    if reply.status_code != 200:
        return None
    try:
        cards = reply.json()["data"]
        states = {str(card["id"]): str(card["status"]["value"]) for card in cards if "status" in card}
    except (ValueError, KeyError, TypeError):
        return None
    return states if len(states) == len(cards) else None


def load_model(url: str, model: str, timeout_s: float) -> None:
    """Ask the router to load `model` (a served name in its catalog); returns once it is loaded.
    RouterUnavailable with the router's own message when it cannot."""
    _generate(url, {"model": model}, timeout_s, f"load {model}")


def unload_model(url: str, model: str) -> None:
    """Ask the router to unload `model` once no request for it is in flight (at once if idle)."""
    _generate(url, {"model": model, KEEP_ALIVE_FIELD: 0}, LIST_TIMEOUT_S * 5, f"unload {model}")


def _generate(url: str, body: dict[str, object], timeout_s: float, what: str) -> None:
    try:
        reply = httpx.post(f"{url}{LOAD_PATH}", json=body, timeout=timeout_s)
    except httpx.TransportError as exc:
        raise RouterUnavailable(f"could not {what}: the router at {url} did not answer: {exc}") from exc
    if reply.status_code != 200:
        raise RouterUnavailable(f"could not {what}: {_message(reply)}")


def _message(reply: httpx.Response) -> str:
    try:
        error = reply.json()["error"]
        return str(error["message"] if isinstance(error, dict) else error)
    except (ValueError, KeyError, TypeError):
        return f"the router answered HTTP {reply.status_code}"
