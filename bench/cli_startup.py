"""How long `gomgr --help` and `gomgr ps` take to print, and which heavy modules they import.

    python -m bench.cli_startup [--runs 15]

Each run is a fresh process (`<venv>/bin/gomgr ...`) with a fresh, empty state directory
($GOMGR_STATE_DIR) and a router port nothing listens on, so `ps` finds no engines and no
router, and the time is the CLI's own start-up: interpreter, imports, argument parsing, one
state-directory read. The table gives the median and the fastest of `--runs` wall times, and
the heavy modules (torch, transformers, docker, textual) one extra run under `-X importtime`
loaded. Floors timed the same way put the numbers in scale: the bare interpreter, and a
one-command typer app (typer, click and rich alone) asked for `--help` and run with a flag.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.engine_process import free_port

GOMGR = Path(sys.executable).with_name("gomgr")
COMMANDS: dict[str, list[str]] = {"gomgr --help": ["--help"], "gomgr ps": ["ps"]}
# NOTE: one command with one flag: parsing any option loads typer 0.29's pydantic adapters.
TYPER_HELLO = (
    "import typer\napp = typer.Typer()\n"
    "@app.command()\ndef hello(flag: bool = False) -> None: ...\napp()"
)
FLOORS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "typer app --help (floor)": [sys.executable, "-c", TYPER_HELLO, "--help"],
    "typer app --flag (floor)": [sys.executable, "-c", TYPER_HELLO, "--flag"],
}
HEAVY = ("torch", "transformers", "docker", "textual")


def _env(state_dir: Path, router_port: int) -> dict[str, str]:
    return {
        **os.environ,
        "GOMGR_STATE_DIR": str(state_dir),
        "GOMGR_ROUTER_PORT": str(router_port),
    }


def _time_once(command: list[str], router_port: int) -> float:
    with tempfile.TemporaryDirectory(prefix="gomgr-bench-") as state_dir:
        env = _env(Path(state_dir), router_port)
        began = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        return time.perf_counter() - began


def _timings(command: list[str], runs: int, router_port: int) -> dict[str, float]:
    _time_once(command, router_port)  # NOTE: warm-up: the page cache, .pyc files
    times = [_time_once(command, router_port) for _ in range(runs)]
    return {"median_s": statistics.median(times), "min_s": min(times)}


def heavy_imports(args: list[str], router_port: int) -> list[str]:
    """The HEAVY top-level packages a run of `gomgr <args>` imports (from `-X importtime`)."""
    with tempfile.TemporaryDirectory(prefix="gomgr-bench-") as state_dir:
        env = _env(Path(state_dir), router_port)
        done = subprocess.run(
            [sys.executable, "-X", "importtime", str(GOMGR), *args],
            env=env, check=True, capture_output=True, text=True,
        )
    # NOTE: importtime lines read "import time: self | cumulative | <indent>module.name".
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return sorted(m for m in HEAVY if m in names)


def run(runs: int = 15) -> dict[str, Any]:
    router_port = free_port()
    rows: dict[str, dict[str, Any]] = {}
    for name, command in FLOORS.items():
        rows[name] = {**_timings(command, runs, router_port), "heavy": None}
    for name, args in COMMANDS.items():
        rows[name] = {
            **_timings([str(GOMGR), *args], runs, router_port),
            "heavy": heavy_imports(args, router_port),
        }
    return {
        "command": f"python -m bench.cli_startup --runs {runs}",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "rows": rows,
    }


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        "| command | median s | fastest s | heavy modules imported |",
        "|---|---:|---:|---|",
    ]
    for name, r in result["rows"].items():
        heavy = "—" if r["heavy"] is None else ", ".join(r["heavy"]) or "none"
        lines.append(f"| `{name}` | {r['median_s']:.3f} | {r['min_s']:.3f} | {heavy} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    result = run(parser.parse_args().runs)
    print(f"Recorded {result['date']} on {result['machine']}.\n")
    print(markdown_table(result))


if __name__ == "__main__":
    main()
