"""--tokenizer-worker-num 3: three HTTP/tokenizer processes on one port, one scheduler.

One short-lived server (``--enable-metrics``), tests in file order, the kill last. Which
worker serves a connection is read from the kernel (psutil): the workers are the server's
processes listening on its port, and the owner of a connection is the one holding its
accepted end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

WORKERS = 3
EXIT_AFTER_KILL_S = 5.0
GENERATE = {"text": "Hello", "sampling_params": {"max_new_tokens": 2, "temperature": 0}}
# NOTE: long enough to still run while the test looks at it, short enough to finish fast.
LONG = {"text": "Count to one hundred:", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}


@pytest.fixture(scope="module")
def server(smollm2_dir: Path, launch_server: Callable[..., EngineServer]) -> Iterator[EngineServer]:
    running = launch_server(
        smollm2_dir,
        ["--tokenizer-worker-num", str(WORKERS), "--enable-metrics", "--skip-server-warmup", "--max-total-tokens", "8192"],
    )
    yield running
    running.stop_and_check()


@pytest.fixture(scope="module")
def workers(server: EngineServer) -> list[psutil.Process]:
    """The server's processes that accept on its port: the launcher and two spawned workers."""
    found = [
        process
        for process in [psutil.Process(server.process.pid), *server.children]
        if any(c.status == psutil.CONN_LISTEN and c.laddr.port == server.port for c in process.net_connections())
    ]
    assert len(found) == WORKERS, f"{len(found)} processes listen on the port"
    return found


def _client_port(response: httpx.Response) -> int:
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


def _owners(workers: list[psutil.Process]) -> dict[int, int]:
    """Client port → pid of the worker holding that connection, for every open connection."""
    return {c.raddr.port: w.pid for w in workers for c in w.net_connections() if c.raddr}


def _owner(workers: list[psutil.Process], response: httpx.Response) -> int:
    """The pid of the worker that holds the connection ``response`` came over."""
    return _owners(workers)[_client_port(response)]


def _clients_on_each_worker(
    server: EngineServer, workers: list[psutil.Process], stack: ExitStack, limit: int = 120
) -> dict[int, httpx.Client]:
    """One kept-alive client connected to each worker: new connections until all are hit."""
    by_worker: dict[int, httpx.Client] = {}
    for _ in range(limit):
        client = stack.enter_context(server.client())
        by_worker.setdefault(_owner(workers, client.get("/health")), client)
        if len(by_worker) == WORKERS:
            return by_worker
    raise AssertionError(f"{limit} connections reached only {len(by_worker)} of {WORKERS} workers")


def _metric(client: httpx.Client, name: str) -> float:
    text = client.get("/metrics").text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def test_requests_spread_over_the_workers_with_unique_ids(server: EngineServer, workers: list[psutil.Process]) -> None:
    with ExitStack() as stack:
        clients = [stack.enter_context(server.client()) for _ in range(30)]

        def generate(client: httpx.Client) -> tuple[int, str]:
            reply = client.post("/generate", json=GENERATE)
            assert reply.status_code == 200, reply.text
            return _client_port(reply), reply.json()["meta_info"]["id"]

        with ThreadPoolExecutor(10) as pool:
            served = list(pool.map(generate, clients))
        # NOTE: read while the clients keep their connections open.
        owners = _owners(workers)
    assert {owners[port] for port, _ in served} == {w.pid for w in workers}
    assert len({rid for _, rid in served}) == len(served)


def test_metrics_and_server_info_count_every_worker(server: EngineServer, workers: list[psutil.Process]) -> None:
    with ExitStack() as stack:
        clients = list(_clients_on_each_worker(server, workers, stack).values())
        before = _metric(clients[0], "sglang:num_requests_total")
        for client in clients:
            assert client.post("/generate", json=GENERATE).status_code == 200
        for client in clients:
            assert _metric(client, "sglang:num_requests_total") == before + WORKERS
        # NOTE: two requests left running in two workers; the third worker counts both.
        streams = [stack.enter_context(c.stream("POST", "/generate", json={**LONG, "stream": True})) for c in clients[:2]]
        # NOTE: one iterator per stream, kept: a dropped one closes its connection.
        lines = [stream.iter_lines() for stream in streams]
        for stream_lines in lines:
            assert next(stream_lines).startswith("data:")
        info = clients[2].get("/server_info").json()
        assert info["in_flight_requests"] == 2
        assert info["num_running_reqs"] + info["num_waiting_reqs"] == 2
        assert clients[2].post("/abort_request", json={"abort_all": True}).status_code == 200
        for stream_lines in lines:
            assert '"abort"' in "".join(stream_lines)


def test_rid_is_one_request_across_workers(server: EngineServer, workers: list[psutil.Process]) -> None:
    with ExitStack() as stack:
        owner, other, _ = _clients_on_each_worker(server, workers, stack).values()
        body = {**LONG, "rid": "shared-rid", "stream": True}
        with owner.stream("POST", "/generate", json=body) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("data:")
            duplicate = other.post("/generate", json={**GENERATE, "rid": "shared-rid"})
            assert duplicate.status_code == 400
            assert "already in use" in duplicate.text
            # NOTE: aborted from the worker that does not own it.
            assert other.post("/abort_request", json={"rid": "shared-rid"}).status_code == 200
            assert '"abort"' in "".join(lines)
        assert other.post("/generate", json={**GENERATE, "rid": "shared-rid"}).status_code == 200


def test_weight_update_reaches_every_worker(
    server: EngineServer, workers: list[psutil.Process], smollm2_dir: Path
) -> None:
    with ExitStack() as stack:
        clients = list(_clients_on_each_worker(server, workers, stack).values())
        before = clients[0].get("/model_info").json()["weight_version"]
        reply = clients[0].post("/update_weights_from_disk", json={"model_path": str(smollm2_dir)})
        assert reply.status_code == 200, reply.text
        assert [c.get("/model_info").json()["weight_version"] for c in clients] == [before + 1] * WORKERS


def test_launcher_imports_no_metrics_library(smollm2_dir: Path) -> None:
    """prometheus_client picks its value store at import: the launcher must set the shared
    directory before anything imports it."""
    probe = "import json, sys, engine.launch_server; print(json.dumps('prometheus_client' in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) is False


def test_killed_worker_ends_the_server(server: EngineServer, workers: list[psutil.Process]) -> None:
    spawned = [w for w in workers if w.pid != server.process.pid]
    spawned[0].kill()
    killed = time.monotonic()
    try:
        returncode = server.process.wait(EXIT_AFTER_KILL_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server still runs {EXIT_AFTER_KILL_S:.0f} s after a tokenizer worker was killed")
    assert returncode != 0
    left = server.leftover_children(max(0.0, EXIT_AFTER_KILL_S - (time.monotonic() - killed)))
    assert not left, f"children outlived the server: {[p.pid for p in left]}"
    assert "tokenizer-" in server.log_tail() and "died" in server.log_tail()

