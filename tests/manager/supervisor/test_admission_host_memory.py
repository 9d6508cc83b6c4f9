"""Admission by host RAM with real engines: GOMGR_HOST_MEMORY_LIMIT leaves room for one
SmolLM2 but not two, so a request for the second model unloads the idle first; a limit below
one model's footprint fails the request at once with the numbers, starting nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from manager.models.store import ModelStore, RepoId
from manager.state.records import RecordStore
from manager.supervisor.footprint import footprint_of
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env
from tests.support.on_demand import EngineCounter, ask, client, served_by

pytestmark = pytest.mark.slow


def _footprint(store: Path) -> int:
    stored = ModelStore(store).get(RepoId.parse(SMOLLM2_REPO))
    assert stored is not None
    footprint = footprint_of(SMOLLM2_REPO, stored.path)
    assert footprint is not None
    return footprint.total


def _router(root: Path, store: Path, limit: int) -> Env:
    env = Env.isolated(root, store)
    env.vars["GOMGR_HOST_MEMORY_LIMIT"] = str(limit)
    started = env.gomgr("router", "start")
    assert started.returncode == 0, started.stderr
    return env


@pytest.fixture
def room_for_one(tmp_path: Path, two_model_store: Path) -> Iterator[Env]:
    env = _router(tmp_path, two_model_store, _footprint(two_model_store) * 3 // 2)
    yield env
    env.end_everything()


def test_a_second_model_that_does_not_fit_unloads_the_idle_first(room_for_one: Env) -> None:
    env = room_for_one
    a, b = sorted(m.id for m in client(env).models.list().data)
    with EngineCounter(env) as counter:
        assert ask(env, a)
        assert served_by(env) == [a]
        assert ask(env, b)
        assert served_by(env) == [b]
    assert counter.most == 1


def test_a_model_that_cannot_fit_alone_fails_with_the_numbers(
    tmp_path: Path, two_model_store: Path
) -> None:
    env = _router(tmp_path, two_model_store, _footprint(two_model_store) // 2)
    try:
        model = min(m.id for m in client(env).models.list().data)
        with pytest.raises(openai.APIStatusError) as failed:
            ask(env, model)
        assert failed.value.status_code == 503
        message = str(failed.value)
        assert f"{model} needs 1." in message and "KV cache" in message
        assert "the host (GOMGR_HOST_MEMORY_LIMIT=" in message
        assert RecordStore(env.state).all() == []
    finally:
        env.end_everything()
