"""Rerank, classify and score through the router on real engines, against the engines directly.

A tiny random-weight BERT cross-encoder (tests/engine/rerank) and SmolLM2 behind one router:
each route answers through the router, by served name and by alias, what the engine answers
directly, and /v1/models says which kinds each model serves.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.rerank.conftest import DOCUMENTS, QUERY, RERANK_NAME
from tests.router.conftest import Router, start_router, stop
from tests.support.engine_process import EngineServer, engine_server

pytestmark = pytest.mark.slow

SMOL = "smollm2"
_VOLATILE = re.compile(r'"(id|created)":("[^"]*"|\d+)')
# NOTE: any two token ids of SmolLM2's vocabulary: /v1/score gives their next-token probabilities.
SCORE = {"query": "Paris is in France:", "items": [" Yes", " No"], "label_token_ids": [9, 42]}
Stack = tuple[Router, EngineServer, EngineServer]


@pytest.fixture(scope="module")
def stack(
    bert_rerank_server: EngineServer, smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    log_dir = tmp_path_factory.mktemp("router-rerank")
    args = ("--served-model-name", SMOL, "--skip-server-warmup")
    with engine_server(smollm2_dir, log_dir, *args) as smol:
        router = start_router(log_dir)
        try:
            router.register(bert_rerank_server.url, RERANK_NAME, id="ranker", aliases=["ranker"])
            router.register(smol.url, SMOL, id="smol")
            _wait_ready(router)
            yield router, bert_rerank_server, smol
        finally:
            stop(router)


def _wait_ready(router: Router) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        backends = router.admin("GET", "/backends").json()["backends"]
        if all(b["state"] == "ready" for b in backends):
            return
        time.sleep(0.1)
    raise AssertionError(f"backends not ready: {backends}")


def _stable(reply: httpx.Response) -> Any:
    """The answer without its request ids and timestamps."""
    assert reply.status_code == 200, reply.text
    return _VOLATILE.sub("", reply.text)


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/rerank", {"query": QUERY, "documents": DOCUMENTS, "top_n": 3}),
        ("/v2/rerank", {"query": QUERY, "documents": DOCUMENTS}),
        ("/v1/classify", {"input": DOCUMENTS[:2]}),
        ("/classify", {"text": DOCUMENTS[:2]}),
    ],
)
def test_rerank_and_classify_through_the_router_equal_direct(
    stack: Stack, route: str, body: dict[str, Any]
) -> None:
    router, ranker, _ = stack
    direct = httpx.post(f"{ranker.url}{route}", json=body, timeout=60)
    for model in (RERANK_NAME, "ranker"):
        routed = httpx.post(f"{router.url}{route}", json={"model": model, **body}, timeout=60)
        assert _stable(routed) == _stable(direct)


def test_score_through_the_router_equals_direct(stack: Stack) -> None:
    router, _, smol = stack
    direct = httpx.post(f"{smol.url}/v1/score", json={"model": SMOL, **SCORE}, timeout=120)
    routed = httpx.post(f"{router.url}/v1/score", json={"model": SMOL, **SCORE}, timeout=120)
    assert _stable(routed) == _stable(direct)
    assert len(routed.json()["scores"]) == 2


def test_models_say_which_kinds_each_model_serves(stack: Stack) -> None:
    router, _, _ = stack
    cards = httpx.get(f"{router.url}/v1/models", timeout=10).json()["data"]
    assert {c["id"]: c["capabilities"] for c in cards} == {
        RERANK_NAME: ["rerank", "classify"],
        SMOL: ["chat", "completion", "score"],
    }
    one = httpx.get(f"{router.url}/v1/models/ranker", timeout=10).json()
    assert one["id"] == RERANK_NAME and one["capabilities"] == ["rerank", "classify"]


def test_wrong_kind_and_unknown_model(stack: Stack) -> None:
    """The engine's own 400 comes through as it is; an unknown model is the router's 404."""
    router, _, _ = stack
    body = {"query": QUERY, "documents": DOCUMENTS}
    wrong = httpx.post(f"{router.url}/v1/rerank", json={"model": SMOL, **body}, timeout=60)
    assert wrong.status_code == 400
    assert "reranking needs a cross-encoder" in wrong.json()["error"]["message"]
    unknown = httpx.post(f"{router.url}/v2/rerank", json={"model": "nope", **body}, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert f"{SMOL}, {RERANK_NAME}" in unknown.json()["error"]["message"]  # NOTE: sorted
