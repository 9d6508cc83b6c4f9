"""The runtimes by name (`--runtime`)."""

from __future__ import annotations

from collections.abc import Callable

from manager.runtimes.base import Runtime
from manager.runtimes.process import ProcessRuntime
from manager.state.paths import StatePaths

DOCKER = "docker"


def _docker_runtime(paths: StatePaths) -> Runtime:
    # NOTE: imported on first use: the docker SDK costs ~0.1 s of start-up that commands
    # touching no container (`gomgr ps` with process engines, `--help`) should not pay.
    from manager.runtimes.docker import DockerRuntime

    return DockerRuntime(paths)


_RUNTIMES: dict[str, Callable[[StatePaths], Runtime]] = {
    DOCKER: _docker_runtime,
    ProcessRuntime.name: ProcessRuntime,
}


def runtime_names() -> list[str]:
    return sorted(_RUNTIMES)


def get_runtime(name: str, paths: StatePaths) -> Runtime:
    if name not in _RUNTIMES:
        raise KeyError(f"no runtime '{name}' (available: {', '.join(runtime_names())})")
    return _RUNTIMES[name](paths)
