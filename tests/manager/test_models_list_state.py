"""`gomgr models list` says which store models are loaded: its STATE column and `state` field
come from the running router's catalog (issue #23), "-" / null when no router answers.
From "unloaded" to "loaded" with a router is proven on the supervisor of
tests/manager/supervisor/test_supervisor_crash.py, which loads the model anyway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env


@pytest.fixture
def env(tmp_path: Path, smollm2_dir: Path) -> Iterator[Env]:
    built = Env.isolated(tmp_path, smollm2_dir.parents[1])
    yield built
    built.end_everything()


def test_without_a_router_the_state_is_unknown(env: Env) -> None:
    assert env.listed_models()[SMOLLM2_REPO]["state"] is None
    assert env.listed_state_cell(SMOLLM2_REPO) == "-"
