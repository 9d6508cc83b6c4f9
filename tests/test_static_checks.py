"""The project's static checks run in the suite: ruff, and mypy with pyproject's [tool.mypy]."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        check=False,
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"


# NOTE: slow on a cold .mypy_cache (about 35 s on two cores); warm, it takes about 2 s.
@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
