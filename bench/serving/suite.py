"""One run of every system through every workload, one server at a time.

    python -m bench.serving [--systems ...] [--concurrency 1,8,32] [--prompt-len 128] ...

For each system: prepare (peers install on first use), start on a free 127.0.0.1 port, wait
for health, two warm-up requests, then the random workload at each concurrency, the
shared-prefix workload and the multi-turn chats; then stop it by pid. A system that cannot be
prepared or started is recorded with the reason, and the run goes on.
"""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from bench.serving import workload
from bench.serving.load import run_conversations, run_requests
from bench.serving.peer_venv import PeerUnavailable
from bench.serving.process import Server, ServerFailed, exit_on_sigterm, free_port, start_server
from bench.serving.stats import summarize
from bench.serving.systems import MODEL_NAME, SYSTEMS, System
from manager.models.pull import pull_model

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
SEED = 11


@dataclass(frozen=True)
class Config:
    systems: tuple[str, ...]
    concurrency: tuple[int, ...]
    prompt_len: int
    output_len: int
    requests_per_slot: int  # requests at concurrency c: max(4, c * requests_per_slot)
    prefix_requests: int
    prefix_concurrency: int
    system_tokens: int
    chats: int
    turns: int


def _measure(system: System, server: Server, config: Config, tokenizer: Any) -> dict[str, Any]:
    url, extra = server.url, system.extra
    warmup = workload.random_requests(tokenizer, 2, config.prompt_len, config.output_len, SEED - 1)
    asyncio.run(run_requests(url, MODEL_NAME, warmup, 2, extra))
    out: dict[str, Any] = {"random": {}}
    for c in config.concurrency:
        count = max(4, c * config.requests_per_slot)
        requests = workload.random_requests(
            tokenizer, count, config.prompt_len, config.output_len, SEED + c
        )
        results, wall = asyncio.run(run_requests(url, MODEL_NAME, requests, c, extra))
        out["random"][str(c)] = summarize(results, wall).as_dict()
        _progress(system.name, f"random c={c}", out["random"][str(c)])
    prefix = workload.shared_prefix_requests(
        tokenizer, config.prefix_requests, config.system_tokens, config.output_len, SEED
    )
    results, wall = asyncio.run(
        run_requests(url, MODEL_NAME, prefix, config.prefix_concurrency, extra)
    )
    out["shared_prefix"] = summarize(results, wall).as_dict()
    _progress(system.name, "shared prefix", out["shared_prefix"])
    chats = workload.conversations(config.chats, config.turns, config.output_len, SEED)
    results, wall = asyncio.run(run_conversations(url, MODEL_NAME, chats, extra))
    out["multi_turn"] = summarize(results, wall).as_dict()
    # NOTE: turns 2+ for their TTFT (the history is a cacheable prefix); its wall (and so its
    # tok/s) is the whole run's.
    out["multi_turn_later"] = summarize([r for r in results if r.tag != "turn 1"], wall).as_dict()
    _progress(system.name, "multi-turn", out["multi_turn"])
    return out


def _progress(system: str, what: str, summary: dict[str, Any]) -> None:
    print(
        f"  {system:<22} {what:<14} {summary['output_tok_s']:7.1f} tok/s  "
        f"TTFT p50 {summary['ttft_p50_ms']:8.0f} ms  failed {summary['failed']} {summary['errors']}",
        flush=True,
    )


def run_system(
    system: System, model_dir: Path, config: Config, tokenizer: Any, logs: Path
) -> dict[str, Any]:
    record: dict[str, Any] = {"precision": system.precision, "notes": system.notes}
    port = free_port()
    try:
        launch = system.prepare(model_dir, port)
        record["command"] = " ".join(launch.command)
        log = logs / f"{system.name.replace(' ', '_')}.log"
        server = start_server(
            launch.command, port, log, launch.env, launch.ready_path, launch.timeout_s
        )
    except (PeerUnavailable, ServerFailed, OSError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  {system.name}: did not run: {record['error']}", flush=True)
        return record
    try:
        record.update(_measure(system, server, config, tokenizer))
    finally:
        server.stop()
    return record


def run(config: Config, save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Runs the suite; `save` gets the result so far after every system (a long run that is
    stopped keeps what it measured)."""
    exit_on_sigterm()
    load_at_start = os.getloadavg()[0]
    model_dir = pull_model(REPO).model.path
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    result: dict[str, Any] = {
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.__dict__.items()},
        "systems": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as logs:
        for name in config.systems:
            print(f"== {name}", flush=True)
            result["systems"][name] = run_system(
                SYSTEMS[name], model_dir, config, tokenizer, Path(logs)
            )
            result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
            result["machine"] = (
                f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
                f"{load_at_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end"
            )
            save(result)
    return result
