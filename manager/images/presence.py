"""Make sure an engine image is present before a container is created from it.

NOTE: `docker run` of a missing image makes the daemon try its registry; where none is
reachable that fails late and obscurely, so the image is looked up first and pulled
explicitly (with progress) only when missing.
"""

from __future__ import annotations

from collections.abc import Callable

from docker import DockerClient
from docker.errors import APIError, ImageNotFound

from manager.images.errors import ImageError, PullError
from manager.manifests.engines import DEFAULT_IMAGES

DEFAULT_TAG = DEFAULT_IMAGES["gomgr"]


def image_present(client: DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
    except ImageNotFound:
        return False
    return True


def ensure_image(
    client: DockerClient, image: str, on_progress: Callable[[str], None] = lambda _: None,
) -> None:
    """Return when `image` is present; pull it if missing; an ImageError when neither works."""
    if image_present(client, image):
        return
    if image == DEFAULT_TAG:
        raise ImageError(
            f"the engine image {image} is not built on this Docker daemon",
            "Build it once with `gomgr image build` (a few minutes), then start again.",
        )
    pull_image(client, image, on_progress)


def pull_image(client: DockerClient, image: str, on_progress: Callable[[str], None]) -> None:
    repository, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
    try:
        for event in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise PullError(image, str(event["error"]), _pull_fix(image))
            status = event.get("status", "")
            if progress := event.get("progress"):
                status = f"{status} {progress}"
            if status:
                on_progress(f"{image}: {status}")
    except APIError as exc:
        raise PullError(image, str(exc.explanation or exc), _pull_fix(image)) from exc


def _pull_fix(image: str) -> str:
    return (
        f"Check that the registry of {image} is reachable from the Docker daemon "
        "(`docker pull` it by hand), or load the image from a file with `docker load`."
    )
