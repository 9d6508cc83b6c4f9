"""`gomgr models list` says which store models are loaded: its STATE column and `state` field
come from the running router's catalog (issue #23), "-" / null when no router answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.supervisor.client import load_model
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env

LOAD_TIMEOUT_S = 300.0


@pytest.fixture
def env(tmp_path: Path, smollm2_dir: Path) -> Iterator[Env]:
    built = Env.isolated(tmp_path, smollm2_dir.parents[1])
    yield built
    built.end_everything()


def _listed(env: Env) -> dict[str, dict[str, Any]]:
    result = env.gomgr("models", "list", "--json")
    assert result.returncode == 0, result.stderr
    return {row["repo"]: row for row in json.loads(result.stdout)}


def _state_cell(env: Env) -> str:
    result = env.gomgr("models", "list")
    assert result.returncode == 0, result.stderr
    [line] = [s for s in map(str.strip, result.stdout.splitlines()) if s.startswith(SMOLLM2_REPO)]
    return line.split()[1]


def test_without_a_router_the_state_is_unknown(env: Env) -> None:
    assert _listed(env)[SMOLLM2_REPO]["state"] is None
    assert _state_cell(env) == "-"


@pytest.mark.slow
def test_state_follows_the_router_from_unloaded_to_loaded(env: Env) -> None:
    started = env.gomgr("router", "start")
    assert started.returncode == 0, started.stderr
    row = _listed(env)[SMOLLM2_REPO]
    assert row["state"] == "unloaded"
    assert _state_cell(env) == "unloaded"

    load_model(env.router_url, row["served_name"], LOAD_TIMEOUT_S)
    assert _listed(env)[SMOLLM2_REPO]["state"] == "loaded"
    assert _state_cell(env) == "loaded"
