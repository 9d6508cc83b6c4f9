"""A request's `keep_alive`, with Ollama's semantics: how long its model stays loaded after it.

Accepted forms: a number of seconds (`300`, `0.5`); a Go duration string as Ollama's
`api.Duration` takes it (`"5m"`, `"1h30m"`, `"300ms"`, `"-1m"`, `"0"`); a bare number in a
string (`"300"`, `"-1"`), as Ollama's `OLLAMA_KEEP_ALIVE` takes it. 0 unloads the model after
the request; any negative value keeps it loaded for good; absent or null: the owner's default.
"""

from __future__ import annotations

import math
import re

from router.errors import RouterError

KEEP_ALIVE_FIELD = "keep_alive"
# NOTE: Go's time.ParseDuration units; "µs" in both of Go's spellings.
_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")


def parse_keep_alive(value: object) -> float | None:
    """Seconds (negative: never unload), or None for the default; a bad value is a 400."""
    if value is None:
        return None
    if isinstance(value, bool):  # NOTE: a JSON true/false is no duration (bool is an int)
        raise _invalid(value)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _from_string(value.strip())
    else:
        raise _invalid(value)
    if not math.isfinite(seconds):
        raise _invalid(value)
    return seconds


def _from_string(text: str) -> float:
    if _NUMBER.fullmatch(text):
        return float(text)
    if not _DURATION.fullmatch(text):
        raise _invalid(text)
    sign = -1.0 if text.startswith("-") else 1.0
    total = sum(float(n) * _UNIT_S[unit] for n, unit in _PART.findall(text))
    return sign * total


def _invalid(value: object) -> RouterError:
    return RouterError(
        400,
        f"invalid keep_alive {value!r}: give seconds (a number; 0 unloads after the request, "
        "negative keeps the model loaded) or a duration such as \"5m\", \"1h30m\" or \"300ms\"",
        code="invalid_keep_alive",
        param=KEEP_ALIVE_FIELD,
    )
