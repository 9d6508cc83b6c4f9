"""Models on demand through the background router (issue #23 done-when), all real processes:
`gomgr router start` runs the supervisor; the official openai client's first request loads the
store's SmolLM2, the keep-alive unloads it, `gomgr router stop` ends everything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import psutil
import pytest

from manager.models.store import ModelStore, RepoId
from manager.state.records import RecordStore
from manager.supervisor.catalog import served_name
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow

KEEP_ALIVE_S = 3.0
WAIT_S = 60.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Iterator[Env]:
    built = Env.isolated(tmp_path_factory.mktemp("gomgr"), smollm2_dir.parents[1])
    built.vars["GOMGR_KEEP_ALIVE"] = f"{KEEP_ALIVE_S:.0f}s"
    started = built.gomgr("router", "start")
    assert started.returncode == 0, started.stderr
    yield built
    built.end_everything()


@pytest.fixture(scope="module")
def model(smollm2_dir: Path) -> str:
    stored = ModelStore(smollm2_dir.parents[1]).get(RepoId.parse(SMOLLM2_REPO))
    assert stored is not None
    return served_name(stored)


def _client(env: Env) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{env.router_url}/v1", api_key="unused", timeout=300)


def _ask(env: Env, model: str) -> str:
    reply = _client(env).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=8,
    )
    return reply.choices[0].message.content or ""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_unloaded(env: Env) -> None:
    deadline = time.monotonic() + WAIT_S
    while RecordStore(env.state).all():
        assert time.monotonic() < deadline, "the idle model was not unloaded"
        time.sleep(0.2)


def test_listed_loaded_on_request_unloaded_when_idle_and_loaded_again(env: Env, model: str) -> None:
    assert model in [m.id for m in _client(env).models.list().data]
    assert RecordStore(env.state).all() == []

    assert _ask(env, model)
    [row] = env.ps()
    assert row["served_name"] == model
    assert row["labels"]["gomgr.on_demand"] == "1"
    assert isinstance(row["expires_at"], float)
    assert row["expires_at"] < time.time() + KEEP_ALIVE_S + 5

    deadline = time.monotonic() + KEEP_ALIVE_S + WAIT_S
    while not _gone(row["pid"]):
        assert time.monotonic() < deadline, "the engine still runs after its keep-alive"
        time.sleep(0.2)
    _wait_unloaded(env)
    assert env.ps() == []
    assert model in [m.id for m in _client(env).models.list().data]

    assert _ask(env, model)
    [again] = env.ps()
    assert again["id"] != row["id"]


def test_sixteen_concurrent_first_requests_start_one_engine(env: Env, model: str) -> None:
    _wait_unloaded(env)
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: _ask(env, model), range(16)))
    engines = RecordStore(env.state).all()  # NOTE: read at once, well inside the keep-alive
    assert all(answers)
    assert len(engines) == 1


def test_router_stop_ends_the_supervisor_and_its_engines(env: Env, model: str) -> None:
    assert _ask(env, model)
    router = env.daemon().running()
    assert router is not None
    engine_pids = [r.handle.pid for r in RecordStore(env.state).all()]
    assert engine_pids

    stopped = env.gomgr("router", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _gone(router.pid)
    assert all(_gone(pid) for pid in engine_pids)
    assert RecordStore(env.state).all() == []
