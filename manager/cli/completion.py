"""Shell completion (`gomgr --install-completion`): from local state only, no network."""

from __future__ import annotations

from manager.models.store import ModelStore
from manager.state.paths import StatePaths
from manager.state.records import RecordStore


def complete_engines(incomplete: str) -> list[str]:
    """Engine ids and served names from the records."""
    records = RecordStore(StatePaths.from_env()).all()
    names = dict.fromkeys([*(r.id for r in records), *(r.handle.spec.served_name for r in records)])
    return [name for name in names if name.startswith(incomplete)]


def complete_repos(incomplete: str) -> list[str]:
    """Repo ids in the local model store."""
    return [m.repo for m in ModelStore.from_env().models() if m.repo.startswith(incomplete)]
