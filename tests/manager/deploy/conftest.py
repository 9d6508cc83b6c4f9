"""Rendering in-process with the real CLI, isolated from the user's manifests and store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from manager.cli.commands import app

ENGINES_FILE = Path(__file__).with_name("engines.yaml")
GOLDEN_DIR = Path(__file__).with_name("golden")

RenderCli = Callable[..., Result]


@pytest.fixture
def render_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RenderCli:
    """`gomgr deploy render ARGS` in this process; no override manifests, an empty store, so
    the output depends on the built-in manifests alone."""
    monkeypatch.setenv("GOMGR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("GOMGR_MODELS_DIR", str(tmp_path / "models"))
    runner = CliRunner()

    def render(*args: str) -> Result:
        return runner.invoke(app, ["deploy", "render", *args])

    return render
