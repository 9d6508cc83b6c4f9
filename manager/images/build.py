"""`gomgr image build`: build the engine image for this machine (CUDA or CPU) and tag it."""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docker import DockerClient
from docker.errors import APIError, DockerException

from manager.images.build_context import stage_context
from manager.images.build_failure import base_image_missing, pip_index_unreachable
from manager.images.errors import ImageError, PullError
from manager.images.presence import DEFAULT_TAG, image_present, pull_image
from manager.runtimes.docker_host import docker_client

GPU_BASE_IMAGE = "nvidia/cuda:12.8.1-runtime-ubuntu24.04"
CPU_BASE_IMAGE = "python:3.11-slim-bookworm"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
BUILD_TIMEOUT_S = 3600
_RECENT_LINES = 40  # of the current step's output: a failed pip step's messages are among them


@dataclass(frozen=True)
class BuildOptions:
    tag: str
    base_image: str
    torch_wheel: Path | None  # installed instead of any index (offline builds)
    torch_index_url: str | None  # None: PyPI (CUDA builds of torch on Linux x86_64)

    @classmethod
    def for_machine(
        cls, gpu: bool, tag: str = DEFAULT_TAG, base_image: str | None = None,
        torch_wheel: Path | None = None,
    ) -> BuildOptions:
        """A CUDA image where there is a GPU, else a CPU one; explicit choices win."""
        base = base_image or (GPU_BASE_IMAGE if gpu else CPU_BASE_IMAGE)
        index = None if gpu or torch_wheel is not None else CPU_TORCH_INDEX
        return cls(tag, base, torch_wheel, index)

    def build_args(self) -> dict[str, str]:
        args = {"BASE_IMAGE": self.base_image}
        if self.torch_index_url is not None:
            args["TORCH_INDEX_URL"] = self.torch_index_url
        return args


def build_image(options: BuildOptions, on_line: Callable[[str], None]) -> str:
    """Build and tag the image; `on_line` gets the build's output. Returns the image id."""
    with tempfile.TemporaryDirectory(prefix="gomgr-image-") as tmp:
        context = stage_context(Path(tmp), options.torch_wheel)
        try:
            client = docker_client(BUILD_TIMEOUT_S)
        except DockerException as exc:
            raise ImageError(f"no Docker daemon to build with: {exc}", "Run `gomgr doctor`.") from exc
        try:
            _ensure_base_image(client, options.base_image, on_line)
            stream = client.api.build(
                path=str(context.path), tag=options.tag, buildargs=options.build_args(),
                rm=True, forcerm=True, decode=True, labels={"gomgr.image": "engine"},
            )
            return _follow(stream, options, on_line)
        except APIError as exc:
            raise ImageError(f"docker refused the build: {exc.explanation or exc}") from exc
        finally:
            client.close()


def _ensure_base_image(client: DockerClient, base: str, on_line: Callable[[str], None]) -> None:
    # NOTE: pulled before the build, not by its FROM step, so that a base image neither here
    # nor reachable fails with what to do instead of the daemon's DNS error mid-build.
    if image_present(client, base):
        return
    try:
        pull_image(client, base, on_line)
    except PullError as exc:
        raise ImageError(base_image_missing(exc)) from exc


def _follow(stream: object, options: BuildOptions, on_line: Callable[[str], None]) -> str:
    image_id = ""
    recent: deque[str] = deque(maxlen=_RECENT_LINES)
    for chunk in stream:  # type: ignore[attr-defined]
        if "stream" in chunk:
            for line in str(chunk["stream"]).splitlines():
                if line.strip():
                    if line.startswith("Step "):
                        recent.clear()  # NOTE: a step's own lines only, e.g. "Step 5/20 : RUN"
                    recent.append(line)
                    on_line(line)
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = str(chunk["aux"]["ID"])
        if "error" in chunk:
            if offline := pip_index_unreachable(list(recent), options.torch_index_url):
                raise ImageError(offline)
            raise ImageError(
                f"the image build failed: {chunk['error'].strip()}",
                "The build's output above shows the step that failed.",
            )
    if not image_id:
        raise ImageError("the image build ended without an image id from the daemon")
    return image_id

