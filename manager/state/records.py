"""One JSON record per engine under <state>/engines/: what a restarted manager rebuilds from."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from manager.runtimes.base import ContainerSpec, EngineHandle, EngineSpec
from manager.state.machine import EngineState, transition
from manager.state.paths import StatePaths

RECORD_VERSION = 1
# NOTE: held (flock) around each state change, across processes: the compare and the swap.
LOCK_FILE = ".state.lock"


@dataclass(frozen=True)
class EngineRecord:
    handle: EngineHandle
    state: EngineState
    # NOTE: who manages the engine besides its starter, e.g. `gomgr apply`'s entry and spec
    # hash (manager/lifecycle/desired_state.py); empty for an engine started by hand.
    labels: dict[str, str] = field(default_factory=dict)
    # NOTE: the manifest variant layered over the matched manifest at the start (None: none),
    # so a restart runs what the start ran.
    variant: str | None = None

    @property
    def id(self) -> str:
        return self.handle.id

    def to_json(self) -> dict[str, Any]:
        spec = self.handle.spec
        return {
            "version": RECORD_VERSION,
            "id": spec.id,
            "state": str(self.state),
            "runtime": self.handle.runtime,
            "repo": spec.repo,
            "model_dir": str(spec.model_dir),
            "served_name": spec.served_name,
            "aliases": list(spec.aliases),
            "host": spec.host,
            "port": spec.port,
            "base_url": spec.base_url,
            "engine_args": list(spec.engine_args),
            "env": dict(spec.env),
            "pid": self.handle.pid,
            "create_time": self.handle.create_time,
            "log_path": str(self.handle.log_path),
            "started_at": self.handle.started_at,
            "extra": self.handle.extra,
            "container": dataclasses.asdict(spec.container) if spec.container else None,
            "api_key": spec.api_key,
            "labels": self.labels,
            "variant": self.variant,
        }

    def shown(self) -> dict[str, Any]:
        """`to_json` for output (`gomgr ps --json`): the engine's key masked."""
        body = self.to_json()
        body["api_key"] = "***" if body["api_key"] else None
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineRecord:
        spec = EngineSpec(
            id=data["id"], repo=data["repo"], model_dir=Path(data["model_dir"]),
            served_name=data["served_name"], port=int(data["port"]),
            aliases=tuple(data["aliases"]), engine_args=tuple(data["engine_args"]),
            env=tuple(dict(data.get("env", {})).items()), host=data["host"],
            container=_container(data.get("container")), api_key=data.get("api_key"),
        )
        handle = EngineHandle(
            spec=spec, runtime=data["runtime"], pid=int(data["pid"]),
            create_time=float(data["create_time"]), log_path=Path(data["log_path"]),
            started_at=float(data["started_at"]), extra=dict(data.get("extra", {})),
        )
        labels = dict(data.get("labels", {}))
        return cls(handle, EngineState(data["state"]), labels, data.get("variant"))


def _container(data: dict[str, Any] | None) -> ContainerSpec | None:
    if data is None:
        return None
    return ContainerSpec(
        image=data["image"], shm_size=data["shm_size"], gpus=bool(data["gpus"]),
        gpu_ids=tuple(data.get("gpu_ids", ())), entrypoint=tuple(data["entrypoint"]),
    )


class StateConflict(Exception):
    """A state change lost its compare-and-swap: another writer moved the record first."""

    def __init__(self, engine_id: str, expected: EngineState, found: EngineState | None) -> None:
        now = "was removed" if found is None else f"is {found}"
        super().__init__(f"engine {engine_id} {now}, no longer {expected}")
        self.found = found


class RecordStore:
    """Records and pid files; each write is atomic (temp file + rename)."""

    def __init__(self, paths: StatePaths) -> None:
        self.dir = paths.engines_dir
        self._paths = paths

    def record_path(self, engine_id: str) -> Path:
        return self.dir / f"{engine_id}.json"

    def pid_path(self, engine_id: str) -> Path:
        return self.dir / f"{engine_id}.pid"

    def log_path(self, engine_id: str) -> Path:
        return self._paths.ensure(self.dir) / f"{engine_id}.log"

    def save(self, record: EngineRecord) -> None:
        self._paths.ensure(self.dir)
        _write_atomic(self.record_path(record.id), json.dumps(record.to_json(), indent=2) + "\n")
        _write_atomic(self.pid_path(record.id), f"{record.handle.pid}\n")

    def set_state(self, record: EngineRecord, state: EngineState) -> EngineRecord:
        """Compare-and-swap: `record`'s state becomes `state` if the record on disk is still in
        `record.state`; StateConflict (and no change) if another writer moved it or removed
        it meanwhile. The state machine (machine.py) must allow the step."""
        new = transition(record.state, state)
        self._paths.ensure(self.dir)
        with open(self.dir / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.get(record.id)
            if current is None or current.state is not record.state:
                raise StateConflict(record.id, record.state, current.state if current else None)
            updated = dataclasses.replace(record, state=new)
            self.save(updated)
        return updated

    def get(self, engine_id: str) -> EngineRecord | None:
        try:
            return EngineRecord.from_json(json.loads(self.record_path(engine_id).read_text()))
        except FileNotFoundError:
            return None

    def all(self) -> list[EngineRecord]:
        """Every readable record, oldest first; a corrupt or foreign file is skipped."""
        if not self.dir.is_dir():
            return []
        records = []
        for path in self.dir.glob("*.json"):
            try:
                records.append(EngineRecord.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(records, key=lambda r: r.handle.started_at)

    def remove(self, engine_id: str, keep_log: bool) -> None:
        paths = [self.record_path(engine_id), self.pid_path(engine_id)]
        if not keep_log:
            paths.append(self.dir / f"{engine_id}.log")
        for path in paths:
            path.unlink(missing_ok=True)


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
