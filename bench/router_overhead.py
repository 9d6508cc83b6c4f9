"""The router's added latency and SSE pass-through rate, against direct access and LiteLLM.

    python -m bench.router_overhead [--requests 2000] [--chunks 5000]

One deterministic echo upstream (tests/router/echo_server.py), reached three ways: directly,
through our router, and through the LiteLLM proxy (a real peer, installed by this script
into bench/.venv-litellm on first run). Latency: sequential tiny non-streaming chat requests
over one keep-alive connection per target; each proxy takes turns with direct access,
request by request, so machine noise hits both alike, and "added" is a percentile of the
proxy's minus the same percentile of the direct requests taken in turn with it. The proxies
are measured in alternating blocks (`ROUNDS` each), so LiteLLM's background work does not
land on the router's turns. Rate: one stream of `--chunks` SSE chunks, chunks/s, in
`ROUNDS` parts.
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

from tests.router.conftest import Proc, start, start_echo, start_router, stop

ROOT = Path(__file__).resolve().parents[1]
LITELLM_VENV = ROOT / "bench" / ".venv-litellm"
LITELLM_SPEC = "litellm[proxy]"
MODEL = "echo-model"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
ROUNDS = 10
# NOTE: LiteLLM refuses to start without a master key; every target gets this header (the
# router does not forward client credentials, the echo server ignores them).
LITELLM_KEY = "sk-bench-" + "0" * 32


def ensure_litellm() -> Path:
    """The litellm executable, installing it into its own venv first if needed."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        # NOTE: keeps the venv out of git without touching the repository's .gitignore.
        (LITELLM_VENV / ".gitignore").write_text("*\n")
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM_SPEC], check=True
        )
    return exe


@contextmanager
def litellm_proxy(echo: Proc, log_dir: Path) -> Iterator[Proc]:
    from tests.support.engine_process import free_port

    config = log_dir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {echo.url}/v1\n"
        "      api_key: none\n"
        "general_settings:\n"
        f"  master_key: {LITELLM_KEY}\n"
    )
    port = free_port()
    # NOTE: a local cost map: otherwise LiteLLM fetches one from GitHub at import.
    os.environ.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR")
    command = [
        str(ensure_litellm()),
        "--config",
        str(config),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--num_workers",
        "1",
    ]
    proc = start(
        command, port, log_dir / "litellm.log", ready_path="/health/liveliness", timeout_s=240
    )
    try:
        yield proc
    finally:
        stop(proc)


def _latency(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    reply = client.post(url, json=BODY)
    elapsed = time.perf_counter() - started
    if reply.status_code != 200:
        raise RuntimeError(f"{url}: {reply.status_code} {reply.text[:200]}")
    return elapsed


def _stream_rate(client: httpx.Client, url: str, chunks: int) -> float:
    # NOTE: distinct words: LiteLLM aborts a stream that repeats one chunk 100 times.
    words = " ".join(f"w{i}" for i in range(chunks))
    body = {
        **BODY,
        "stream": True,
        "max_tokens": chunks,
        "messages": [{"role": "user", "content": words}],
    }
    started = time.perf_counter()
    with client.stream("POST", url, json=body) as reply:
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    elapsed = time.perf_counter() - started
    # NOTE: LiteLLM re-chunks the stream (fewer, merged events), so the rate counts the
    # upstream's chunks delivered, and only the end of the stream is checked.
    if not lines or lines[-1] != "data: [DONE]":
        raise RuntimeError(f"{url}: the stream did not finish ({len(lines)} events)")
    return chunks / elapsed


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


def run(requests: int = 2000, chunks: int = 5000) -> dict[str, Any]:
    # NOTE: recorded with the results: on a shared machine it says how far to trust them.
    load_at_start = os.getloadavg()[0]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        echo = start_echo(log_dir, MODEL)
        stack.callback(stop, echo)
        router = start_router(log_dir)
        stack.callback(stop, router)
        router.register(echo, MODEL, kind="openai")
        targets = {"direct": echo.url, "gomgr router": router.url}
        litellm_error = None
        try:
            targets["LiteLLM proxy"] = stack.enter_context(litellm_proxy(echo, log_dir)).url
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            # NOTE: recorded in the table (its last log line says why), so ours still reports.
            litellm_error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
        # NOTE: per proxy: its latencies, and those of the direct requests taken in turn with it
        paired: dict[str, list[float]] = {name: [] for name in targets if name != "direct"}
        lat: dict[str, list[float]] = {name: [] for name in paired}
        rate: dict[str, list[float]] = {name: [] for name in targets}
        with httpx.Client(timeout=60, headers={"authorization": f"Bearer {LITELLM_KEY}"}) as client:
            urls = {name: f"{base}/v1/chat/completions" for name, base in targets.items()}
            for url in urls.values():  # NOTE: warm-up: connections, imports, caches
                for _ in range(50):
                    _latency(client, url)
            for _ in range(ROUNDS):
                for name, direct in paired.items():
                    for _ in range(requests // ROUNDS):
                        direct.append(_latency(client, urls["direct"]))
                        lat[name].append(_latency(client, urls[name]))
                for name, url in urls.items():
                    rate[name].append(_stream_rate(client, url, chunks // ROUNDS))
    rows: dict[str, dict[str, Any]] = {}
    for i, (name, direct) in enumerate(paired.items()):
        # NOTE: the direct stream rate is shown once, on the first baseline row.
        direct_rate = statistics.median(rate["direct"]) if i == 0 else None
        rows[f"direct, in turns with {name}"] = {
            "p50_ms": _pct(direct, 50),
            "p99_ms": _pct(direct, 99),
            "chunks_per_s": direct_rate,
        }
        rows[name] = {
            "p50_ms": _pct(lat[name], 50),
            "p99_ms": _pct(lat[name], 99),
            "added_p50_ms": _pct(lat[name], 50) - _pct(direct, 50),
            "added_p99_ms": _pct(lat[name], 99) - _pct(direct, 99),
            "chunks_per_s": statistics.median(rate[name]),
        }
    return {
        "rows": rows,
        "litellm_error": litellm_error,
        "requests": requests,
        "chunks": chunks,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
            f"{load_at_start:.1f} at start and {os.getloadavg()[0]:.1f} at the end"
        ),
        "command": f"python -m bench.router_overhead --requests {requests} --chunks {chunks}",
    }


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        "| path | p50 ms | p99 ms | added p50 ms | added p99 ms | SSE chunks/s |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result["rows"].items():
        added = (
            "— | —"
            if "added_p50_ms" not in r
            else f"{r['added_p50_ms']:.3f} | {r['added_p99_ms']:.3f}"
        )
        sse = "—" if r["chunks_per_s"] is None else f"{r['chunks_per_s']:,.0f}"
        lines.append(f"| {name} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {added} | {sse} |")
    rows = result["rows"]
    if result["litellm_error"]:
        lines.append(f"| LiteLLM proxy | not run: {result['litellm_error']} | | | | |")
    elif "LiteLLM proxy" in rows and rows["gomgr router"]["added_p50_ms"] > 0:
        ratio = rows["LiteLLM proxy"]["added_p50_ms"] / rows["gomgr router"]["added_p50_ms"]
        lines += ["", f"LiteLLM adds {ratio:.1f}x the router's p50 latency."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=5000)
    args = parser.parse_args()
    print(markdown_table(run(args.requests, args.chunks)))


if __name__ == "__main__":
    main()
