"""Rerank, score and classify requests dispatch by their body's `model`, like chat.

Two echo upstreams (tests/router/echo_server.py) tell which one answered and what body it
got; the real-engine check is tests/router/rerank/test_router_rerank_engine.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.router.conftest import Proc, Router, start_echo, start_router, stop

ROUTES = ("/v1/rerank", "/v2/rerank", "/v1/score", "/classify", "/v1/classify")
RERANK = {"query": "q", "documents": ["a", "b"], "top_n": 1}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    log_dir = tmp_path_factory.mktemp("rerank-dispatch")
    procs: list[Proc] = []
    try:
        procs += [start_echo(log_dir, "ranker-a"), start_echo(log_dir, "ranker-b")]
        router = start_router(log_dir)
        procs.append(router)
        router.register(procs[0], "ranker-a", id="a", kind="openai", aliases=["alias-a"])
        router.register(procs[1], "ranker-b", id="b", kind="engine")
        yield router
    finally:
        for proc in reversed(procs):
            stop(proc)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("model", "served"), [("ranker-a", "ranker-a"), ("alias-a", "ranker-a"),
                                              ("ranker-b", "ranker-b")])
def test_dispatched_by_model_and_alias(setup: Router, route: str, model: str, served: str) -> None:
    reply = httpx.post(f"{setup.url}{route}", json={"model": model, **RERANK}, timeout=10)
    assert reply.status_code == 200, reply.text
    echoed = reply.json()
    assert echoed["route"] == route and echoed["served_by"] == served
    if route == "/classify":
        # NOTE: the native /classify body has no `model` (SGLang's shape): it is not forwarded
        assert echoed["body"] == RERANK
    else:
        assert echoed["body"] == {"model": served, **RERANK}


@pytest.mark.parametrize("route", ROUTES)
def test_unknown_or_missing_model_gets_the_router_error(setup: Router, route: str) -> None:
    unknown = httpx.post(f"{setup.url}{route}", json={"model": "nope", **RERANK}, timeout=10)
    assert unknown.status_code == 404, unknown.text
    error = unknown.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "ranker-a, ranker-b" in error["message"]
    missing = httpx.post(f"{setup.url}{route}", json=RERANK, timeout=10)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_model"


def test_backends_without_model_info_list_no_capabilities(setup: Router) -> None:
    """An upstream with no /get_model_info (vLLM, this echo server) is asked once, says nothing."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        b["state"] != "ready" for b in setup.admin("GET", "/backends").json()["backends"]
    ):
        time.sleep(0.1)
    cards = httpx.get(f"{setup.url}/v1/models", timeout=10).json()["data"]
    assert [c["id"] for c in cards] == ["ranker-a", "ranker-b"]
    assert all("capabilities" not in c for c in cards)
    backends = setup.admin("GET", "/backends").json()["backends"]
    assert [b["capabilities"] for b in backends] == [[], []]
