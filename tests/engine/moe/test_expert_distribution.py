"""The expert-distribution routes on real engine servers: counts cover exactly the tokens the
model forwarded while recording; a model without experts answers 400."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import LlamaConfig

from tests.engine.models.conftest import TINY_SHAPE as DENSE_SHAPE
from tests.engine.models.conftest import build_checkpoint
from tests.engine.moe.conftest import MOE_CASES
from tests.support.engine_process import EngineServer, start_engine_server

CASE = "qwen2_moe"  # 8 experts, top-2; layer 1 is dense (mlp_only_layers)
MOE_LAYERS = [0, 2]
NUM_EXPERTS = 8
TOP_K = 2
SERVER_ARGS = ("--skip-server-warmup", "--max-total-tokens", "2048")
GREEDY = {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}
ROUTES = ("start", "stop", "dump")


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path
) -> Iterator[dict[str, EngineServer]]:
    """A MoE and a dense server, started side by side: most of a start is importing."""
    paths = {"moe": tmp_path_factory.mktemp(CASE), "dense": tmp_path_factory.mktemp("llama")}
    build_checkpoint(paths["moe"], MOE_CASES[CASE], tokenizer_dir)
    build_checkpoint(paths["dense"], LlamaConfig(**DENSE_SHAPE), tokenizer_dir)
    logs = tmp_path_factory.mktemp("logs")
    with ThreadPoolExecutor(len(paths)) as pool:
        starting = {
            kind: pool.submit(start_engine_server, path, logs / f"{kind}.log", list(SERVER_ARGS))
            for kind, path in paths.items()
        }
    started = {kind: f.result() for kind, f in starting.items() if f.exception() is None}
    try:
        # NOTE: re-raises a failed start, after which the finally stops the other server.
        yield {kind: f.result() for kind, f in starting.items()}
    finally:
        with ThreadPoolExecutor(len(paths)) as pool:
            list(pool.map(EngineServer.stop_and_check, started.values()))


@pytest.fixture(scope="module")
def moe_server(servers: dict[str, EngineServer]) -> EngineServer:
    return servers["moe"]


@pytest.fixture(scope="module")
def dense_server(servers: dict[str, EngineServer]) -> EngineServer:
    return servers["dense"]


def _record(client: httpx.Client, action: str) -> httpx.Response:
    return client.post(f"/{action}_expert_distribution_record")


def _dump(client: httpx.Client) -> dict[tuple[int, int], int]:
    reply = _record(client, "dump")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(reply.text)))
    assert rows[0] == ["layer_id", "expert_id", "count"]
    counts = {(int(layer), int(expert)): int(count) for layer, expert, count in rows[1:]}
    assert len(counts) == len(rows) - 1, "one row per (layer, expert)"
    assert set(counts) == {(layer, e) for layer in MOE_LAYERS for e in range(NUM_EXPERTS)}
    return counts


def _generate(client: httpx.Client, prompts: list[list[int]]) -> list[dict[str, Any]]:
    reply = client.post("/generate", json={"input_ids": prompts, "sampling_params": GREEDY})
    assert reply.status_code == 200, reply.text
    results = reply.json()
    assert isinstance(results, list) and len(results) == len(prompts)
    return results


def _forwarded_tokens(results: list[dict[str, Any]]) -> int:
    """Tokens the model ran: the uncached prompt, then every output token but the last
    (sampled from the final forward, never fed back)."""
    total = 0
    for result in results:
        meta = result["meta_info"]
        total += meta["prompt_tokens"] - meta["cached_tokens"] + meta["completion_tokens"] - 1
    return total


def _per_layer(counts: dict[tuple[int, int], int]) -> dict[int, int]:
    return {layer: sum(counts[layer, e] for e in range(NUM_EXPERTS)) for layer in MOE_LAYERS}


def test_counts_cover_exactly_the_tokens_forwarded_while_recording(
    moe_server: EngineServer,
) -> None:
    with moe_server.client() as client:
        assert set(_dump(client).values()) == {0}, "nothing counts before the first start"
        assert client.post("/flush_cache").status_code == 200
        _generate(client, [[5, 6, 7, 8, 9]])  # before the start: not counted

        started = _record(client, "start")
        assert started.status_code == 200 and started.json()["success"] is True
        recorded = _generate(client, [[17, 305, 42], [9, 1204, 88, 3071, 5, 640, 211]])
        # NOTE: shares the first prompt's prefix: cached tokens are not forwarded again.
        recorded += _generate(client, [[17, 305, 42, 1000, 2000]])
        assert _record(client, "stop").status_code == 200
        _generate(client, [[700, 31, 2, 4095]])  # after the stop: not counted

        counts = _dump(client)
        forwarded = _forwarded_tokens(recorded)
        assert forwarded > 0 and recorded[-1]["meta_info"]["cached_tokens"] > 0
        assert _per_layer(counts) == {layer: forwarded * TOP_K for layer in MOE_LAYERS}
        assert len({c for c in counts.values() if c > 0}) > 1, "routing spreads over experts"
        assert _dump(client) == counts, "a dump leaves the counts as they are"

        assert _record(client, "start").status_code == 200
        assert set(_dump(client).values()) == {0}, "a start clears the previous record"
        assert _record(client, "stop").status_code == 200


@pytest.mark.parametrize("action", ROUTES)
def test_a_model_without_experts_answers_400(dense_server: EngineServer, action: str) -> None:
    with dense_server.client() as client:
        reply = _record(client, action)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "no experts" in error["message"]
