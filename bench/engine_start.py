"""How long an engine takes from launch to `/health` 200, beside `import torch` and llama.cpp.

    python -m bench.engine_start [--runs 3]

All on the store's SmolLM2-135M-Instruct on the CPU, in turns each run, with the engine's
kernels already built (one untimed start first builds them and warms the page cache) and
this checkout's packages byte-compiled, as an installed package's are:
- `import torch` and each server process's own imports (the HTTP server's, the scheduler's,
  the detokenizer's entry module) in a fresh interpreter of this venv;
- our engine, `python -m engine.launch_server --model-path <dir>` with default flags, and
  with `--skip-server-warmup`; launch → `/health` 200 polled every 20 ms, then one chat
  request of one token (the first request's latency);
- llama.cpp's `llama-server` (bench/.cache, built by bench.serving.llama_cpp_build) on the
  bundled SmolLM2 GGUF rewritten in F32 (the same weights as the converted fp32 model),
  timed the same way; skipped with the reason where it is not built;
- `gomgr start <repo> --runtime process`, from launch to its exit (the engine healthy and
  registered with the router it starts), in an isolated state directory: once booting its
  supervisor (the first start of a session), once with the supervisor already running.
Targets (issue 30): our start ≤ 2× `import torch`, ≤ 1.5× llama-server's; `gomgr start` ≤ our
start + 0.5 s.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.cli_startup import machine
from bench.serving.cpu_features import cpu_flags
from bench.serving.gguf_model import f32_gguf
from bench.serving.peer_venv import PeerUnavailable
from bench.serving.process import free_port
from manager.models.pull import pull_model
from tests.support.gomgr_env import Env

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
POLL_S = 0.02
START_TIMEOUT_S = 300.0
IMPORTS = {
    "import torch": "import torch",
    "HTTP server imports (engine.server.http_server, uvicorn)": "import engine.server.http_server, uvicorn",
    "scheduler imports (engine.scheduler.process)": "import engine.scheduler.process",
    "detokenizer imports (engine.detokenizer.process)": "import engine.detokenizer.process",
}
FIRST_REQUEST = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}


def _import_s(statement: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, capture_output=True)
    return time.perf_counter() - began


def _wait_healthy(process: subprocess.Popen[bytes], url: str, began: float) -> float:
    """Seconds from `began` until `url`/health answers 200; raises if the server exits first."""
    with httpx.Client(timeout=2.0) as client:
        while process.poll() is None:
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return time.perf_counter() - began
            except httpx.HTTPError:
                pass
            if time.perf_counter() - began > START_TIMEOUT_S:
                break
            time.sleep(POLL_S)
    raise RuntimeError(f"{url} not healthy (exit code {process.poll()}, or still starting)")


def _timed_server(command: list[str], port: int, log: Path) -> tuple[float, float]:
    """(launch → /health 200, the first one-token chat request) in seconds; stops the server."""
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        began = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            ready_s = _wait_healthy(process, url, began)
            sent = time.perf_counter()
            httpx.post(f"{url}/v1/chat/completions", json={"model": "m", **FIRST_REQUEST}, timeout=60).raise_for_status()
            return ready_s, time.perf_counter() - sent
        finally:
            process.terminate()
            process.wait(30)


def _ours(model: Path, *flags: str) -> Callable[[int], list[str]]:
    return lambda port: [
        sys.executable, "-m", "engine.launch_server", "--model-path", str(model), "--port", str(port), *flags,
    ]  # fmt: skip


def _llama_server(gguf: Path, server: Path) -> Callable[[int], list[str]]:
    return lambda port: [str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]


def _gomgr_start_s(store: Path, supervisor_running: bool) -> float:
    """`gomgr start` in a fresh state directory: it boots the supervisor, unless
    ``supervisor_running`` (then `gomgr router start` boots it first, untimed)."""
    with tempfile.TemporaryDirectory(prefix="gomgr-bench-start-") as root:
        env = Env.isolated(Path(root), store)
        try:
            if supervisor_running and env.gomgr("router", "start").returncode != 0:
                raise RuntimeError("gomgr router start failed")
            began = time.perf_counter()
            done = env.gomgr("start", REPO, "--runtime", "process", "--json")
            elapsed = time.perf_counter() - began
            if done.returncode != 0:
                raise RuntimeError(f"gomgr start failed: {done.stderr.strip()[-400:]}")
            return elapsed
        finally:
            env.end_everything()


def _summary(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "min_s": min(times)}


def _llama_cpp() -> tuple[Path, Path] | str:
    """(llama-server, the F32 GGUF), or why llama.cpp is not measured."""
    from bench.serving.llama_cpp_build import llama_cpp_tools

    try:
        return llama_cpp_tools().server, f32_gguf(REPO)
    except PeerUnavailable as err:
        return str(err)


def _byte_compile() -> None:
    """manager/, router/ and engine/ compiled to __pycache__ (stale files are recompiled).

    NOTE: where PYTHONDONTWRITEBYTECODE is set (this machine sets it), no import writes the
    checkout's .pyc files, so every process of every start compiled our modules from source
    again (~0.05 CPU-s of a supervisor's boot, ~0.3 of the scheduler's imports); pip compiles
    an installed package once, and elsewhere a checkout writes them at its first run.
    """
    root = Path(__file__).resolve().parents[1]
    for package in ("manager", "router", "engine_image/engine"):
        compileall.compile_dir(root / package, quiet=1)


def run(runs: int = 3) -> dict[str, Any]:
    _byte_compile()
    model = pull_model(REPO).model.path
    llama = _llama_cpp()
    servers: dict[str, Callable[[int], list[str]]] = {
        "ours (default flags)": _ours(model),
        "ours --skip-server-warmup": _ours(model, "--skip-server-warmup"),
    }
    if isinstance(llama, tuple):
        servers["llama-server (F32 GGUF)"] = _llama_server(llama[1], llama[0])
    imports: dict[str, list[float]] = {name: [] for name in IMPORTS}
    starts: dict[str, list[float]] = {name: [] for name in servers}
    firsts: dict[str, list[float]] = {name: [] for name in servers}
    gomgr: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="engine-start-") as logs:
        log = Path(logs) / "server.log"
        port = free_port()
        _timed_server(_ours(model)(port), port, log)  # NOTE: untimed: kernels, page cache
        for _ in range(runs):
            for name, statement in IMPORTS.items():
                imports[name].append(_import_s(statement))
            for name, command in servers.items():
                port = free_port()
                ready_s, first_s = _timed_server(command(port), port, log)
                starts[name].append(ready_s)
                firsts[name].append(first_s)
            for supervisor_running in (False, True):
                gomgr[supervisor_running].append(_gomgr_start_s(model.parents[1], supervisor_running))
    return {
        "command": f"python -m bench.engine_start --runs {runs}",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{machine()}, CPU flags: {' '.join(cpu_flags())}",
        "imports": {name: _summary(t) for name, t in imports.items()},
        "servers": {name: _summary(starts[name]) | {"first_request_s": statistics.median(firsts[name])} for name in servers},
        "gomgr_start": _summary(gomgr[False]),
        "gomgr_start_supervisor_running": _summary(gomgr[True]),
        "llama_cpp_skipped": None if isinstance(llama, tuple) else llama,
    }


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×"


def markdown_table(result: dict[str, Any]) -> str:
    lines = ["| what | median s | fastest s | first request s |", "|---|---:|---:|---:|"]
    for name, r in result["imports"].items():
        lines.append(f"| `{name}` (fresh interpreter) | {r['median_s']:.2f} | {r['min_s']:.2f} | |")
    for name, r in result["servers"].items():
        lines.append(f"| {name}: launch → /health 200 | {r['median_s']:.2f} | {r['min_s']:.2f} | {r['first_request_s']:.3f} |")
    g = result["gomgr_start"]
    lines.append(f"| `gomgr start {REPO} --runtime process` | {g['median_s']:.2f} | {g['min_s']:.2f} | |")
    w = result["gomgr_start_supervisor_running"]
    lines.append(f"| the same, its supervisor already running | {w['median_s']:.2f} | {w['min_s']:.2f} | |")
    ours = result["servers"]["ours (default flags)"]["median_s"]
    torch_s = result["imports"]["import torch"]["median_s"]
    ratios = [f"ours / `import torch`: {_ratio(ours, torch_s)} (target ≤ 2×)"]
    llama = result["servers"].get("llama-server (F32 GGUF)")
    if llama is None:
        ratios.append(f"llama-server not measured: {result['llama_cpp_skipped']}")
    else:
        ratios.append(f"ours / llama-server: {_ratio(ours, llama['median_s'])} (target ≤ 1.5×)")
    ratios.append(
        f"`gomgr start` − ours: {g['median_s'] - ours:+.2f} s (target ≤ +0.5 s; "
        f"{w['median_s'] - ours:+.2f} s with its supervisor running)"
    )
    return "\n".join([*lines, "", "Medians; " + "; ".join(ratios) + "."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    result = run(parser.parse_args().runs)
    print(f"Recorded {result['date']} on {result['machine']}.\n")
    print(markdown_table(result))


if __name__ == "__main__":
    main()
