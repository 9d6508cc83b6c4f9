"""--tp-size N on CPU (gloo): tiny random-weight Llama and Qwen2 checkpoints served by real
servers at N ranks give the greedy tokens and log-probs of the same engine at one rank, with
the radix cache on (the Qwen2 server with the overlap scheduler); one worker killed takes the
whole server down; bad values fail at once.

Tolerance: log-probs within 1e-4 (absolute). Sharded matmuls and the all-reduce sum fp32
partial products in another order than one rank does; on these models they differ by ~1e-6.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest
from transformers import LlamaConfig, Qwen2Config

from engine.engine import Engine
from tests.engine.models.conftest import TINY_SHAPE, build_checkpoint
from tests.engine.server.conftest import fetch_server_info
from tests.support.engine_process import EngineServer, start_engine_server

pytestmark = pytest.mark.slow

LOGPROB_ATOL = 1e-4
MAX_NEW = 6
TOP_K = 3
SHARED = [700, 31, 2, 4095, 123, 55, 999, 8]
PROMPTS = [[17, 305, 42], [*SHARED, 2048, 77], [*SHARED, 13, 640, 211]]
# NOTE: 4-token prefill chunks, so a prompt's KV is written over several steps on every rank.
ENGINE_ARGS = {
    "max_total_tokens": 512, "context_length": 128, "max_running_requests": 8, "chunked_prefill_size": 4,
}  # fmt: skip
# NOTE: Llama with one KV head (a copy on every rank) and 6 query heads over 3 ranks; Qwen2
# (q/k/v biases, tied embeddings) with its 2 KV heads split over 2 ranks.
MODELS: dict[str, tuple[type, dict[str, Any]]] = {
    "llama": (
        LlamaConfig,
        {"num_attention_heads": 6, "num_key_value_heads": 1, "hidden_size": 96, "intermediate_size": 192},
    ),
    "qwen2": (Qwen2Config, {"tie_word_embeddings": True}),
}
# NOTE: two servers, not every (model, size) pair: each rank is a process importing torch.
# The Qwen2 one runs the overlap scheduler: its forward thread drives the workers' steps.
SERVED = [("llama", 3), ("qwen2", 2)]
OVERLAP = {("qwen2", 2)}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> dict[str, Path]:
    paths = {}
    for name, (config_cls, shape) in MODELS.items():
        paths[name] = tmp_path_factory.mktemp(name)
        build_checkpoint(paths[name], config_cls(**{**TINY_SHAPE, **shape}), smollm2_dir)
    return paths


@pytest.fixture(scope="module")
def servers(
    checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, int], EngineServer]]:
    """A server per (model, tp size), started side by side."""
    logs = tmp_path_factory.mktemp("logs")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in ENGINE_ARGS.items()]

    def start(served: tuple[str, int]) -> EngineServer:
        name, tp = served
        log = logs / f"{name}-tp{tp}.log"
        overlap = ["--enable-overlap-schedule"] if served in OVERLAP else []
        return start_engine_server(checkpoints[name], log, [*flags, *overlap, f"--tp-size={tp}", "--skip-server-warmup"])

    with ThreadPoolExecutor(len(SERVED)) as pool:
        futures = {served: pool.submit(start, served) for served in SERVED}
    # NOTE: one server that failed to start must not leave the other running.
    started = {served: future.result() for served, future in futures.items() if future.exception() is None}
    try:
        yield {served: future.result() for served, future in futures.items()}
    finally:
        for server in started.values():
            server.stop_and_check()


def _reference(path: Path) -> list[dict[str, Any]]:
    """The same engine at --tp-size 1 (the offline Engine in this process: the code a one-rank
    server runs, without a third server's start), the prompts one after another."""
    engine = Engine(str(path), **ENGINE_ARGS)
    params = {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}
    out = [engine.generate(input_ids=p, sampling_params=params, return_logprob=True, top_logprobs_num=TOP_K) for p in PROMPTS]
    return [r for r in out if isinstance(r, dict)]


def _generate(server: EngineServer, input_ids: list[int] | list[list[int]]) -> Any:
    body = {
        "input_ids": input_ids, "return_logprob": True, "top_logprobs_num": TOP_K,
        "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True},
    }  # fmt: skip
    with server.client() as client:
        reply = client.post("/generate", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["output_ids"] == want["output_ids"]
    assert got["text"] == want["text"]
    got_meta, want_meta = got["meta_info"], want["meta_info"]
    for (g, g_id, _), (w, w_id, _) in zip(got_meta["output_token_logprobs"], want_meta["output_token_logprobs"], strict=True):
        assert g_id == w_id and abs(g - w) <= LOGPROB_ATOL
    for g_step, w_step in zip(got_meta["output_top_logprobs"], want_meta["output_top_logprobs"], strict=True):
        for (g, g_id, _), (w, w_id, _) in zip(g_step, w_step, strict=True):
            assert g_id == w_id and abs(g - w) <= LOGPROB_ATOL


@pytest.fixture(scope="module")
def references(checkpoints: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    return {name: _reference(path) for name, path in checkpoints.items()}


@pytest.mark.parametrize("served", SERVED, ids=[f"{name}-tp{tp}" for name, tp in SERVED])
def test_tp_matches_one_rank_with_the_radix_cache(
    served: tuple[str, int],
    servers: dict[tuple[str, int], EngineServer],
    references: dict[str, list[dict[str, Any]]],
) -> None:
    server, refs = servers[served], references[served[0]]
    batch = _generate(server, PROMPTS)
    for got, want in zip(batch, refs, strict=True):
        _assert_same(got, want)
    # NOTE: the prompt again: its prefix now comes from the radix cache, the answer must not change.
    again = _generate(server, PROMPTS[2])
    assert again["meta_info"]["cached_tokens"] >= len(SHARED)
    _assert_same(again, refs[2])


def test_bad_tp_size_fails_at_once(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    # NOTE: the check reads config.json alone, so a Phi-3 config without weights shows the refusal.
    phi3 = tmp_path / "phi3"
    phi3.mkdir()
    (phi3 / "config.json").write_text('{"architectures": ["Phi3ForCausalLM"], "num_attention_heads": 4}')
    cases = (
        (checkpoints["llama"], "0", "must be >= 1"),
        (checkpoints["llama"], "4", "must divide the model's 6 attention heads"),
        (phi3, "2", "does not shard Phi3ForCausalLM yet"),
    )
    for model, tp, reason in cases:
        command = [sys.executable, "-m", "engine.launch_server", "--model-path", str(model), "--tp-size", tp]
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0], result.stderr


def test_disconnect_mid_stream_frees_everything_with_the_overlap_scheduler(
    servers: dict[tuple[str, int], EngineServer],
) -> None:
    """The client leaves while its request's step is in flight: the request ends, every KV slot
    returns to the pool or the radix tree, and the tree empties on a flush."""
    server = servers[("qwen2", 2)]
    params = {"max_new_tokens": 120, "temperature": 0, "ignore_eos": True}
    body = {"input_ids": PROMPTS[0], "stream": True, "sampling_params": params}
    with server.client() as own, own.stream("POST", "/generate", json=body) as stream:
        assert stream.status_code == 200
        chunks = 0
        for line in stream.iter_lines():
            chunks += line.startswith("data:")
            if chunks == 2:
                break
    # The connection is closed here, mid-stream.
    with server.client() as client:
        deadline = time.monotonic() + 60
        while (info := fetch_server_info(client))["num_running_reqs"] or (
            info["kv_pool_used_tokens"] != info["radix_cache_tokens"]
        ):
            assert time.monotonic() < deadline, info
            time.sleep(0.2)
        assert client.post("/flush_cache").status_code == 200
        assert fetch_server_info(client)["kv_pool_used_tokens"] == 0


def test_killing_a_worker_ends_the_server(servers: dict[tuple[str, int], EngineServer]) -> None:
    """Last: it ends the 3-rank Llama server. Its children were recorded once it was healthy."""
    server = servers[("llama", 3)]
    found = re.search(r"tensor-parallel rank 1 of 3 ready \(pid (\d+)\)", server.log_path.read_text())
    assert found, server.log_tail()
    worker = int(found.group(1))
    family = [server.process.pid, *(child.pid for child in server.children)]
    assert worker in family
    os.kill(worker, signal.SIGKILL)
    assert server.process.wait(20) != 0
    _, alive = psutil.wait_procs([psutil.Process(pid) for pid in family if psutil.pid_exists(pid)], timeout=10)
    assert not alive, f"left running: {[p.pid for p in alive]}\n{server.log_tail()}"
