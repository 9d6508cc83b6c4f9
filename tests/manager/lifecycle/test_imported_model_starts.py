"""A model imported with `gomgr models pull DIR --name` starts by its name and answers.

Real path: the converted SmolLM2 copied into an empty store of an isolated manager, started
through the process runtime, one chat answer through the background router.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow

COPY = "test/smollm2-copy"


@pytest.fixture
def fresh_env(tmp_path: Path) -> Iterator[Env]:
    """An isolated manager whose store starts empty (the session's SmolLM2 is not in it)."""
    built = Env.isolated(tmp_path / "gomgr", tmp_path / "store")
    yield built
    built.end_everything()


def test_an_imported_model_starts_by_name_and_answers(fresh_env: Env, smollm2_dir: Path) -> None:
    imported = fresh_env.gomgr("models", "pull", str(smollm2_dir), "--name", COPY)
    assert imported.returncode == 0, imported.stderr
    listed = fresh_env.gomgr("models", "list", "--json")
    assert [row["repo"] for row in json.loads(listed.stdout)] == [COPY]

    started = fresh_env.start(COPY, "--runtime", "process")
    assert started["state"] == "ready"
    assert started["repo"] == COPY
    assert started["model_dir"] == str(Path(fresh_env.vars["GOMGR_MODELS_DIR"]) / COPY)
    client = OpenAI(base_url=f"{fresh_env.router_url}/v1", api_key="any")
    reply = client.chat.completions.create(
        model=started["served_name"], messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8, temperature=0,
    )  # fmt: skip
    assert reply.choices[0].message.content

    stopped = fresh_env.gomgr("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert fresh_env.ps() == []
    assert fresh_env.gomgr("models", "rm", COPY).returncode == 0
