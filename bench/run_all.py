"""Runs every benchmark in bench/ and rewrites its results section in docs/benchmarks.md.

    python -m bench.run_all      (or `make bench`)

Each benchmark owns the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` in the doc;
everything outside those markers is left as written.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench import (
    cli_startup,
    engine_footprint,
    engine_small_requests,
    engine_start,
    engine_streaming,
    engine_vs_transformers,
    grammar_cost,
    replica_routing,
    router_overhead,
    sse_encoder,
    supervisor_overhead,
)
from bench.serving import cli as serving_cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
# NOTE: 16 new tokens, not the module's 32: with 32 a shared 2-core machine took 12 minutes.
ENGINE_VS_TRANSFORMERS_ARGS = [
    "--batch-sizes", "1,8,32", "--prompt-len", "64", "--new-tokens", "16", "--repeats", "1",
]


def section(date: str, machine: str, command: str, table: str) -> str:
    return "\n".join([f"Recorded {date} on {machine}.", "", "```", command, "```", "", table])


def run_engine_vs_transformers() -> str:
    config = engine_vs_transformers.parse_args(ENGINE_VS_TRANSFORMERS_ARGS)
    result = engine_vs_transformers.run(config)
    m = result["machine"]
    machine = (
        f"{m['cpu_count']} CPUs, {m['torch_threads']} torch threads, torch {m['torch']}, "
        f"transformers {m['transformers']}, Python {m['python']} ({m['platform']})"
    )
    table = engine_vs_transformers.markdown_table(result["summary"])
    return section(result["date"], machine, result["command"], table)


def run_sse_encoder() -> str:
    result = sse_encoder.run()
    return section(_now(), _machine(), result["command"], sse_encoder.markdown_table(result))


def run_engine_streaming() -> str:
    result = engine_streaming.run([1, 8, 64], new_tokens=32)
    return section(_now(), _machine(), result["command"], engine_streaming.markdown_table(result))


def run_router_overhead() -> str:
    result = router_overhead.run(requests=1000, chunks=2000)
    return section(_now(), _machine(), result["command"], router_overhead.markdown_table(result))


def run_grammar_cost() -> str:
    result = grammar_cost.run(batch=8, steps=16, repeats=3, threads=1)
    return section(_now(), _machine(), result["command"], grammar_cost.markdown_table(result))


def run_cli_startup() -> str:
    result = cli_startup.run(runs=15)
    table = cli_startup.markdown_table(result)
    return section(result["date"], result["machine"], result["command"], table)


def run_engine_start() -> str:
    result = engine_start.run(runs=3)
    return section(result["date"], result["machine"], result["command"], engine_start.markdown_table(result))


def run_supervisor_overhead() -> str:
    result = supervisor_overhead.run(rounds=3, requests=1000)
    table = supervisor_overhead.markdown_table(result)
    return section(result["date"], result["machine"], result["command"], table)


def run_engine_footprint() -> str:
    result = engine_footprint.run(engine_footprint.parse_args([]))
    return section(result["date"], result["machine"], result["command"], engine_footprint.markdown_table(result))


def run_engine_small_requests() -> str:
    result = engine_small_requests.run(engine_small_requests.parse_args([]))
    table = engine_small_requests.markdown_table(result)
    return section(result["date"], result["machine"], result["command"], table)


def run_replica_routing() -> str:
    result = replica_routing.run(replica_routing.parse_args([]))
    table = replica_routing.markdown_table(result)
    return section(result["date"], result["machine"], result["command"], table)


def run_serving(*argv: str) -> Callable[[], str]:
    def run() -> str:
        result = serving_cli.run_and_save(list(argv))
        body = serving_cli.markdown(result)
        return section(result["date"], result["machine"], result["command"], body)

    return run


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _machine() -> str:
    return f"{os.cpu_count()} CPUs, Python {platform.python_version()}"


BENCHMARKS: dict[str, Callable[[], str]] = {
    "engine_vs_transformers": run_engine_vs_transformers,
    "sse_encoder": run_sse_encoder,
    "engine_streaming": run_engine_streaming,
    "router_overhead": run_router_overhead,
    "grammar_cost": run_grammar_cost,
    "cli_startup": run_cli_startup,
    "engine_start": run_engine_start,
    "supervisor_overhead": run_supervisor_overhead,
    "engine_footprint": run_engine_footprint,
    "engine_small_requests": run_engine_small_requests,
    "replica_routing": run_replica_routing,
    "serving": run_serving(),
    "quantized_serving": run_serving("--section", "quantized"),
}


def replace_section(doc: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(doc):
        raise ValueError(f"{DOC} has no {start} ... {end} section")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", doc, count=1)


def main() -> None:
    for name, run in BENCHMARKS.items():
        print(f"== {name}", flush=True)
        body = run()
        print(body, flush=True)
        # NOTE: written after each benchmark, so a later failure keeps the earlier results.
        DOC.write_text(replace_section(DOC.read_text(), name, body))
    print(f"updated {DOC}")


if __name__ == "__main__":
    main()
