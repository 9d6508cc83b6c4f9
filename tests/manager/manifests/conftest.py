"""Every manifests test runs against an empty, private config dir unless it writes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.manifests.locations import CONFIG_DIR_ENV


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$GOMGR_CONFIG_DIR for this test; overrides go in its manifests/ folder."""
    root = tmp_path / "config"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(root))
    return root


@pytest.fixture
def overrides_dir(config_dir: Path) -> Path:
    path = config_dir / "manifests"
    path.mkdir(parents=True)
    return path
