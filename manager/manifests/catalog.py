"""All manifests known at one moment: the built-ins with the user's overrides merged in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from manager.manifests.effective import FieldSource, Origin
from manager.manifests.errors import ManifestError
from manager.manifests.loading import load_yaml_model
from manager.manifests.locations import builtin_dir, user_dir
from manager.manifests.manifest import Manifest
from manager.manifests.schema import ManifestFile, OverrideFile


@dataclass(frozen=True)
class RepoOverride:
    """An override aimed at a repo glob: merged into whatever manifest that repo resolves to."""

    pattern: str
    changes: Mapping[str, object]
    path: Path


@dataclass(frozen=True)
class Catalog:
    manifests: tuple[Manifest, ...]
    repo_overrides: tuple[RepoOverride, ...]

    def get(self, name: str) -> Manifest | None:
        return next((m for m in self.manifests if m.name == name), None)

    def names(self) -> list[str]:
        return sorted(m.name for m in self.manifests)


def load_catalog(builtins: Path | None = None, user: Path | None = None) -> Catalog:
    """Built-ins from `builtins` (default: the shipped ones), overrides from `user`
    (default: the config dir's manifests/), applied in file-name order, later files winning."""
    builtin_manifests = {m.name: m for m in _load_builtins(builtins or builtin_dir())}
    repo_overrides = []
    for path in _yaml_files(user or user_dir()):
        override = load_yaml_model(path, OverrideFile)
        source = FieldSource(Origin.OVERRIDE, path)
        if override.repo is not None:
            repo_overrides.append(RepoOverride(override.repo, override.changes(), path))
            continue
        target = builtin_manifests.get(override.overrides or "")
        if target is None:
            known = ", ".join(sorted(builtin_manifests))
            raise ManifestError(
                f"{path}: field 'overrides': no manifest named {override.overrides!r} "
                f"(known: {known})"
            )
        builtin_manifests[target.name] = target.merged(override.changes(), source)
    return Catalog(tuple(builtin_manifests.values()), tuple(repo_overrides))


def _load_builtins(directory: Path) -> list[Manifest]:
    manifests = []
    for path in _yaml_files(directory):
        spec = load_yaml_model(path, ManifestFile)
        # NOTE: one manifest per file, named after it, so a name is unique by construction.
        if spec.name != path.stem:
            raise ManifestError(
                f"{path}: field 'name': must equal the file name {path.stem!r} (got {spec.name!r})"
            )
        manifests.append(Manifest.from_file(spec, path))
    return manifests


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
