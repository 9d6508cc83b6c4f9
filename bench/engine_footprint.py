"""The engine's memory footprint under load: its process tree's RSS with default flags.

    python -m bench.engine_footprint [--requests 2000] [--concurrency 256] [--prompt-len 32] ...

Our engine serves SmolLM2-135M-Instruct on CPU with no memory flag at all (so with the KV pool
it sizes itself), once from the fp32 safetensors checkpoint and once from the bundled Q4_1
GGUF. For each it records the resident memory of the whole process tree (the HTTP process and
every child, as `ps` counts it) right after `/health`, at its peak while `--requests` short
completions run at `--concurrency`, after they finished and a second later, idle; the KV pool's size from
/server_info; and how many requests were refused. Issue #30's target: at most 1.5 GiB for the
fp32 model, less for the quantized one, nothing refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import httpx
import psutil
from transformers import AutoTokenizer

from bench.serving import workload
from bench.serving.cpu_features import cpu_description
from bench.serving.gguf_model import bundled_gguf
from bench.serving.load import run_requests
from bench.serving.process import Server, exit_on_sigterm, free_port, start_server
from bench.serving.systems import MODEL_NAME, REPO
from manager.models.pull import pull_model

SEED = 30
GIB = 1 << 30
SAMPLE_EVERY_S = 0.25
# NOTE: the scheduler returns a burst's freed heap once idle for 50 ms (scheduler/server_loop.py);
# "idle" is sampled this long after the last answer, "after load" at once.
IDLE_SETTLE_S = 1.0


@dataclass(frozen=True)
class Config:
    requests: int
    concurrency: int
    prompt_len: int
    max_tokens: int


@dataclass(frozen=True)
class Variant:
    name: str
    model: Callable[[Path], Path]  # the safetensors directory -> what --model-path gets


VARIANTS = (
    Variant("SmolLM2 fp32 (safetensors)", lambda checkpoint: checkpoint),
    Variant("SmolLM2 Q4_1 (bundled GGUF)", lambda _checkpoint: bundled_gguf(REPO)),
)


def tree_rss_bytes(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (shared pages counted in each, as
    `ps` and a desktop's task manager count them)."""
    root = psutil.Process(pid)
    total = 0
    for process in (root, *root.children(recursive=True)):
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass  # NOTE: a child that exited between the listing and the read holds nothing.
    return total


class PeakSampler:
    """Samples a process tree's RSS on a thread until stopped; keeps the largest."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = tree_rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.peak = max(self.peak, tree_rss_bytes(self.pid))


def _rss_after(seconds: float, pid: int) -> int:
    time.sleep(seconds)
    return tree_rss_bytes(pid)


def measure(server: Server, requests: list[workload.Request], config: Config) -> dict[str, Any]:
    info = httpx.get(f"{server.url}/server_info", timeout=30).json()
    after_start = tree_rss_bytes(server.process.pid)
    with PeakSampler(server.process.pid) as sampler:
        results, wall = asyncio.run(
            run_requests(server.url, MODEL_NAME, requests, config.concurrency, {"ignore_eos": True})
        )
    refused = [r.error for r in results if r.error.startswith("HTTP ")]
    return {
        "max_total_tokens": info["max_total_tokens"],
        "kv_pool_bytes": info.get("kv_pool_bytes"),
        "rss_after_start": after_start,
        "rss_peak": sampler.peak,
        "rss_after_load": tree_rss_bytes(server.process.pid),
        "rss_idle": _rss_after(IDLE_SETTLE_S, server.process.pid),
        "ok": sum(r.ok for r in results),
        "refused": len(refused),
        "failed": sum(not r.ok for r in results) - len(refused),
        "first_error": next((r.error for r in results if not r.ok), ""),
        "wall_s": wall,
    }


def run_variant(variant: Variant, checkpoint: Path, requests: list[workload.Request], config: Config) -> dict[str, Any]:
    port = free_port()
    command = [
        sys.executable, "-m", "engine.launch_server", "--model-path", str(variant.model(checkpoint)),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME,
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(command, port, Path(tmp) / "engine.log", {}, "/health", 600.0)
        try:
            return {"name": variant.name, **measure(server, requests, config)}
        finally:
            server.stop()


def run(config: Config) -> dict[str, Any]:
    exit_on_sigterm()
    checkpoint = pull_model(REPO).model.path
    tokenizer: Any = AutoTokenizer.from_pretrained(str(checkpoint))
    requests = workload.random_requests(tokenizer, config.requests, config.prompt_len, config.max_tokens, SEED)
    rows = [run_variant(variant, checkpoint, requests, config) for variant in VARIANTS]
    cpu = cpu_description()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{psutil.cpu_count()} CPUs ({cpu['model']}; {', '.join(cpu['flags'])}), "  # type: ignore[arg-type]
        f"{psutil.virtual_memory().total / GIB:.0f} GiB RAM",
        "command": "python -m bench.engine_footprint " + " ".join(_argv(config)),
        "rows": rows,
    }


def _argv(config: Config) -> list[str]:
    return [
        "--requests", str(config.requests), "--concurrency", str(config.concurrency),
        "--prompt-len", str(config.prompt_len), "--max-tokens", str(config.max_tokens),
    ]  # fmt: skip


def _gib(n: int) -> str:
    return f"{n / GIB:.2f}"


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        (
            "| model | KV pool (tokens) | KV pool (GiB) | RSS after start (GiB) | peak RSS (GiB) "
            f"| RSS after load (GiB) | RSS {IDLE_SETTLE_S:g} s later, idle (GiB) | ok | refused | failed "
            "| load wall (s) |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        pool = _gib(row["kv_pool_bytes"]) if row["kv_pool_bytes"] is not None else "n/a"
        lines.append(
            f"| {row['name']} | {row['max_total_tokens']} | {pool} | {_gib(row['rss_after_start'])} "
            f"| {_gib(row['rss_peak'])} | {_gib(row['rss_after_load'])} | {_gib(row['rss_idle'])} "
            f"| {row['ok']} | {row['refused']} "
            f"| {row['failed']} | {row['wall_s']:.1f} |"
        )
    errors = [f"{row['name']}: {row['first_error']}" for row in result["rows"] if row["first_error"]]
    return "\n".join(lines + ([""] + [f"First error, {e}" for e in errors] if errors else []))


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=32, help="tokens of random text per prompt")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens each completion decodes")
    args = parser.parse_args(argv)
    return Config(args.requests, args.concurrency, args.prompt_len, args.max_tokens)


def main() -> None:
    result = run(parse_args())
    print(result["command"])
    print(markdown_table(result))


if __name__ == "__main__":
    main()
