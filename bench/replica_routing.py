"""Cache-aware routing against least-in-flight over replicas of one model (issue 27).

    python -m bench.replica_routing [--replicas 3] [--groups 6] [--per-group 6]
        [--system-tokens 384] [--max-tokens 8] [--concurrency 6]

`--replicas` engines of SmolLM2-135M-Instruct on CPU (each on its CPU share, as `gomgr start
--replicas` gives it) behind one router per policy, side by side in one run. The workload is
the serving bench's shared-prefix one (bench/serving/workload.py), `--groups` times over: each
group is `--per-group` chats sharing one long system prompt, the groups interleaved as
independent users' traffic arrives. Each policy gets its own system prompts (another seed),
and the engines' caches are flushed between policies, so neither finds the other's prefixes.
Reported per policy: the radix hit rate (cached over prompt tokens, from the engines' own
`usage.prompt_tokens_details.cached_tokens`), TTFT p50/p99, and requests per engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from transformers import AutoTokenizer

from bench.serving import workload
from bench.serving.client import Result
from bench.serving.cpu_features import cpu_description
from bench.serving.load import run_requests
from bench.serving.process import Server, exit_on_sigterm, free_port, start_server
from bench.serving.stats import percentile
from bench.serving.systems import MODEL_NAME, REPO
from manager.lifecycle.replicas import OMP_AFFINITY, OMP_THREADS, cpu_share
from manager.models.pull import pull_model
from router.routing_policy import RoutingPolicyName

START_TIMEOUT_S = 300.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.replica_routing", description=__doc__)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--per-group", type=int, default=6)
    parser.add_argument("--system-tokens", type=int, default=384)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=6)
    return parser.parse_args(argv)


def _engine(model_dir: Path, log_dir: Path, index: int, replicas: int) -> Server:
    port = free_port()
    cpus = cpu_share(sorted(os.sched_getaffinity(0)), index, replicas)
    command = [
        sys.executable, "-m", "engine.launch_server", "--model-path", str(model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME,
        "--enable-metrics", "--max-total-tokens", "16384",
    ]  # fmt: skip
    env = {OMP_THREADS: str(len(cpus)), OMP_AFFINITY: " ".join(map(str, cpus))}
    return start_server(command, port, log_dir / f"engine-{index}.log", env, "/health", START_TIMEOUT_S)


def _router(log_dir: Path, policy: RoutingPolicyName, engines: list[Server]) -> tuple[Server, list[str]]:
    port = free_port()
    token_file = log_dir / f"router-{policy}.token"
    command = [
        sys.executable, "-m", "router", "--port", str(port), "--admin-token-file", str(token_file),
        "--routing-policy", str(policy), "--log-level", "warning",
    ]  # fmt: skip
    router = start_server(command, port, log_dir / f"router-{policy}.log", {}, "/health", 60.0)
    headers = {"authorization": f"Bearer {token_file.read_text().strip()}"}
    ids = []
    for i, engine in enumerate(engines):
        body = {"id": f"replica-{i}", "model": MODEL_NAME, "base_url": engine.url}
        httpx.post(f"{router.url}/admin/backends", json=body, headers=headers, timeout=10).raise_for_status()
        ids.append(f"replica-{i}")
    _wait_ready(router.url, headers, len(engines))
    return router, ids


def _wait_ready(url: str, headers: dict[str, str], count: int) -> None:
    for _ in range(300):
        backends = httpx.get(f"{url}/admin/backends", headers=headers, timeout=10).json()["backends"]
        if [b["state"] for b in backends].count("ready") == count:
            return
        time.sleep(0.1)
    raise RuntimeError("the replicas did not become ready behind the router")


def _requests(tokenizer: Any, args: argparse.Namespace, seed: int) -> list[workload.Request]:
    groups = [
        workload.shared_prefix_requests(
            tokenizer, args.per_group, args.system_tokens, args.max_tokens, seed + 100 * g
        )
        for g in range(args.groups)
    ]
    # NOTE: interleaved: one request of each group, then the next of each, as several users'
    # conversations arrive at once
    return [group[i] for i in range(args.per_group) for group in groups]


def _served(engines: list[Server]) -> list[int]:
    counts = []
    for engine in engines:
        text = httpx.get(f"{engine.url}/metrics", timeout=10).text
        line = next((x for x in text.splitlines() if x.startswith("sglang:num_requests_total")), "")
        counts.append(int(float(line.rsplit(" ", 1)[1])) if line else 0)
    return counts


def _summary(results: list[Result], before: list[int], after: list[int]) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    prompt = sum(r.prompt_tokens for r in ok)
    ttft = [r.ttft_s * 1000 for r in ok]
    return {
        "requests": len(results),
        "failed": len(results) - len(ok),
        "hit_rate": sum(r.cached_tokens for r in ok) / prompt if prompt else 0.0,
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p99_ms": percentile(ttft, 99),
        "per_engine": [a - b for a, b in zip(after, before, strict=True)],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    exit_on_sigterm()
    model_dir = pull_model(REPO).model.path
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    policies = {}
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        log_dir = Path(tmp)
        engines: list[Server] = []
        try:
            for i in range(args.replicas):
                engines.append(_engine(model_dir, log_dir, i, args.replicas))
            for n, policy in enumerate(RoutingPolicyName):
                for engine in engines:
                    httpx.post(f"{engine.url}/flush_cache", timeout=30).raise_for_status()
                router, _ = _router(log_dir, policy, engines)
                try:
                    requests = _requests(tokenizer, args, seed=27 + 1000 * n)
                    before = _served(engines)
                    results, _ = asyncio.run(
                        run_requests(router.url, MODEL_NAME, requests, args.concurrency, {})
                    )
                    policies[str(policy)] = _summary(results, before, _served(engines))
                finally:
                    router.stop()
        finally:
            for engine in engines:
                engine.stop()
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()]
    cpu = cpu_description()
    features = cpu["flags"]
    assert isinstance(features, list)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs ({cpu['model']}; {' '.join(features)})",
        "command": "python -m bench.replica_routing " + " ".join(flags),
        "policies": policies,
    }


def markdown_table(result: dict[str, Any]) -> str:
    rows = [
        "| policy | requests (failed) | radix hit rate | TTFT p50 | TTFT p99 | requests per engine |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in result["policies"].items():
        rows.append(
            f"| {name} | {s['requests']} ({s['failed']}) | {s['hit_rate']:.1%} | "
            f"{s['ttft_p50_ms']:.0f} ms | {s['ttft_p99_ms']:.0f} ms | "
            f"{' / '.join(map(str, s['per_engine']))} |"
        )
    return "\n".join(rows)


def main() -> None:
    result = run(parse_args())
    print(result["command"])
    print(result["machine"])
    print(markdown_table(result))


if __name__ == "__main__":
    main()
