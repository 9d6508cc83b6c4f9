"""Models on demand through the background router (issue #23 done-when), all real processes:
`gomgr router start` runs the supervisor; the official openai client's first request loads the
store's SmolLM2, the keep-alive unloads it, `gomgr router stop` ends everything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from manager.state.records import RecordStore
from tests.support.gomgr_env import Env
from tests.support.on_demand import alive, ask, client

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


def _wait_unloaded(env: Env) -> None:
    deadline = time.monotonic() + WAIT_S
    while RecordStore(env.state).all():
        assert time.monotonic() < deadline, "the idle model was not unloaded"
        time.sleep(0.2)


# NOTE: first in the file: the supervisor has loaded nothing yet, and the next test starts
# from the engine this one loads instead of loading one more.
def test_listed_unloaded_and_sixteen_concurrent_first_requests_start_one_engine(
    env: Env, model: str
) -> None:
    assert model in [m.id for m in client(env).models.list().data]
    assert RecordStore(env.state).all() == []
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: ask(env, model), range(16)))
    engines = RecordStore(env.state).all()  # NOTE: read at once, well inside the keep-alive
    assert all(answers)
    assert len(engines) == 1


def test_loaded_on_request_unloaded_when_idle_and_loaded_again(env: Env, model: str) -> None:
    assert ask(env, model)  # NOTE: loaded by the test above (within its keep-alive) or now
    [row] = env.ps()
    assert row["served_name"] == model
    assert row["labels"]["gomgr.on_demand"] == "1"
    assert isinstance(row["expires_at"], float)
    assert row["expires_at"] < time.time() + KEEP_ALIVE_S + 5

    deadline = time.monotonic() + KEEP_ALIVE_S + WAIT_S
    while alive(row["pid"]):
        assert time.monotonic() < deadline, "the engine still runs after its keep-alive"
        time.sleep(0.2)
    _wait_unloaded(env)
    assert env.ps() == []
    assert model in [m.id for m in client(env).models.list().data]

    assert ask(env, model)
    # NOTE: read at once (no `gomgr ps` process), so the next test asks well inside the
    # keep-alive and finds this engine loaded.
    [again] = RecordStore(env.state).all()
    assert again.id != row["id"]


def test_router_stop_ends_the_supervisor_and_its_engines(env: Env, model: str) -> None:
    assert ask(env, model)
    router = env.daemon().running()
    assert router is not None
    engine_pids = [r.handle.pid for r in RecordStore(env.state).all()]
    assert engine_pids

    stopped = env.gomgr("router", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not alive(router.pid)
    assert all(not alive(pid) for pid in engine_pids)
    assert RecordStore(env.state).all() == []
