"""The serving benchmark's command line: `python -m bench.serving --help` (see suite.py)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from bench.serving.catalog import ALL_SYSTEMS, SECTIONS
from bench.serving.quantized_report import markdown as quantized_markdown
from bench.serving.report import markdown as fp32_markdown
from bench.serving.suite import Config, run

DEFAULT_OUT = {
    "fp32": Path("bench/results/serving.json"),
    "quantized": Path("bench/results/serving_quantized.json"),
}


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def parse_args(argv: list[str]) -> tuple[Config, Path]:
    parser = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__)
    parser.add_argument(
        "--section",
        choices=list(SECTIONS),
        default="fp32",
        help="which systems and workloads (catalog.py)",
    )
    parser.add_argument("--systems", help="comma-separated names (default: the section's systems)")
    parser.add_argument("--concurrency", type=_ints, default=(1, 8, 32))
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--requests-per-slot", type=int, default=2)
    parser.add_argument("--prefix-requests", type=int, default=16)
    parser.add_argument("--prefix-concurrency", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each random workload (median reported)"
    )
    parser.add_argument(
        "--out", type=Path, help="the JSON result (default: per section, under bench/results)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    names = tuple(
        name.strip() for name in (args.systems or ",".join(SECTIONS[args.section])).split(",")
    )
    if unknown := [n for n in names if n not in ALL_SYSTEMS]:
        parser.error(f"unknown systems {unknown}; known: {list(ALL_SYSTEMS)}")
    config = Config(
        systems=names,
        concurrency=args.concurrency,
        prompt_len=args.prompt_len,
        output_len=args.output_len,
        requests_per_slot=args.requests_per_slot,
        prefix_requests=args.prefix_requests,
        prefix_concurrency=args.prefix_concurrency,
        system_tokens=args.system_tokens,
        chats=args.chats,
        turns=args.turns,
        rounds=args.rounds,
        section=args.section,
    )
    return config, args.out or DEFAULT_OUT[args.section]


def run_and_save(argv: list[str]) -> dict[str, Any]:
    """Runs the suite, writing the JSON (with the command) after every system; the result."""
    config, out = parse_args(argv)
    command = shlex.join(["python", "-m", "bench.serving", *argv])
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(result: dict[str, Any]) -> None:
        result["command"] = command
        out.write_text(json.dumps(result, indent=1) + "\n")

    return run(config, save)


def markdown(result: dict[str, Any]) -> str:
    """The section's report of `result`."""
    section = result["config"].get("section", "fp32")
    return quantized_markdown(result) if section == "quantized" else fp32_markdown(result)


def main() -> None:
    print(markdown(run_and_save(sys.argv[1:])))


if __name__ == "__main__":
    main()
