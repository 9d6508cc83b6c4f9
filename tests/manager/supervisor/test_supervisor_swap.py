"""Swapping under GOMGR_MAX_LOADED_MODELS=1 (issue #23 done-when), all real processes: two
models in the store (the second imported with `gomgr models pull DIR --name`), alternating
requests through the official openai client swap them with none failing, never two engines
at once and none left after `gomgr router stop`; a request for a model that is being unloaded
waits and is served."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from manager.state.records import RecordStore
from tests.support.gomgr_env import Env
from tests.support.on_demand import EngineCounter, alive, ask, client, served_by

pytestmark = pytest.mark.slow

WAIT_S = 120.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, two_model_store: Path) -> Iterator[Env]:
    built = Env.isolated(tmp_path_factory.mktemp("gomgr-swap"), two_model_store)
    built.vars["GOMGR_MAX_LOADED_MODELS"] = "1"
    started = built.gomgr("router", "start")
    assert started.returncode == 0, started.stderr
    yield built
    built.end_everything()


@pytest.fixture(scope="module")
def models(env: Env) -> tuple[str, str]:
    listed = sorted(m.id for m in client(env).models.list().data)
    assert len(listed) == 2, listed
    return listed[0], listed[1]


def _status(env: Env, model: str) -> str:
    cards = httpx.get(f"{env.router_url}/v1/models", timeout=5).json()["data"]
    return str(next(c for c in cards if c["id"] == model)["status"]["value"])


def test_alternating_requests_swap_the_two_models(env: Env, models: tuple[str, str]) -> None:
    a, b = models
    with EngineCounter(env) as counter:
        for model in (a, b, a, b):
            assert ask(env, model)
            assert served_by(env) == [model]
    assert counter.most == 1


def test_a_request_for_a_model_being_unloaded_waits_and_is_served(
    env: Env, models: tuple[str, str]
) -> None:
    # NOTE: loaded is the one the swaps above end on, so this request needs no engine start.
    other, loaded = models
    assert ask(env, loaded)
    with EngineCounter(env) as counter, ThreadPoolExecutor(2) as pool:
        for_other = pool.submit(ask, env, other)  # NOTE: at the cap: the idle one is unloaded
        deadline = time.monotonic() + WAIT_S
        while _status(env, loaded) != "unloading":
            assert time.monotonic() < deadline, f"{loaded} was not unloaded for {other}"
            time.sleep(0.01)
        for_unloading = pool.submit(ask, env, loaded)
        assert for_other.result(timeout=WAIT_S)
        assert for_unloading.result(timeout=WAIT_S)
    assert counter.most == 1
    # NOTE: which of the two is loaded at the end depends on which load the supervisor
    # admitted first once the unload ended; one of them, alone, either way.
    assert len(served_by(env)) == 1


def test_router_stop_leaves_no_engine(env: Env, models: tuple[str, str]) -> None:
    # NOTE: the model the test above left loaded, if any: asking it starts no engine.
    [model, *_] = [*served_by(env), models[1]]
    assert ask(env, model)
    pids = [r.handle.pid for r in RecordStore(env.state).all()]
    stopped = env.gomgr("router", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not any(alive(pid) for pid in pids)
    assert RecordStore(env.state).all() == []
