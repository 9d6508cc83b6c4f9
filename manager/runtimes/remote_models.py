"""The model on a remote Docker host: the store there, and a check, through the daemon, that
the model is in it before an engine container is made.

gomgr cannot bind-mount a path of this machine into a container on another one, so the
remote host keeps a model store of its own with the same layout (`<org>/<name>`):
$GOMGR_REMOTE_MODELS_DIR names it (default: the same path as this machine's store), filled
by `gomgr models pull` run there or by copying this machine's store (docs/scale-out.md).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from docker import DockerClient
from docker.errors import APIError, ContainerError
from docker.types import Mount

from manager.models.store import default_store_root
from manager.runtimes.base import RuntimeStartError

REMOTE_MODELS_ENV = "GOMGR_REMOTE_MODELS_DIR"
_CHECK_MOUNT = "/gomgr-models"


def remote_store_root() -> PurePosixPath:
    return PurePosixPath(os.environ.get(REMOTE_MODELS_ENV) or str(default_store_root()))


def remote_model_path(model_path: Path, daemon: str) -> PurePosixPath:
    """Where `model_path` (a directory or GGUF file of this machine's store) is on the
    remote host; RuntimeStartError for a model outside the store (no place to find it there)."""
    local_root = default_store_root()
    try:
        relative = model_path.resolve().relative_to(local_root.resolve())
    except ValueError as exc:
        raise RuntimeStartError(
            f"{model_path} is not in the model store ({local_root}), so it has no place on the "
            f"Docker host {daemon}",
            f"Pull it into the store (`gomgr models pull REPO`), or start it with a local daemon; "
            f"a remote daemon reads models from its host's store (${REMOTE_MODELS_ENV}).",
        ) from exc
    return remote_store_root() / PurePosixPath(relative.as_posix())


def check_remote_model(client: DockerClient, image: str, path: PurePosixPath, daemon: str) -> None:
    """RuntimeStartError unless `path` exists on the daemon's host: a one-shot container of
    `image` (there already) runs `test -e` on it, the store mounted read-only."""
    root = remote_store_root()
    inside = PurePosixPath(_CHECK_MOUNT) / path.relative_to(root)
    try:
        client.containers.run(
            image, entrypoint=["test", "-e", str(inside)], remove=True, network_disabled=True,
            mounts=[Mount(_CHECK_MOUNT, str(root), type="bind", read_only=True)],
        )
    except ContainerError as exc:
        raise _missing(path, daemon) from exc
    except APIError as exc:
        # NOTE: a store directory that does not exist at all is the daemon's bind refusal.
        if "bind source path does not exist" in str(exc.explanation or exc):
            raise _missing(path, daemon) from exc
        raise RuntimeStartError(f"Docker refused to check the model on {daemon}: {exc.explanation or exc}") from exc


def _missing(path: PurePosixPath, daemon: str) -> RuntimeStartError:
    root = remote_store_root()
    return RuntimeStartError(
        f"the model is not on the Docker host {daemon}: no {path} there",
        f"On that host run `GOMGR_MODELS_DIR={root} gomgr models pull REPO` (or copy this "
        f"machine's store there), or set ${REMOTE_MODELS_ENV} to the store it is in.",
    )
