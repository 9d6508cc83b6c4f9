"""Choosing the manifest for one model and rendering its effective values."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from types import MappingProxyType

from manager.gguf.tags import GGUF_SUFFIX
from manager.manifests.catalog import Catalog, load_catalog
from manager.manifests.effective import VALUE_FIELDS, EffectiveManifest, FieldSource, Origin
from manager.manifests.engine_support import ModelTraits, unserved_by
from manager.manifests.engines import DEFAULT_IMAGES
from manager.manifests.errors import ManifestError
from manager.manifests.manifest import Manifest
from manager.manifests.schema import ManifestFile
from manager.models.model_path import PATH_PREFIXES

DEFAULT_NAME = "default"


def is_path(repo_or_path: str) -> bool:
    return repo_or_path.startswith(PATH_PREFIXES)


@dataclass(frozen=True)
class ModelKey:
    """How a repo id or a local directory is matched and named."""

    repo_or_path: str  # as given
    # "org/name", without a GGUF tag (`org/name:Q4_K_M` is its repo's family); for a
    # directory or GGUF file, its parent's and its own name (a file's without .gguf)
    match_key: str
    repo: str  # {repo} in served_name: the repo id and tag, or the directory's or file's name
    name: str  # {name} in served_name: the part after the org

    @classmethod
    def of(cls, repo_or_path: str) -> ModelKey:
        if is_path(repo_or_path):
            path = Path(repo_or_path).expanduser().resolve()
            own = path.name
            if own.lower().endswith(GGUF_SUFFIX):
                own = own[: -len(GGUF_SUFFIX)]
            return cls(repo_or_path, f"{path.parent.name}/{own}", own, own)
        untagged = repo_or_path.split(":", 1)[0]
        return cls(repo_or_path, untagged, repo_or_path, repo_or_path.rsplit("/", 1)[-1])


def resolve_manifest(
    repo_or_path: str,
    traits: ModelTraits | None,
    *,
    variant: str | None = None,
    catalog: Catalog | None = None,
) -> EffectiveManifest:
    """The effective manifest for a model, with each field's source.

    Selection: the best repo-glob match; else the best match of `traits.architecture`; else
    a generic default (our engine, no parsers). Ties go to the higher `priority`, then the
    more literal glob, then the name. A `variant` (a manifest name) is layered over that
    selection: the fields its files set win, the family's parsers and the rest stay. Repo
    overrides whose glob matches are merged last, in file-name order. Where the result runs
    gomgr's engine and `traits` (config.json) say that engine does not serve the model, the
    selection's `fallback` manifest is layered over it the same way (an explicit `variant`
    is the user's choice and is never replaced); ManifestError where no engine fits.
    """
    catalog = catalog or load_catalog()
    traits = traits or ModelTraits()
    key = ModelKey.of(repo_or_path)
    manifest, selected_by = _best_match(catalog.manifests, key.match_key, traits.architecture)
    if variant is not None:
        selected_by = f"variant {variant!r} over {manifest.name} ({selected_by})"
        manifest = _named(catalog, variant).layered_over(manifest)
    manifest = _with_repo_overrides(manifest, catalog, key)
    engine_reason = None
    unserved = unserved_by(manifest.engine, traits) if variant is None else None
    if unserved is not None and manifest.engine == "gomgr":
        engine_reason = f"gomgr's engine does not serve {unserved}"
        if manifest.fallback is None:
            raise ManifestError(f"{engine_reason}, and manifest {manifest.name} names no fallback")
        selected_by = f"fallback {manifest.fallback!r} over {manifest.name} ({selected_by})"
        manifest = _with_repo_overrides(
            _named(catalog, manifest.fallback).layered_over(manifest), catalog, key
        )
        unserved = unserved_by(manifest.engine, traits)
    if unserved is not None:
        why = f"{engine_reason}; " if engine_reason else ""
        raise ManifestError(f"no engine serves {repo_or_path}: {why}{manifest.engine} does not serve {unserved}")
    return _effective(manifest, key, selected_by, engine_reason)


def _named(catalog: Catalog, name: str) -> Manifest:
    chosen = catalog.get(name)
    if chosen is None:
        raise ManifestError(f"no manifest named {name!r} (known: {', '.join(catalog.names())})")
    return chosen


def _with_repo_overrides(manifest: Manifest, catalog: Catalog, key: ModelKey) -> Manifest:
    for override in catalog.repo_overrides:
        if fnmatchcase(key.match_key.lower(), override.pattern.lower()):
            manifest = manifest.merged(override.changes, FieldSource(Origin.OVERRIDE, override.path))
    return manifest


def _best_match(
    manifests: tuple[Manifest, ...], match_key: str, architecture: str | None
) -> tuple[Manifest, str]:
    by_repo = [
        (m, pattern)
        for m in manifests
        for pattern in m.repos
        if fnmatchcase(match_key.lower(), pattern.lower())
    ]
    if by_repo:
        manifest, pattern = min(
            by_repo, key=lambda hit: (-hit[0].priority, -_literal_chars(hit[1]), hit[0].name)
        )
        return manifest, f"repo pattern {pattern!r}"
    by_arch = [m for m in manifests if architecture is not None and architecture in m.architectures]
    if by_arch:
        manifest = min(by_arch, key=lambda m: (-m.priority, m.name))
        return manifest, f"architecture {architecture!r}"
    return Manifest.from_file(ManifestFile(name=DEFAULT_NAME), None), "no manifest matched"


def _literal_chars(pattern: str) -> int:
    return sum(1 for char in pattern if char not in "*?[]")


def _effective(
    manifest: Manifest, key: ModelKey, selected_by: str, engine_reason: str | None
) -> EffectiveManifest:
    sources = {field: manifest.sources[field] for field in ("name", *VALUE_FIELDS)}
    image = manifest.image
    if image is None:
        # NOTE: a manifest that names no image runs its engine's default one.
        image = DEFAULT_IMAGES[manifest.engine]
        sources["image"] = FieldSource(Origin.DEFAULT)
    return EffectiveManifest(
        repo=key.repo_or_path,
        name=manifest.name,
        selected_by=selected_by,
        engine=manifest.engine,
        image=image,
        served_name=manifest.served_name.format(repo=key.repo, name=key.name),
        context_length=manifest.context_length,
        tool_call_parser=manifest.tool_call_parser,
        reasoning_parser=manifest.reasoning_parser,
        engine_args=manifest.engine_args,
        shm_size=manifest.shm_size,
        env=manifest.env,
        sources=MappingProxyType(sources),
        engine_reason=engine_reason,
    )
