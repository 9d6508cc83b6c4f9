"""One run of every system through every workload, the systems side by side.

    python -m bench.serving [--systems ...] [--concurrency 1,8,32] [--prompt-len 128] ...

Every system is prepared (peers install on first use), started on a free 127.0.0.1 port,
health-waited and given two warm-up requests; then each workload (the random one at each
concurrency, the shared-prefix one, the multi-turn chats) runs on every system in turn, the
order rotating from one workload to the next, so drift on a shared machine falls on all
systems alike. The random workloads run in several rounds (fresh prompts each round, the same
for every system), and each system's round with the median output tok/s is its result: one
round of a 2-core machine swings by 10-20%. At the end each server is stopped by pid. A system that cannot be prepared
or started is recorded with the reason, and the run goes on.
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

import httpx
from transformers import AutoTokenizer

from bench.serving import workload
from bench.serving.catalog import ALL_SYSTEMS, CHAT_WORKLOADS
from bench.serving.cpu_features import cpu_description
from bench.serving.load import run_conversations, run_requests
from bench.serving.peer_venv import PeerUnavailable
from bench.serving.process import Server, ServerFailed, exit_on_sigterm, free_port, start_server
from bench.serving.stats import summarize
from bench.serving.systems import MODEL_NAME, REPO, System
from manager.models.pull import pull_model

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
    rounds: int  # of each random workload; the median round is reported
    section: str  # catalog.SECTIONS: which systems are known and which workloads run


# A workload run against one server: (url, the system's extra request fields) -> summaries,
# each with its place in the system's record (e.g. ("random", "32")); the first is shown.
Measured = list[tuple[tuple[str, ...], dict[str, Any]]]
Workload = Callable[[str, dict[str, Any]], Measured]


def _workloads(config: Config, tokenizer: Any) -> list[tuple[str, Workload]]:
    steps: list[tuple[str, Workload]] = []
    for round_ in range(config.rounds):
        for c in config.concurrency:
            count = max(4, c * config.requests_per_slot)
            # NOTE: fresh prompts every round, so no round is served from an earlier one's cache.
            seed = SEED + c + 1000 * round_
            requests = workload.random_requests(tokenizer, count, config.prompt_len, config.output_len, seed)

            def random_load(
                url: str, extra: dict[str, Any], c: int = c, requests: Any = requests, round_: int = round_
            ) -> Measured:
                results, wall = asyncio.run(run_requests(url, MODEL_NAME, requests, c, extra))
                return [(("random_rounds", str(c), str(round_)), summarize(results, wall).as_dict())]

            steps.append((f"random c={c} #{round_ + 1}", random_load))
    prefix = workload.shared_prefix_requests(
        tokenizer, config.prefix_requests, config.system_tokens, config.output_len, SEED
    )

    def shared_prefix(url: str, extra: dict[str, Any]) -> Measured:
        results, wall = asyncio.run(run_requests(url, MODEL_NAME, prefix, config.prefix_concurrency, extra))
        return [(("shared_prefix",), summarize(results, wall).as_dict())]

    chats = workload.conversations(config.chats, config.turns, config.output_len, SEED)

    def multi_turn(url: str, extra: dict[str, Any]) -> Measured:
        results, wall = asyncio.run(run_conversations(url, MODEL_NAME, chats, extra))
        # NOTE: turns 2+ for their TTFT (the history is a cacheable prefix); its wall (and
        # so its tok/s) is the whole run's.
        later = [r for r in results if r.tag != "turn 1"]
        return [
            (("multi_turn",), summarize(results, wall).as_dict()),
            (("multi_turn_later",), summarize(later, wall).as_dict()),
        ]

    if not CHAT_WORKLOADS[config.section]:
        return steps
    return [*steps, ("shared prefix", shared_prefix), ("multi-turn", multi_turn)]


def _record(record: dict[str, Any], measured: Measured) -> None:
    for (*parents, key), summary in measured:
        place = record
        for parent in parents:
            place = place.setdefault(parent, {})
        place[key] = summary


def _median_rounds(record: dict[str, Any]) -> None:
    """Each concurrency's median round (by output tok/s) becomes its ``random`` result, with
    every round's tok/s beside it."""
    for c, rounds in record.get("random_rounds", {}).items():
        ordered = sorted(rounds.values(), key=lambda s: s["output_tok_s"])
        median = dict(ordered[(len(ordered) - 1) // 2])
        median["rounds_output_tok_s"] = [rounds[k]["output_tok_s"] for k in sorted(rounds, key=int)]
        record.setdefault("random", {})[c] = median


def _progress(system: str, what: str, summary: dict[str, Any]) -> None:
    print(
        f"  {system:<22} {what:<14} {summary['output_tok_s']:7.1f} tok/s  "
        f"TTFT p50 {summary['ttft_p50_ms']:8.0f} ms  failed {summary['failed']} {summary['errors']}",
        flush=True,
    )


def start_system(
    system: System, model_dir: Path, config: Config, tokenizer: Any, logs: Path, record: dict[str, Any]
) -> Server | None:
    """The warmed-up server, or None with the reason in ``record``."""
    port = free_port()
    try:
        launch = system.prepare(model_dir, port)
        record["command"] = " ".join(launch.command)
        log = logs / f"{system.name.replace(' ', '_')}.log"
        server = start_server(launch.command, port, log, launch.env, launch.ready_path, launch.timeout_s)
    except (PeerUnavailable, ServerFailed, OSError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        print(f"  {system.name}: did not run: {record['error']}", flush=True)
        return None
    warmup = workload.random_requests(tokenizer, 2, config.prompt_len, config.output_len, SEED - 1)
    asyncio.run(run_requests(server.url, MODEL_NAME, warmup, 2, system.extra))
    if system.describe is not None:
        try:
            record["runtime"] = system.describe(server)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            record["runtime"] = {"error": f"{type(exc).__name__}: {exc}"}
    return server


def run(config: Config, save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Runs the suite; `save` gets the result so far after every workload (a long run that is
    stopped keeps what it measured)."""
    exit_on_sigterm()
    load_at_start = os.getloadavg()[0]
    model_dir = pull_model(REPO).model.path
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    result: dict[str, Any] = {
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.__dict__.items()},
        "cpu": cpu_description(),
        "systems": {},
    }
    servers: dict[str, Server] = {}
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as logs:
        try:
            for name in config.systems:
                system = ALL_SYSTEMS[name]
                print(f"== starting {name}", flush=True)
                record: dict[str, Any] = {"precision": system.precision, "notes": system.notes}
                result["systems"][name] = record
                server = start_system(system, model_dir, config, tokenizer, Path(logs), record)
                if server is not None:
                    servers[name] = server
            names = list(servers)
            for i, (label, run_workload) in enumerate(_workloads(config, tokenizer)):
                shift = i % len(names) if names else 0
                for name in names[shift:] + names[:shift]:
                    measured = run_workload(servers[name].url, ALL_SYSTEMS[name].extra)
                    _record(result["systems"][name], measured)
                    _median_rounds(result["systems"][name])
                    _progress(name, label, measured[0][1])
                result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
                result["machine"] = (
                    f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
                    f"{load_at_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end"
                )
                save(result)
        finally:
            for server in servers.values():
                server.stop()
    return result
