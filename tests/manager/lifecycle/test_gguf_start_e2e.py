"""`gomgr start org/name:TAG`: a GGUF served as it is, end to end.

Real path: the bundled SmolLM2 Q4_1 GGUF (no conversion) in a store of its own, started with
the process runtime by an isolated manager, one chat answer through its router, then stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import SMOLLM2_REPO
from tests.manager.conftest import SMOLLM2_Q4_1
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow


@pytest.fixture
def gguf_env(tmp_path: Path, smollm2_gguf_store: Path) -> Iterator[Env]:
    built = Env.isolated(tmp_path / "gomgr", smollm2_gguf_store)
    yield built
    built.end_everything()


def test_a_tagged_gguf_starts_answers_and_stops(gguf_env: Env, smollm2_gguf: Path) -> None:
    # NOTE: the tag as a user may type it; it is stored and served upper-case.
    started = gguf_env.start(f"{SMOLLM2_REPO}:q4_1", "--runtime", "process")
    assert started["state"] == "ready"
    assert (started["repo"], started["served_name"]) == (SMOLLM2_Q4_1, SMOLLM2_Q4_1)
    assert started["model_dir"] == str(smollm2_gguf)
    client = OpenAI(base_url=f"{gguf_env.router_url}/v1", api_key="any")
    reply = client.chat.completions.create(
        model=SMOLLM2_Q4_1, messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8, temperature=0,
    )  # fmt: skip
    assert reply.choices[0].message.content

    stopped = gguf_env.gomgr("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert gguf_env.ps() == []
