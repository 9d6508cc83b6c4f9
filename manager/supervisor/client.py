"""The supervisor as its clients (`gomgr models list`, the TUI) reach it: through the router's
own API, so the supervisor stays the one writer of the engines it loads.

The catalog's load states come from `/v1/models` (its `status` extension field); a model is
loaded with Ollama's empty `/api/generate`, which answers once the model is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from manager.lifecycle.errors import RouterUnavailable
from manager.lifecycle.router_link import VERIFY_TLS, error_message

LIST_TIMEOUT_S = 2.0
LOAD_PATH = "/api/generate"


def catalog_states(url: str) -> Mapping[str, str] | None:
    """Each catalog model's load state (unloaded, loading, loaded, unloading) by its served
    name; None when no router answers at `url`, or it is a bare router with no loader."""
    try:
        reply = httpx.get(f"{url}/v1/models", timeout=LIST_TIMEOUT_S, verify=VERIFY_TLS)
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
    try:
        reply = httpx.post(
            f"{url}{LOAD_PATH}", json={"model": model}, timeout=timeout_s, verify=VERIFY_TLS
        )
    except httpx.TransportError as exc:
        raise RouterUnavailable(f"could not load {model}: the router at {url} did not answer: {exc}") from exc
    if reply.status_code != 200:
        raise RouterUnavailable(f"could not load {model}: {error_message(reply)}")

