"""A manifest inside the manager: frozen values plus, per field, where each value came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from manager.manifests.effective import VALUE_FIELDS, FieldSource, Origin
from manager.manifests.schema import ManifestFile, MatchSpec

# NOTE: every field a file can set, so that each one has a source, set or not.
SOURCED_FIELDS = tuple(name for name in ManifestFile.model_fields)


@dataclass(frozen=True)
class Manifest:
    name: str
    repos: tuple[str, ...]
    architectures: tuple[str, ...]
    priority: int
    engine: str
    image: str | None
    served_name: str
    context_length: int | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    engine_args: tuple[str, ...]
    shm_size: str
    env: Mapping[str, str]
    fallback: str | None
    sources: Mapping[str, FieldSource]

    @classmethod
    def from_file(cls, spec: ManifestFile, path: Path | None) -> Manifest:
        """`spec` as loaded from `path`; fields the file leaves out are sourced as defaults."""
        written = FieldSource(Origin.BUILTIN, path) if path else FieldSource(Origin.DEFAULT)
        default = FieldSource(Origin.DEFAULT)
        return cls(
            name=spec.name,
            repos=tuple(spec.match.repos),
            architectures=tuple(spec.match.architectures),
            priority=spec.priority,
            engine=spec.engine,
            image=spec.image,
            served_name=spec.served_name,
            context_length=spec.context_length,
            tool_call_parser=spec.tool_call_parser,
            reasoning_parser=spec.reasoning_parser,
            engine_args=tuple(spec.engine_args),
            shm_size=spec.shm_size,
            env=MappingProxyType(dict(spec.env)),
            fallback=spec.fallback,
            sources=MappingProxyType({
                field: written if field in spec.model_fields_set else default
                for field in SOURCED_FIELDS
            }),
        )

    def merged(self, changes: Mapping[str, object], source: FieldSource) -> Manifest:
        """A copy with `changes` (manifest field -> validated value) replacing whole fields."""
        # NOTE: field by field, never deeper: an override's `env` or `engine_args` replaces
        # the built-in's list or mapping, so what runs is exactly what one file says.
        values: dict[str, Any] = {}
        for field, value in changes.items():
            if isinstance(value, MatchSpec):
                values["repos"] = tuple(value.repos)
                values["architectures"] = tuple(value.architectures)
            elif isinstance(value, list):
                values[field] = tuple(value)
            elif isinstance(value, dict):
                values[field] = MappingProxyType(dict(value))
            else:
                values[field] = value
        sources = {**self.sources, **{field: source for field in changes}}
        return dataclasses.replace(self, **values, sources=MappingProxyType(sources))

    def layered_over(self, family: Manifest) -> Manifest:
        """`family` with the value fields this manifest's files set (a variant over a family)."""
        written = [f for f in VALUE_FIELDS if self.sources[f].origin is not Origin.DEFAULT]
        sources = {**family.sources, "name": self.sources["name"]}
        sources.update({field: self.sources[field] for field in written})
        return dataclasses.replace(
            family,
            name=self.name,
            **{field: getattr(self, field) for field in written},
            sources=MappingProxyType(sources),
        )
