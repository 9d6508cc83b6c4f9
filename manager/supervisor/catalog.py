"""The models in the store as the supervisor offers them: served name, aliases, size, age."""

from __future__ import annotations

from dataclasses import dataclass

from manager.manifests.architecture import architecture_of
from manager.manifests.errors import ManifestError
from manager.manifests.resolve import resolve_manifest
from manager.models.store import ModelStore, StoredModel


@dataclass(frozen=True)
class StoreModel:
    repo: str
    served_name: str
    aliases: tuple[str, ...]
    size_bytes: int
    created: int


def store_models(store: ModelStore) -> list[StoreModel]:
    """Every complete model in the store; a name two models would share goes to the first."""
    found: list[StoreModel] = []
    taken: set[str] = set()
    for stored in store.models():
        model = _offered(stored)
        if model.served_name in taken:
            continue
        aliases = tuple(a for a in model.aliases if a not in taken)
        taken.update((model.served_name, *aliases))
        found.append(StoreModel(model.repo, model.served_name, aliases, model.size_bytes, model.created))
    return found


def _offered(stored: StoredModel) -> StoreModel:
    served = served_name(stored)
    # NOTE: the repo id is an alias when the manifest renames the model, so a client may name
    # the model as it was pulled.
    aliases = (stored.repo,) if served != stored.repo else ()
    created = stored.metadata.created.timestamp() if stored.metadata else stored.path.stat().st_mtime
    return StoreModel(stored.repo, served, aliases, stored.size_bytes, int(created))


def served_name(stored: StoredModel) -> str:
    """The name `gomgr start REPO` registers (manager/lifecycle/planning.py plan_start)."""
    try:
        return resolve_manifest(stored.repo, architecture_of(stored.path)).served_name
    except ManifestError:
        return stored.repo
