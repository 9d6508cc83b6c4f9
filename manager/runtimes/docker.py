"""The docker runtime: the engine in a container (docker SDK), port published on loopback only
on a local daemon.

The run spec (docs/architecture.md, runtimes): `--init`, `--shm-size` (32g unless the
manifest says), the model directory (a GGUF file's own directory) read-only at /model, 127.0.0.1:<port> → 30000, `--gpus
all` where GPUs are wanted, and labels that say the container is ours and let a restarted
manager rebuild its view without any record.

A remote daemon (DOCKER_HOST tcp:// or ssh://, or such a docker context): the port is
published on all of that host's interfaces, the engine requires a key of its own (the router
sends it), and the model comes from that host's store (runtimes/remote_models.py).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path, PurePosixPath

from docker import DockerClient
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container
from docker.types import DeviceRequest, Mount
from requests import RequestException

from manager.images.errors import ImageError
from manager.images.presence import ensure_image
from manager.models.model_path import is_gguf_file, mount_dir
from manager.runtimes.base import (
    CONTAINER_MODEL_DIR,
    CONTAINER_PORT,
    ENGINE_HOST,
    ContainerSpec,
    EngineHandle,
    EngineSpec,
    Runtime,
    RuntimeStartError,
    container_command,
)
from manager.runtimes.container_errors import start_refusal
from manager.runtimes.container_exits import ContainerExits, exit_code_of
from manager.runtimes.docker_host import (
    daemon_socket_missing,
    docker_client,
    docker_host,
    remote_engine_host,
)
from manager.runtimes.remote_models import check_remote_model, remote_model_path
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore

LABEL_ENGINE_ID = "gomgr.engine-id"
LABEL_MODEL = "gomgr.model"
LABEL_SERVED_NAME = "gomgr.served-name"
LABEL_STATE_ROOT = "gomgr.state-root"
CLIENT_TIMEOUT_S = 60
# NOTE: where a remote daemon publishes the engine's port: every interface of its host (the
# engine requires its key there); a local daemon publishes on the spec's host, loopback.
REMOTE_BIND = "0.0.0.0"


class DockerRuntime(Runtime):
    name = "docker"

    def __init__(self, paths: StatePaths) -> None:
        super().__init__(paths)
        self.records = RecordStore(paths)
        self._client: DockerClient | None = None

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            try:
                self._client = docker_client(CLIENT_TIMEOUT_S)
            except DockerException as exc:
                raise RuntimeStartError(
                    f"no Docker daemon answers: {exc}", "Run `gomgr doctor` for the fix steps."
                ) from exc
        return self._client

    def place(self, spec: EngineSpec) -> EngineSpec:
        """On a remote daemon: reached at its host, with a key of its own."""
        host = remote_engine_host()
        if host is None:
            return spec
        return dataclasses.replace(spec, host=host, api_key=secrets.token_urlsafe(32))

    def start(self, spec: EngineSpec) -> EngineHandle:
        container_spec = spec.container
        if container_spec is None:
            raise ValueError(f"engine {spec.id} has no container spec for the docker runtime")
        try:
            ensure_image(self.client, container_spec.image)
        except ImageError as exc:
            raise RuntimeStartError(exc.message, exc.fix) from exc
        if remote_engine_host() is not None:
            daemon = docker_host()
            where = remote_model_path(spec.model_dir, daemon)
            check_remote_model(self.client, container_spec.image, where, daemon)
        # NOTE: create, then start: when start fails (port taken, no GPU driver) the SDK's
        # run() would leave the container in "Created"; here it is removed.
        try:
            container = self.client.containers.create(**self.create_kwargs(spec))
        except APIError as exc:
            raise start_refusal(exc, spec, container_spec) from exc
        try:
            container.start()
            container.reload()
        except APIError as exc:
            _remove(container)
            raise start_refusal(exc, spec, container_spec) from exc
        handle = _handle(spec, container, self.records.log_path(spec.id))
        self.records.save(EngineRecord(handle, EngineState.STARTING))
        return handle

    def create_kwargs(self, spec: EngineSpec) -> dict[str, object]:
        """The arguments of `containers.create`: the whole run spec in one place."""
        container = spec.container
        assert container is not None
        command = container_command(spec.engine_args, spec.api_key)
        bind = spec.host if remote_engine_host() is None else REMOTE_BIND
        kwargs: dict[str, object] = {
            "image": container.image,
            "command": command,
            "name": f"gomgr-{spec.id}",
            "detach": True,
            "init": True,
            "shm_size": container.shm_size,
            "ports": {f"{CONTAINER_PORT}/tcp": (bind, spec.port)},
            # NOTE: a Mount, not `volumes`: that one is joined into "src:dst:ro", which a store
            # path with a tag (`name:Q4_K_M`) would split wrongly.
            "mounts": [
                Mount(
                    CONTAINER_MODEL_DIR, str(_on_daemon_host(mount_dir(spec.model_dir))),
                    type="bind", read_only=True,
                )
            ],
            "environment": dict(spec.env),
            "labels": {
                LABEL_ENGINE_ID: spec.id,
                LABEL_MODEL: spec.repo,
                LABEL_SERVED_NAME: spec.served_name,
                LABEL_STATE_ROOT: str(self.paths.root),
            },
        }
        if container.entrypoint:
            kwargs["entrypoint"] = list(container.entrypoint)
        if container.gpus and container.gpu_ids:
            kwargs["device_requests"] = [
                DeviceRequest(device_ids=list(container.gpu_ids), capabilities=[["gpu"]])
            ]
        elif container.gpus:
            kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        return kwargs

    def stop(self, handle: EngineHandle, timeout_s: float = 15.0) -> None:
        container = self._container(handle)
        if container is None:
            return
        _save_logs(container, handle.log_path)
        try:
            if container.status == "running":
                container.stop(timeout=int(timeout_s))
        except APIError:
            pass  # NOTE: the forced remove below ends it either way.
        _remove(container)

    def is_alive(self, handle: EngineHandle) -> bool:
        container = self._container(handle)
        return container is not None and container.status in ("created", "running", "restarting")

    def logs(self, handle: EngineHandle, lines: int) -> list[str]:
        container = self._container(handle)
        if container is None:
            return _file_tail(handle.log_path, lines)
        text = container.logs(tail=lines).decode(errors="replace")
        return text.splitlines()

    def follow(self, handle: EngineHandle) -> Iterator[str]:
        container = self._container(handle)
        if container is None:
            return
        partial = ""
        for chunk in container.logs(stream=True, follow=True, tail=0):
            partial += chunk.decode(errors="replace")
            *complete, partial = partial.split("\n")
            yield from complete
        if partial:
            yield partial

    def list_running(self) -> list[EngineHandle]:
        """Our running containers of this state root, rebuilt from their labels alone."""
        try:
            containers = self.client.containers.list(filters={"label": self._ours()})
        except (DockerException, RuntimeStartError):
            return []
        return [_from_labels(c, self.records.log_path(c.labels[LABEL_ENGINE_ID])) for c in containers]

    def ended(self, handle: EngineHandle) -> bool:
        try:
            container = self.client.containers.get(_container_id(handle))
        except NotFound:
            return True
        except (DockerException, RuntimeStartError, RequestException):
            return False
        return container.status in ("exited", "dead")

    def exit_code(self, handle: EngineHandle) -> int | None:
        container = self._container(handle)
        if container is None or container.status != "exited":
            return None
        return exit_code_of(container.attrs.get("State", {}).get("ExitCode"))

    def exits(self) -> ContainerExits:
        """Docker's `die` events for our containers of this state root."""
        if daemon_socket_missing():
            raise RuntimeStartError(f"no Docker daemon socket at {docker_host()}")
        try:
            events = self.client.events(
                decode=True, filters={"type": "container", "event": ["die"], "label": self._ours()}
            )
        except (DockerException, RequestException) as exc:
            raise RuntimeStartError(f"Docker's events: {exc}") from exc
        return ContainerExits(events, LABEL_ENGINE_ID)

    def _ours(self) -> list[str]:
        return [LABEL_ENGINE_ID, f"{LABEL_STATE_ROOT}={self.paths.root}"]

    def _container(self, handle: EngineHandle) -> Container | None:
        try:
            return self.client.containers.get(_container_id(handle))
        except NotFound:
            return None
        except (DockerException, RuntimeStartError):
            # NOTE: a daemon that stopped answering took its containers with it.
            return None


def _on_daemon_host(path: Path) -> Path | PurePosixPath:
    """`path` (of this machine's model store) where the daemon's host has it."""
    if remote_engine_host() is None:
        return path
    return remote_model_path(path, docker_host())


def _container_id(handle: EngineHandle) -> str:
    return str(handle.extra.get("container_id", f"gomgr-{handle.id}"))


def _handle(spec: EngineSpec, container: Container, log_path: Path) -> EngineHandle:
    state = container.attrs.get("State", {})
    return EngineHandle(
        spec=spec, runtime=DockerRuntime.name, pid=int(state.get("Pid") or 0),
        create_time=_timestamp(container.attrs.get("Created", "")), log_path=log_path,
        started_at=time.time(),
        extra={"container_id": container.id, "container_name": container.name},
    )


def _from_labels(container: Container, log_path: Path) -> EngineHandle:
    """The handle of a container found by its labels (a manager that lost its records)."""
    attrs = container.attrs
    host_config = attrs.get("HostConfig", {})
    binding = (host_config.get("PortBindings") or {}).get(f"{CONTAINER_PORT}/tcp") or [{}]
    mounts = [m for m in attrs.get("Mounts", []) if m.get("Destination") == CONTAINER_MODEL_DIR]
    command = list(attrs.get("Config", {}).get("Cmd") or [])
    requests = host_config.get("DeviceRequests") or []
    # NOTE: create_kwargs appends the key, host and port last; they are the runtime's, not the
    # spec's.
    engine_args = tuple(command[:-4]) if command[-4:-3] == ["--host"] else tuple(command)
    api_key = engine_args[-1] if engine_args[-2:-1] == ("--api-key",) else None
    engine_args = engine_args[:-2] if api_key else engine_args
    spec = EngineSpec(
        id=container.labels[LABEL_ENGINE_ID], repo=container.labels.get(LABEL_MODEL, ""),
        model_dir=(
            _model_path(mounts[0]["Source"], engine_args) if mounts else Path(CONTAINER_MODEL_DIR)
        ),
        served_name=container.labels.get(LABEL_SERVED_NAME, ""),
        port=int(binding[0].get("HostPort") or 0), engine_args=engine_args,
        host=remote_engine_host() or ENGINE_HOST, api_key=api_key,
        container=ContainerSpec(
            image=str(attrs.get("Config", {}).get("Image", "")),
            shm_size=str(host_config.get("ShmSize") or ""),
            gpus=bool(requests),
            gpu_ids=tuple(requests[0].get("DeviceIDs") or ()) if requests else (),
        ),
    )
    return _handle(spec, container, log_path)


def _model_path(mounted: str, engine_args: tuple[str, ...]) -> Path:
    """The host's model path: the mounted directory, or the GGUF file in it the engine loads."""
    at = engine_args.index("--model-path") + 1 if "--model-path" in engine_args else 0
    inside = PurePosixPath(engine_args[at] if 0 < at < len(engine_args) else "")
    if inside.parent == PurePosixPath(CONTAINER_MODEL_DIR) and is_gguf_file(Path(inside.name)):
        return Path(mounted) / inside.name
    return Path(mounted)


def _timestamp(created: str) -> float:
    # NOTE: Docker prints nanoseconds; fromisoformat takes at most microseconds.
    try:
        head, _, rest = created.partition(".")
        fraction = rest.rstrip("Z")[:6]
        return datetime.fromisoformat(f"{head}.{fraction or '0'}+00:00").timestamp()
    except ValueError:
        return 0.0


def _remove(container: Container) -> None:
    try:
        container.remove(force=True)
    except NotFound:
        pass


def _save_logs(container: Container, log_path: Path) -> None:
    try:
        log_path.write_bytes(container.logs())
    except (APIError, OSError):
        pass


def _file_tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []
