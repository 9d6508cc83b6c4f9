"""What the router knows about one upstream server: its identity, kind and state."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class BackendKind(StrEnum):
    ENGINE = "engine"  # our engine: OpenAI, Anthropic and Ollama routes on one port
    OPENAI = "openai"  # any other OpenAI-compatible server (vLLM, SGLang, llama.cpp, ...)


class BackendState(StrEnum):
    STARTING = "starting"  # registered, /health not yet 200: requests get 503 + Retry-After
    READY = "ready"  # serves requests
    DRAINING = "draining"  # takes no new requests; in-flight ones finish
    DEAD = "dead"  # gone: announced once, then removed from the registry


@dataclass(frozen=True)
class Backend:
    id: str
    model: str  # the served model name, as the upstream expects it in `model`
    base_url: str  # scheme://host:port, no trailing slash
    kind: BackendKind = BackendKind.ENGINE
    aliases: tuple[str, ...] = ()
    owned_by: str | None = None  # None until the upstream's /v1/models says
    max_model_len: int | None = None
    # NOTE: what the model serves (router/capabilities.py); None until the registration or
    # the backend's /get_model_info says, () when the backend does not say.
    capabilities: tuple[str, ...] | None = None
    state: BackendState = BackendState.STARTING
    created: int = 0  # unix seconds of registration
    api_key: str | None = field(default=None, repr=False)  # sent upstream as Bearer; never shown
    # NOTE: from `--backends FILE` (router/static_backends.py): a refused connection leaves it
    # starting instead of removing it, since nobody would register it again.
    pinned: bool = False

    def public(self) -> dict[str, Any]:
        """The backend as the admin API shows it: everything but its key."""
        shown = dataclasses.asdict(self)
        shown["has_api_key"] = shown.pop("api_key") is not None
        return shown

    def names(self) -> tuple[str, ...]:
        return (self.model, *self.aliases)
