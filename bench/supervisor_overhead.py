"""What the supervisor adds: to a cold start, and to a request for a model already loaded.

    python -m bench.supervisor_overhead [--rounds 3] [--requests 1000]

Cold start, in turns each round on the store's SmolLM2 (real engine processes):
- supervised: the background router (`python -m manager.supervisor`, as `gomgr router start`
  runs it) with the model unloaded; one chat request, timed from send to answer; then an
  empty Ollama generate with `keep_alive: 0` unloads it, and the bench waits for its record
  to go.
- direct: the very command and environment the supervisor ran the engine with (read from its
  record), spawned by hand, `/health` polled every 20 ms, then the same request.
The overhead is the median of the first minus the median of the second: planning, the
readiness checks, the record, the health wait's polling and the registration.

Added latency to a loaded model: one echo upstream (tests/router/echo_server.py) registered
with the supervisor's router and with the plain router (`python -m router`); sequential tiny
requests, each router in turns with direct access request by request, as router_overhead
measures it, so its row compares with the router's recorded figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.router_overhead import MODEL, _latency, _pct
from manager.models.pull import pull_model
from manager.runtimes.process import ProcessRuntime
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore
from manager.supervisor.catalog import served_name
from tests.router.conftest import Router, start, start_echo, start_router, stop
from tests.support.engine_process import free_port, stop_process

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
PROMPT = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
DIRECT_POLL_S = 0.02
READY_LINE = "the server is ready"  # engine/server/warmup.py, logged as /health turns 200
WAIT_S = 300.0
ROUNDS = 10


@contextmanager
def supervisor_router(root: Path) -> Iterator[Router]:
    """The supervisor's router over the user's store, its state under `root`."""
    store = pull_model(REPO).model.path.parents[1]
    os.environ.update(
        GOMGR_STATE_DIR=str(root / "state"), GOMGR_CONFIG_DIR=str(root / "config"),
        GOMGR_MODELS_DIR=str(store), GOMGR_KEEP_ALIVE="5m",
    )
    port = free_port()
    token_file = root / "router.token"
    command = [
        sys.executable, "-m", "manager.supervisor", "--port", str(port), "--admin-token-file",
        str(token_file), "--health-interval", "0.2", "--log-level", "warning",
    ]
    proc = start(command, port, root / "supervisor.log")
    try:
        yield Router(proc.process, proc.port, proc.log_path, token_file.read_text().strip())
    finally:
        stop(proc)


def _ask(client: httpx.Client, base_url: str, model: str, **extra: Any) -> float:
    started = time.perf_counter()
    reply = client.post(f"{base_url}/v1/chat/completions", json={"model": model, **PROMPT, **extra})
    elapsed = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{base_url}: {reply.status_code} {reply.text[:300]}")
    return elapsed


def _ready_at(log: Path) -> float:
    """Unix time of the engine's last "the server is ready" line (its /health turns 200 then)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if READY_LINE in line]
    if not lines:
        raise RuntimeError(f"no ready line in {log}")
    stamp = lines[-1].split(" engine ", 1)[0]
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _wait_unloaded(paths: StatePaths) -> None:
    deadline = time.monotonic() + WAIT_S
    while RecordStore(paths).all():
        if time.monotonic() > deadline:
            raise RuntimeError("the supervisor did not unload the model")
        time.sleep(0.05)


def _supervised_cold(
    client: httpx.Client, router: Router, model: str, paths: StatePaths
) -> tuple[float, float, float, EngineRecord]:
    """One cold start through the supervisor: its time, the parts before the engine's spawn
    and after it was ready, and the engine's record. The model is then unloaded as an Ollama
    client would (an empty generate with keep_alive 0)."""
    sent = time.time()
    elapsed = _ask(client, router.url, model)
    answered = time.time()
    [record] = RecordStore(paths).all()
    before_spawn = record.handle.started_at - sent
    after_ready = answered - _ready_at(record.handle.log_path)
    reply = client.post(f"{router.url}/api/generate", json={"model": model, "keep_alive": 0})
    if reply.status_code != 200:
        raise RuntimeError(f"unload: {reply.status_code} {reply.text[:300]}")
    _wait_unloaded(paths)
    return elapsed, before_spawn, after_ready, record


def _direct_cold(
    client: httpx.Client, record: EngineRecord, paths: StatePaths, log: Path
) -> tuple[float, float]:
    """The same engine, started by hand on a fresh port: spawn → /health 200 → one answer.
    Its time, and the part after the engine was ready."""
    port = free_port()
    command = ProcessRuntime(paths).command(record.handle.spec)
    command[command.index("--port") + 1] = str(port)
    env = {**os.environ, **dict(record.handle.spec.env)}
    base_url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the direct engine did not become healthy (log: {log})")
            try:
                if client.get(f"{base_url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(DIRECT_POLL_S)
        _ask(client, base_url, record.handle.spec.served_name)
        elapsed = time.perf_counter() - started
        return elapsed, time.time() - _ready_at(log)
    finally:
        stop_process(process)


def _added_latency(client: httpx.Client, targets: dict[str, str], requests: int) -> dict[str, dict[str, float]]:
    """Per router: p50/p99 of its requests and of the direct ones taken in turn with it."""
    direct_url = f"{targets.pop('direct')}/v1/chat/completions"
    urls = {name: f"{base}/v1/chat/completions" for name, base in targets.items()}
    paired: dict[str, list[float]] = {name: [] for name in urls}
    lat: dict[str, list[float]] = {name: [] for name in urls}
    for url in [direct_url, *urls.values()]:  # NOTE: warm-up: connections, imports, caches
        for _ in range(50):
            _latency(client, url)
    for _ in range(ROUNDS):
        for name, url in urls.items():
            for _ in range(requests // ROUNDS):
                paired[name].append(_latency(client, direct_url))
                lat[name].append(_latency(client, url))
    return {
        name: {
            "direct_p50_ms": _pct(paired[name], 50), "p50_ms": _pct(lat[name], 50),
            "added_p50_ms": _pct(lat[name], 50) - _pct(paired[name], 50),
            "added_p99_ms": _pct(lat[name], 99) - _pct(paired[name], 99),
        }
        for name in urls
    }


def run(rounds: int = 3, requests: int = 1000) -> dict[str, Any]:
    load_at_start = os.getloadavg()[0]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        router = stack.enter_context(supervisor_router(root))
        paths = StatePaths(root / "state")
        stored = pull_model(REPO).model
        model = served_name(stored)
        client = stack.enter_context(httpx.Client(timeout=WAIT_S))
        supervised: list[float] = []
        before_spawn: list[float] = []
        after_ready: list[float] = []
        direct: list[float] = []
        direct_after_ready: list[float] = []
        # NOTE: a first cold start warms the page cache and imports, and names the command.
        *_, record = _supervised_cold(client, router, model, paths)
        for _ in range(rounds):
            elapsed, planning, tail, record = _supervised_cold(client, router, model, paths)
            supervised.append(elapsed)
            before_spawn.append(planning)
            after_ready.append(tail)
            elapsed, tail = _direct_cold(client, record, paths, root / "direct.log")
            direct.append(elapsed)
            direct_after_ready.append(tail)
        echo = start_echo(root, MODEL)
        stack.callback(stop, echo)
        plain = start_router(root)
        stack.callback(stop, plain)
        for target in (plain, router):
            target.register(echo, MODEL, kind="openai")
        latency = _added_latency(
            client, {"direct": echo.url, "gomgr router": plain.url, "supervisor's router": router.url},
            requests,
        )
    return {
        "cold": {
            "supervised_s": statistics.median(supervised), "direct_s": statistics.median(direct),
            # NOTE: the engine's own start varies by a second or more from run to run here, so
            # the overhead is counted where the supervisor acts: before the spawn, and from
            # the engine's ready line to the answer beyond what the direct path takes for it.
            "before_spawn_s": statistics.median(before_spawn),
            "after_ready_s": statistics.median(after_ready),
            "direct_after_ready_s": statistics.median(direct_after_ready),
            "overhead_s": statistics.median(before_spawn)
            + statistics.median(after_ready) - statistics.median(direct_after_ready),
            "supervised_all_s": supervised, "direct_all_s": direct,
        },
        "latency": latency,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
            f"{load_at_start:.1f} at start and {os.getloadavg()[0]:.1f} at the end"
        ),
        "command": f"python -m bench.supervisor_overhead --rounds {rounds} --requests {requests}",
    }


def markdown_table(result: dict[str, Any]) -> str:
    cold = result["cold"]
    each = ", ".join(
        f"{s:.2f}/{d:.2f}" for s, d in zip(cold["supervised_all_s"], cold["direct_all_s"], strict=True)
    )
    lines = [
        "| cold start to first answer | median s |",
        "|---|---|",
        f"| direct engine (spawn → /health → answer) | {cold['direct_s']:.2f} |",
        f"| through the supervisor (unloaded → answer) | {cold['supervised_s']:.2f} |",
        f"| supervised: request → engine spawned (planning, readiness, record) | {cold['before_spawn_s']:.3f} |",
        f"| supervised: engine ready → answer (health poll, register, forward) | {cold['after_ready_s']:.3f} |",
        f"| direct: engine ready → answer (20 ms poll, request) | {cold['direct_after_ready_s']:.3f} |",
        f"| **supervisor's overhead** (target ≤ 0.5 s) | **{cold['overhead_s']:.3f}** |",
        "",
        (
            f"Each round, supervised/direct s: {each}. The overhead is the first row plus the "
            "second less the third: what the supervisor adds around the engine's own start, "
            "whose run-to-run spread here (a second or more) would swamp a plain difference."
        ),
        "",
        "| loaded model, tiny request | direct p50 ms | p50 ms | added p50 ms | added p99 ms |",
        "|---|---|---|---|---|",
    ]
    for name, r in result["latency"].items():
        lines.append(
            f"| {name} | {r['direct_p50_ms']:.3f} | {r['p50_ms']:.3f} | {r['added_p50_ms']:.3f} "
            f"| {r['added_p99_ms']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    print(markdown_table(run(args.rounds, args.requests)))


if __name__ == "__main__":
    main()
