"""`gomgr image ...`: build our engine image, or pull another engine's; logic in this package."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from manager.images.errors import ImageError
from manager.manifests.engines import DEFAULT_IMAGES

PULL_TIMEOUT_S = 60  # NOTE: the docker SDK's default, per API call

# NOTE: the docker SDK and NVML are imported inside the commands: `gomgr --help` and every
# other command load this module, and should not pay for them at start-up.

image_app = typer.Typer(
    help="Engine images: build gomgr's from engine_image/, or pull an upstream one.",
    no_args_is_help=True,
)


@image_app.command("build")
def image_build(
    tag: Annotated[str, typer.Option(help="Tag of the image.")] = DEFAULT_IMAGES["gomgr"],
    base: Annotated[
        str | None,
        typer.Option(help="Base image. Default: a CUDA runtime image with a GPU, else python:3.11-slim."),
    ] = None,
    torch_wheel: Annotated[
        Path | None,
        typer.Option(help="A torch wheel to install instead of downloading one (offline builds)."),
    ] = None,
    gpu: Annotated[
        bool | None,
        typer.Option("--gpu/--cpu", help="CUDA or CPU image. Default: CUDA when NVML sees a GPU."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the image id.")] = False,
) -> None:
    """Build the engine image (gomgr-engine:latest) from this checkout's engine_image/."""
    from manager.images.build import BuildOptions, build_image
    from manager.readiness.gpu import NvmlProbe

    want_gpu = gpu if gpu is not None else bool(NvmlProbe().snapshot().gpus)
    options = BuildOptions.for_machine(want_gpu, tag, base, torch_wheel)
    kind = "CUDA" if want_gpu else "CPU"
    if not quiet:
        typer.echo(f"building {tag} ({kind}, base {options.base_image})", err=True)
    on_line = (lambda _: None) if quiet else (lambda line: typer.echo(line, err=True))
    try:
        image_id = build_image(options, on_line)
    except ImageError as exc:
        _fail(exc)
    typer.echo(image_id if quiet else f"built {tag} ({image_id})")


@image_app.command("pull")
def image_pull(image: Annotated[str, typer.Argument(help="e.g. lmsysorg/sglang:latest")]) -> None:
    """Pull an engine image (e.g. an upstream SGLang or vLLM one a manifest names)."""
    from docker.errors import DockerException

    from manager.images.presence import pull_image
    from manager.runtimes.docker_host import docker_client

    try:
        client = docker_client(PULL_TIMEOUT_S)
    except DockerException as exc:
        typer.echo(f"error: no Docker daemon answers: {exc} (run `gomgr doctor`)", err=True)
        raise typer.Exit(3) from exc
    try:
        pull_image(client, image, lambda line: typer.echo(line, err=True))
    except ImageError as exc:
        _fail(exc)
    finally:
        client.close()
    typer.echo(f"pulled {image}")


def _fail(exc: ImageError) -> None:
    typer.echo(f"error: {exc.message}", err=True)
    if exc.fix:
        typer.echo(exc.fix, err=True)
    raise typer.Exit(3) from exc
