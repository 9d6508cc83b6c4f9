"""Fixtures of the supervisor's tests: SmolLM2's served name, and a model store of two models
for the swapping tests (the session's SmolLM2 and a copy of it imported as another model with
`gomgr models pull DIR --name`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.models.store import ModelStore, RepoId
from manager.supervisor.catalog import served_name
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env

COPY_REPO = "test/smollm2-copy"


@pytest.fixture(scope="session")
def two_model_store(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    store = tmp_path_factory.mktemp("two-models")
    importer = Env.isolated(tmp_path_factory.mktemp("importer"), store)
    for name in (SMOLLM2_REPO, COPY_REPO):
        pulled = importer.gomgr("models", "pull", str(smollm2_dir), "--name", name)
        assert pulled.returncode == 0, pulled.stderr
    return store


@pytest.fixture(scope="session")
def model(smollm2_dir: Path) -> str:
    """The name the supervisor serves the store's SmolLM2 under."""
    stored = ModelStore(smollm2_dir.parents[1]).get(RepoId.parse(SMOLLM2_REPO))
    assert stored is not None
    return served_name(stored)
