"""The models the supervisor offers: every model in the store, and every entry of the
desired-state file `gomgr apply` handed it (pulled or not), each with its served name,
aliases, size and age."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from manager.lifecycle.desired_state import DesiredEngine, DesiredState
from manager.manifests.architecture import traits_of
from manager.manifests.errors import ManifestError
from manager.manifests.resolve import resolve_manifest
from manager.models.store import ModelStore, StoredModel
from manager.supervisor.slot import ModelSlot
from router.loader import LoadState


@dataclass(frozen=True)
class StoreModel:
    repo: str
    served_name: str
    aliases: tuple[str, ...]
    size_bytes: int | None  # None: not in the store yet (an entry of the desired state)
    created: int
    # NOTE: the desired-state entry it is, whose settings (runtime, port, variant, names) a
    # load on demand starts it with; None: a store model, started as `gomgr start` would.
    entry: DesiredEngine | None = None


def offered_models(store: ModelStore, desired: DesiredState | None) -> list[StoreModel]:
    """The store's models, each desired-state entry in place of the one it serves, the
    entries no store model serves after them."""
    models = store_models(store)
    if desired is None:
        return models
    created = int(desired.source.stat().st_mtime) if desired.source.exists() else 0
    for entry in desired.engines:
        name = entry.served_name or _store_name(models, entry) or entry.key
        model = StoreModel(entry.repo, name, entry.aliases, None, created, entry)
        at = next((i for i, m in enumerate(models) if m.served_name == name), None)
        if at is None:
            models.append(model)
        else:
            models[at] = dataclasses.replace(
                model, size_bytes=models[at].size_bytes, created=models[at].created
            )
    return models


def follow(
    slots: dict[str, ModelSlot], models: list[StoreModel], keep_alive_s: float
) -> dict[str, ModelSlot]:
    """The slots for `models` (by served name): new models get one, removed ones lose theirs
    unless loaded, an unloaded slot takes its model's latest settings. `keep_alive_s` is the
    default keep-alive; an entry's idle_unload_after is its own."""
    seen = {m.served_name for m in models}
    kept = {n: s for n, s in slots.items() if n in seen or s.state is not LoadState.UNLOADED}
    for model in models:
        keep = keep_alive_s
        if model.entry is not None and model.entry.idle_unload_after_s is not None:
            keep = model.entry.idle_unload_after_s
        slot = kept.get(model.served_name)
        if slot is None:
            kept[model.served_name] = ModelSlot(
                name=model.served_name, repo=model.repo, aliases=model.aliases,
                size_bytes=model.size_bytes, created=model.created, keep_alive_s=keep,
                default_keep_alive_s=keep, entry=model.entry,
            )
        elif slot.state is LoadState.UNLOADED and slot.entry != model.entry:
            slot.repo, slot.aliases, slot.entry = model.repo, model.aliases, model.entry
            slot.keep_alive_s = slot.default_keep_alive_s = keep
            slot.footprint = None
    return kept


def _store_name(models: list[StoreModel], entry: DesiredEngine) -> str | None:
    """The served name of the store's copy of the entry's repo, as `gomgr start` names it."""
    return next((m.served_name for m in models if m.repo == entry.repo), None)


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
        return resolve_manifest(stored.repo, traits_of(stored.path)).served_name
    except ManifestError:
        return stored.repo
