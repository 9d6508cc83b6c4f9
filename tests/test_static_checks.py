"""The project's static checks run in the suite: ruff, and mypy with pyproject's [tool.mypy]."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.background_mypy import MypyRun

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


# NOTE: about a minute on a cold .mypy_cache; it runs beside the suite from the end of
# collection (tests/support/background_mypy.py), so here it is mostly done already.
@pytest.mark.slow
def test_mypy_is_clean(mypy_run: MypyRun) -> None:
    returncode, output = mypy_run.result(timeout=600)
    assert returncode == 0, f"mypy found problems:\n{output}"
