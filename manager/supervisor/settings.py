"""The supervisor's settings from the environment: default keep-alive, the loaded-models cap."""

from __future__ import annotations

import os
from dataclasses import dataclass

from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from router.errors import RouterError
from router.keep_alive import parse_keep_alive

KEEP_ALIVE_ENV = "GOMGR_KEEP_ALIVE"
MAX_LOADED_ENV = "GOMGR_MAX_LOADED_MODELS"
DEFAULT_KEEP_ALIVE_S = 300.0  # Ollama's 5m


@dataclass(frozen=True)
class SupervisorSettings:
    keep_alive_s: float  # after a model's last request; 0: at once, negative: never
    max_loaded: int | None  # None: no cap
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S

    @classmethod
    def from_env(cls) -> SupervisorSettings:
        """ValueError with one readable line for a bad value."""
        return cls(keep_alive_s=_keep_alive(), max_loaded=_max_loaded())


def _keep_alive() -> float:
    value = os.environ.get(KEEP_ALIVE_ENV, "").strip()
    if not value:
        return DEFAULT_KEEP_ALIVE_S
    try:
        seconds = parse_keep_alive(value)
    except RouterError as exc:
        raise ValueError(
            f"{KEEP_ALIVE_ENV}={value!r} is not a duration: give seconds or e.g. 5m, 1h30m, -1"
        ) from exc
    return DEFAULT_KEEP_ALIVE_S if seconds is None else seconds


def _max_loaded() -> int | None:
    value = os.environ.get(MAX_LOADED_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{MAX_LOADED_ENV}={value!r} is not a whole number of models (1 or more)")
    return int(value)
