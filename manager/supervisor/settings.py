"""The supervisor's settings from the environment: default keep-alive, the loaded-models cap,
the host RAM its engines may use."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from router.errors import RouterError
from router.keep_alive import parse_keep_alive

KEEP_ALIVE_ENV = "GOMGR_KEEP_ALIVE"
MAX_LOADED_ENV = "GOMGR_MAX_LOADED_MODELS"
HOST_MEMORY_LIMIT_ENV = "GOMGR_HOST_MEMORY_LIMIT"
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
DEFAULT_KEEP_ALIVE_S = 300.0  # Ollama's 5m


@dataclass(frozen=True)
class SupervisorSettings:
    keep_alive_s: float  # after a model's last request; 0: at once, negative: never
    max_loaded: int | None  # None: no cap
    host_memory_limit: int | None = None  # bytes CPU engines may take together; None: all free
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S

    @classmethod
    def from_env(cls) -> SupervisorSettings:
        """ValueError with one readable line for a bad value."""
        return cls(
            keep_alive_s=_keep_alive(), max_loaded=_max_loaded(),
            host_memory_limit=_host_memory_limit(),
        )


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


def _host_memory_limit() -> int | None:
    value = os.environ.get(HOST_MEMORY_LIMIT_ENV, "").strip()
    if not value:
        return None
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"{HOST_MEMORY_LIMIT_ENV}={value!r} is not a size: give e.g. 8GiB, 512MiB or bytes")
    number, unit = match.groups()
    power = "kmgt".index(unit.lower()) + 1 if unit else 0
    return int(float(number) * 1024**power)
