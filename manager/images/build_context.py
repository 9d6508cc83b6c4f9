"""Stage the build context of the engine image: engine_image/ plus what the build needs.

NOTE: manager/ never imports the engine; it finds engine_image/ beside itself, which holds
in a source checkout and an editable install (a wheel does not ship the Dockerfile).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from manager.images.errors import ImageError

ENGINE_IMAGE_DIR = Path(__file__).resolve().parents[2] / "engine_image"
# NOTE: the bundle pip and requests trust on Debian/Ubuntu hosts; copied in so pip inside
# the build trusts whatever TLS proxy the host itself trusts.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class StagedContext:
    path: Path
    torch_wheel: Path | None  # the wheel placed in wheels/, if any


def engine_image_dir() -> Path:
    if not (ENGINE_IMAGE_DIR / "Dockerfile").is_file():
        raise ImageError(
            f"no engine_image/Dockerfile at {ENGINE_IMAGE_DIR}: the image builds from a source "
            "checkout of gomgr",
            "Clone the gomgr repository, `pip install -e .` from it, and run the build again.",
        )
    return ENGINE_IMAGE_DIR


def stage_context(dest: Path, torch_wheel: Path | None) -> StagedContext:
    """Copy the Dockerfile, requirements and engine package into `dest` (an empty folder)."""
    source = engine_image_dir()
    if torch_wheel is not None and not torch_wheel.is_file():
        raise ImageError(f"no torch wheel at {torch_wheel}")
    shutil.copy2(source / "Dockerfile", dest / "Dockerfile")
    shutil.copy2(source / "requirements.txt", dest / "requirements.txt")
    shutil.copytree(
        source / "engine", dest / "engine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    wheels = dest / "wheels"
    wheels.mkdir()
    if torch_wheel is not None:
        # NOTE: a hard link where the filesystem allows: the CPU wheel is ~200 MB.
        try:
            (wheels / torch_wheel.name).hardlink_to(torch_wheel)
        except OSError:
            shutil.copy2(torch_wheel, wheels / torch_wheel.name)
    if HOST_CA_BUNDLE.is_file():
        shutil.copy2(HOST_CA_BUNDLE, dest / "build-ca.crt")
    return StagedContext(dest, torch_wheel)
