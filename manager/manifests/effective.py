"""The result of resolution: effective manifest values, and where each one came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Origin(str, Enum):
    DEFAULT = "default"
    BUILTIN = "built-in"
    OVERRIDE = "override"


@dataclass(frozen=True)
class FieldSource:
    """Where one effective value came from; `path` is None for a default."""

    origin: Origin
    path: Path | None = None

    def __str__(self) -> str:
        return self.origin.value if self.path is None else f"{self.origin.value} {self.path}"


# NOTE: the fields a launch uses, in display order; `match` and `priority` only select.
VALUE_FIELDS = (
    "engine",
    "image",
    "served_name",
    "context_length",
    "tool_call_parser",
    "reasoning_parser",
    "engine_args",
    "shm_size",
    "env",
)


@dataclass(frozen=True)
class EffectiveManifest:
    """What to launch for one model. `served_name` is rendered; `sources` has every field."""

    repo: str
    name: str
    selected_by: str
    engine: str
    image: str
    served_name: str
    context_length: int | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    engine_args: tuple[str, ...]
    shm_size: str
    env: Mapping[str, str]
    sources: Mapping[str, FieldSource]
    # NOTE: why `engine` is not the one the selected manifest names (its fallback ran).
    engine_reason: str | None = None

    def engine_line(self) -> str:
        """e.g. `engine: vllm (gomgr's engine does not serve quantization 'fbgemm_fp8')`."""
        return f"engine: {self.engine}" + (f" ({self.engine_reason})" if self.engine_reason else "")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: the values, and per field its origin and file."""
        return {
            "repo": self.repo,
            "name": self.name,
            "selected_by": self.selected_by,
            "engine_reason": self.engine_reason,
            "values": {field: _plain(getattr(self, field)) for field in VALUE_FIELDS},
            "sources": {
                field: {
                    "origin": source.origin.value,
                    "path": str(source.path) if source.path else None,
                }
                for field, source in self.sources.items()
            },
        }


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value
