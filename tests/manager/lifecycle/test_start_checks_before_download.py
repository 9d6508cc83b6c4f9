"""`gomgr start` of a model that is not local yet: readiness runs before the download."""

from __future__ import annotations

from pathlib import Path

from manager.models.bundled import WHEEL_DIR_ENV
from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env


def test_a_start_blocked_by_readiness_downloads_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"  # a fresh home: SmolLM2 is not pulled, its wheel not cached
    env = Env.isolated(tmp_path / "home", store)
    dead = f"unix://{tmp_path}/no-dockerd.sock"
    env.vars.update({"DOCKER_HOST": dead, "HF_HUB_OFFLINE": "1"})
    env.vars.pop(WHEEL_DIR_ENV, None)
    try:
        result = env.gomgr("start", SMOLLM2_REPO, "--runtime", "docker")
    finally:
        env.end_everything()
    assert result.returncode == 3, result.stderr
    first = result.stderr.splitlines()[0]
    assert first == f"error: cannot start with the docker runtime: No Docker daemon at {dead}"
    assert sorted(str(p) for p in store.rglob("*")) == []  # no wheel, no model, no work dir
    assert RecordStore(env.state).all() == []
