"""The `Runtime` interface every way of running an engine implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from manager.state.paths import StatePaths

ENGINE_HOST = "127.0.0.1"
# NOTE: where a container sees the model directory; here, not in runtimes/docker.py, so planning
# a start does not import the docker SDK (issue 30: a tenth of the supervisor's boot).
CONTAINER_MODEL_DIR = "/model"
# NOTE: the port an engine listens on inside a container (a docker container or a Kubernetes
# pod) and the path every engine kind answers 200 on once it serves.
CONTAINER_PORT = 30000
HEALTH_PATH = "/health"


def container_command(engine_args: tuple[str, ...], api_key: str | None = None) -> list[str]:
    """The engine's command line in a container: its flags, the key it requires where it is
    reached beyond loopback (gomgr's engine, SGLang and vLLM all take `--api-key`), then the
    runtime's host and port."""
    key = ["--api-key", api_key] if api_key else []
    return [*engine_args, *key, "--host", "0.0.0.0", "--port", str(CONTAINER_PORT)]


@dataclass(frozen=True)
class ContainerSpec:
    """How a container runtime runs the engine: its image and the options of `docker run`."""

    image: str
    shm_size: str = "32g"
    gpus: bool = False  # `--gpus all`
    gpu_ids: tuple[str, ...] = ()  # with gpus: only these (docker's device_ids); empty: all
    # NOTE: empty means the image's own entrypoint (ours and vLLM's); the upstream SGLang
    # image needs `python3 -m sglang.launch_server` spelled out.
    entrypoint: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineSpec:
    """What to run: one engine serving one model under one name."""

    id: str
    repo: str  # as the user gave it: a repo id or a directory
    model_dir: Path
    served_name: str
    port: int
    aliases: tuple[str, ...] = ()
    # NOTE: every engine flag but host and port (the runtime's to choose), model path and
    # served name included: the manifest decides them (manifests/flags.py).
    engine_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # extra environment (from the manifest)
    host: str = ENGINE_HOST
    container: ContainerSpec | None = None  # set for container runtimes only
    # NOTE: the key the engine requires (`--api-key`), set by a runtime that runs it beyond
    # loopback (a remote Docker daemon); the router sends it upstream.
    api_key: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def auth_headers(self) -> dict[str, str]:
        """What a request to the engine carries: its key, where it requires one."""
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(frozen=True)
class EngineHandle:
    """A launched engine, as its runtime can find it again after a manager restart."""

    spec: EngineSpec
    runtime: str
    pid: int
    create_time: float  # the process's start time: tells it apart from a later one with its pid
    log_path: Path
    started_at: float  # unix seconds
    extra: dict[str, Any] = field(default_factory=dict)  # runtime-specific, e.g. a container id

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class EngineExit:
    """An engine that ended, as its runtime reported it."""

    engine_id: str
    exit_code: int | None  # None: unknown


class ExitStream(Protocol):
    """A runtime's engines as they die: iterating blocks; `close()` from another thread ends it."""

    def __iter__(self) -> Iterator[EngineExit]: ...

    def close(self) -> None: ...


class RuntimeStartError(Exception):
    """The runtime refused to launch: one readable line, and what to do about it."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


class Runtime(ABC):
    name: str

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths

    def place(self, spec: EngineSpec) -> EngineSpec:
        """`spec` where this runtime will run it: the host it is reached at and the key it
        requires there (a remote Docker daemon's host and a new key); as given by default."""
        return spec

    @abstractmethod
    def start(self, spec: EngineSpec) -> EngineHandle:
        """Launch the engine detached from the caller; returns at once (not waiting for /health)."""

    @abstractmethod
    def stop(self, handle: EngineHandle, timeout_s: float = 15.0) -> None:
        """End the engine and everything it started: SIGTERM, a bounded wait, then SIGKILL."""

    @abstractmethod
    def is_alive(self, handle: EngineHandle) -> bool:
        """Whether the engine's process (or container) still runs."""

    @abstractmethod
    def logs(self, handle: EngineHandle, lines: int) -> list[str]:
        """The last `lines` lines of the engine's output."""

    @abstractmethod
    def follow(self, handle: EngineHandle) -> Iterator[str]:
        """Output lines as they are written, until the engine stops."""

    @abstractmethod
    def list_running(self) -> list[EngineHandle]:
        """Every engine of this runtime that still runs, rebuilt from what outlives the manager."""

    def ended(self, handle: EngineHandle) -> bool:
        """Whether the engine is known to have ended: False where the runtime cannot tell now
        (a daemon that does not answer), unlike `not is_alive`."""
        return not self.is_alive(handle)

    def exit_code(self, handle: EngineHandle) -> int | None:
        """How a dead engine ended, where the runtime still knows; None: unknown."""
        return None

    def exits(self) -> ExitStream | None:
        """This state root's engines as they die, or None where the runtime reports no deaths
        (its owner polls `is_alive`). RuntimeStartError when there is nothing to watch yet (no
        daemon); the stream ends, rather than raise, when its daemon goes away."""
        return None
