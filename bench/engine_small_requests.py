"""Many small requests against each way the engine serves HTTP (issue 29).

    python -m bench.engine_small_requests [--systems uvicorn,granian-http1,granian-http2]
        [--requests 2000] [--concurrency 256] [--prompt-len 16] [--max-tokens 8]

For each serving system (a set of engine flags and a client protocol), one engine serves
SmolLM2-135M-Instruct on CPU while `--requests` streamed completions of a short random prompt
and `--max-tokens` tokens run at `--concurrency`: requests/s over the run, and TTFT p50/p99.
Clients (httpx, in this process): "HTTP/1.1" opens a connection per request (bench.serving.load's
client); "HTTP/1.1 pool" keeps `--concurrency` connections alive and reuses them (as the
router's upstream pool does); "HTTP/2" multiplexes the streams over HTTP/2 connections (prior
knowledge), at most `H2_STREAMS_PER_CONNECTION` streams each. The client's CPU time per
request is what a proxy in front of the engine (the router) would pay for the protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
import psutil
from transformers import AutoTokenizer

from bench.serving import workload
from bench.serving.cpu_features import cpu_description
from bench.serving.load import run_requests
from bench.serving.process import exit_on_sigterm, free_port, start_server
from bench.serving.stats import summarize
from bench.serving.systems import MODEL_NAME, REPO
from manager.models.pull import pull_model

SEED = 29
# NOTE: below Granian's default SETTINGS_MAX_CONCURRENT_STREAMS (200), so no stream waits
# on the server's limit rather than on the engine.
H2_STREAMS_PER_CONNECTION = 128


ClientKind = Literal["HTTP/1.1", "HTTP/1.1 pool", "HTTP/2"]


@dataclass(frozen=True)
class System:
    name: str
    flags: tuple[str, ...]  # the engine's serving flags
    client: ClientKind


# NOTE: a new serving option is one more entry here (its name is what --systems takes).
SYSTEMS = (
    System("uvicorn", (), "HTTP/1.1"),
    System("granian-http1", ("--enable-http2",), "HTTP/1.1"),
    System("granian-http2", ("--enable-http2",), "HTTP/2"),
    System("granian-http1-pool", ("--enable-http2",), "HTTP/1.1 pool"),
    System("uvicorn-3-workers", ("--tokenizer-worker-num", "3"), "HTTP/1.1"),
    System("granian-http2-3-workers", ("--enable-http2", "--tokenizer-worker-num", "3"), "HTTP/2"),
)


@dataclass(frozen=True)
class Config:
    systems: tuple[System, ...]
    requests: int
    concurrency: int
    prompt_len: int
    max_tokens: int


def _client(kind: ClientKind, url: str, concurrency: int) -> httpx.AsyncClient | None:
    """The client of ``kind``; None for bench.serving.load's own (a connection per request)."""
    if kind == "HTTP/1.1":
        return None
    http2 = kind == "HTTP/2"
    connections = math.ceil(concurrency / H2_STREAMS_PER_CONNECTION) if http2 else concurrency
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(
        base_url=url, http1=not http2, http2=http2, limits=limits, timeout=900.0
    )


def run_engine(
    flags: tuple[str, ...],
    systems: list[System],
    checkpoint: Path,
    requests: list[workload.Request],
    config: Config,
) -> list[dict[str, Any]]:
    """One engine started with ``flags``; every system of ``systems`` (all with those flags)
    runs the requests against it in turn."""
    port = free_port()
    command = [
        sys.executable, "-m", "engine.launch_server", "--model-path", str(checkpoint),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME, *flags,
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(command, port, Path(tmp) / "engine.log", {}, "/health", 600.0)
        try:
            return [measure(system, server.url, requests, config) for system in systems]
        finally:
            server.stop()


def measure(
    system: System, url: str, requests: list[workload.Request], config: Config
) -> dict[str, Any]:
    # NOTE: each system starts from an empty radix cache, not from the prompts of the last.
    httpx.post(f"{url}/flush_cache", timeout=60).raise_for_status()
    client = _client(system.client, url, config.concurrency)
    cpu_started = time.process_time()
    results, wall = asyncio.run(
        run_requests(url, MODEL_NAME, requests, config.concurrency, {"ignore_eos": True}, client)
    )
    client_cpu_s = time.process_time() - cpu_started
    summary = summarize(results, wall)
    return {
        "name": system.name,
        "flags": " ".join(system.flags),
        "client": system.client,
        "requests_per_s": (summary.requests - summary.failed) / wall,
        "client_cpu_ms_per_request": client_cpu_s * 1000 / len(requests),
        **summary.as_dict(),
    }


def run(config: Config) -> dict[str, Any]:
    exit_on_sigterm()
    checkpoint = pull_model(REPO).model.path
    tokenizer: Any = AutoTokenizer.from_pretrained(str(checkpoint))
    requests = workload.random_requests(
        tokenizer, config.requests, config.prompt_len, config.max_tokens, SEED
    )
    # NOTE: systems that differ only in their client share one engine (one start, and their
    # runs back to back), in the order first named.
    by_flags: dict[tuple[str, ...], list[System]] = {}
    for system in config.systems:
        by_flags.setdefault(system.flags, []).append(system)
    measured = {
        row["name"]: row
        for flags, systems in by_flags.items()
        for row in run_engine(flags, systems, checkpoint, requests, config)
    }
    rows = [measured[system.name] for system in config.systems]
    cpu = cpu_description()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{psutil.cpu_count()} CPUs ({cpu['model']}; {', '.join(cpu['flags'])})",  # type: ignore[arg-type]
        "command": "python -m bench.engine_small_requests " + " ".join(_argv(config)),
        "rows": rows,
    }


def _argv(config: Config) -> list[str]:
    return [
        "--systems", ",".join(s.name for s in config.systems),
        "--requests", str(config.requests), "--concurrency", str(config.concurrency),
        "--prompt-len", str(config.prompt_len), "--max-tokens", str(config.max_tokens),
    ]  # fmt: skip


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        (
            "| system | engine flags | client | requests/s | TTFT p50 (ms) | TTFT p99 (ms) "
            "| e2e p99 (ms) | client CPU (ms/request) | failed |"
        ),
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['name']} | {row['flags'] or '(default)'} | {row['client']} "
            f"| {row['requests_per_s']:.1f} | {row['ttft_p50_ms']:.0f} | {row['ttft_p99_ms']:.0f} "
            f"| {row['e2e_p99_ms']:.0f} | {row['client_cpu_ms_per_request']:.2f} | {row['failed']} |"
        )
    errors = [f"{row['name']}: {row['errors'][0]}" for row in result["rows"] if row["errors"]]
    return "\n".join(lines + ([""] + [f"First error, {e}" for e in errors] if errors else []))


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = [s.name for s in SYSTEMS]
    parser.add_argument("--systems", default=",".join(names), help=f"comma-separated: {names}")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument(
        "--prompt-len", type=int, default=16, help="tokens of random text per prompt"
    )
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens each completion decodes")
    args = parser.parse_args(argv)
    by_name = {s.name: s for s in SYSTEMS}
    chosen = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in by_name]
    if unknown or not chosen:
        parser.error(f"--systems: unknown {unknown or 'empty'}; choose from {names}")
    return Config(
        tuple(by_name[n] for n in chosen),
        args.requests,
        args.concurrency,
        args.prompt_len,
        args.max_tokens,
    )


def main() -> None:
    result = run(parse_args())
    print(result["command"])
    print(result["machine"])
    print(markdown_table(result))


if __name__ == "__main__":
    main()
