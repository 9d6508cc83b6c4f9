"""Shell completion (`gomgr --install-completion`): from local state only, no network."""

from __future__ import annotations

from manager.state.paths import StatePaths
from manager.state.records import RecordStore


def complete_engines(incomplete: str) -> list[str]:
    """Engine ids and served names from the records."""
    records = RecordStore(StatePaths.from_env()).all()
    names = dict.fromkeys([*(r.id for r in records), *(r.handle.spec.served_name for r in records)])
    return [name for name in names if name.startswith(incomplete)]


def complete_repos(incomplete: str) -> list[str]:
    """Repo ids in the local model store."""
    # NOTE: imported when completing: the store's pydantic models cost start-up time that
    # every command would pay if this module imported it at the top.
    from manager.models.store import ModelStore

    return [m.repo for m in ModelStore.from_env().models() if m.repo.startswith(incomplete)]
