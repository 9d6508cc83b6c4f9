"""What the start picker offers: models in the store and known ones, each with its manifest
and readiness (fit estimate, runtime, blockers), all from manager/ functions."""

from __future__ import annotations

from dataclasses import dataclass

from manager.manifests.architecture import detect_traits
from manager.manifests.effective import EffectiveManifest
from manager.manifests.errors import ManifestError
from manager.manifests.resolve import resolve_manifest
from manager.models.bundled import BUNDLED_SOURCES
from manager.models.store import ModelStore
from manager.readiness.blocker import Blocker
from manager.readiness.report import ReadinessReport
from manager.readiness.start import check_for_start


@dataclass(frozen=True)
class ModelChoice:
    repo: str
    size_bytes: int | None  # None: not in the store yet (pulled at start)

    @property
    def local(self) -> bool:
        return self.size_bytes is not None


@dataclass(frozen=True)
class ChoiceDetails:
    repo: str
    manifest: EffectiveManifest | None
    manifest_error: str | None
    report: ReadinessReport

    def blockers(self) -> tuple[Blocker, ...]:
        """What stops a start with the runtime the start would use."""
        return self.report.blocking(self.report.default_runtime())

    def startable(self) -> bool:
        return self.manifest is not None and not self.blockers()


def model_choices(store: ModelStore) -> tuple[ModelChoice, ...]:
    """The store's models, then the known ones not pulled yet (those with a bundled source)."""
    local = [ModelChoice(m.repo, m.size_bytes) for m in store.models()]
    present = {c.repo for c in local}
    known = [ModelChoice(repo, None) for repo in sorted(BUNDLED_SOURCES) if repo not in present]
    return (*local, *known)


def describe(repo: str, store: ModelStore) -> ChoiceDetails:
    """The effective manifest and the readiness of starting `repo` (may ask the hub: slow)."""
    try:
        manifest, error = resolve_manifest(repo, detect_traits(repo, store)), None
    except ManifestError as exc:
        manifest, error = None, exc.message
    # NOTE: sized for the manifest's context, as the start itself will (lifecycle/planning.py).
    context = manifest.context_length if manifest else None
    report = check_for_start(repo, None, "auto", None, context, store=store)
    return ChoiceDetails(repo, manifest, error, report)
