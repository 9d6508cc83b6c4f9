"""The runtimes by name (`--runtime`)."""

from __future__ import annotations

from collections.abc import Callable

from manager.runtimes.base import Runtime
from manager.runtimes.docker import DockerRuntime
from manager.runtimes.process import ProcessRuntime
from manager.state.paths import StatePaths

_RUNTIMES: dict[str, Callable[[StatePaths], Runtime]] = {
    DockerRuntime.name: DockerRuntime,
    ProcessRuntime.name: ProcessRuntime,
}


def runtime_names() -> list[str]:
    return sorted(_RUNTIMES)


def get_runtime(name: str, paths: StatePaths) -> Runtime:
    if name not in _RUNTIMES:
        raise KeyError(f"no runtime '{name}' (available: {', '.join(runtime_names())})")
    return _RUNTIMES[name](paths)
