"""Decode and prefill throughput of our engine against transformers, as ratios, in one process.

Both systems run greedy generation on the same random prompts with the same torch thread
count. Per batch size and repeat: each system generates 1 token (≈ prefill) and then N tokens
from a cold cache; decode tok/s = B * (N - 1) / (t_N - t_1), prefill tok/s = B * L / t_1.
The two systems alternate (ours, peer, ours, peer, ...) so machine drift hits both, and a
ratio is the median over repeats of ours / peer from the same repeat.

    python -m bench.engine_vs_transformers --batch-sizes 1,8,32 --new-tokens 32
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.engine import Engine
from manager.models.pull import pull_model

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
PAD_ID = 2
TOKEN_RANGE = (100, 40000)  # ordinary vocabulary ids: no special or control tokens
SEED = 1234
DEFAULT_OUT = Path("bench/results/engine_vs_transformers.json")


@dataclass(frozen=True)
class Config:
    batch_sizes: tuple[int, ...]
    prompt_len: int
    new_tokens: int
    repeats: int
    threads: int
    out: Path


@dataclass(frozen=True)
class Timing:
    """One system, one batch size, one repeat: wall seconds for 1 and for N new tokens."""

    system: str
    batch: int
    repeat: int
    first_token_s: float
    all_tokens_s: float


class System(Protocol):
    name: str

    def generate(self, prompts: list[list[int]], new_tokens: int) -> float:
        """Greedy generation of exactly `new_tokens` per prompt from a cold cache; wall seconds."""
        ...


class Ours:
    name = "ours"

    def __init__(self, path: Path) -> None:
        self.engine = Engine(str(path), max_total_tokens=32768)

    def generate(self, prompts: list[list[int]], new_tokens: int) -> float:
        self.engine.flush_cache()
        params = {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True}
        start = time.perf_counter()
        outs = self.engine.generate(input_ids=prompts, sampling_params=params)
        elapsed = time.perf_counter() - start
        assert isinstance(outs, list)
        counts = {out["meta_info"]["completion_tokens"] for out in outs}
        if counts != {new_tokens}:
            raise RuntimeError(f"ours generated {counts} tokens, asked for {new_tokens}")
        return elapsed


class Transformers:
    name = "transformers"

    def __init__(self, path: Path) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        self.tokenizer.pad_token_id = PAD_ID
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

    def generate(self, prompts: list[list[int]], new_tokens: int) -> float:
        batch = self.tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **batch,
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=PAD_ID,
            )
        elapsed = time.perf_counter() - start
        if out.shape != (len(prompts), batch["input_ids"].shape[1] + new_tokens):
            raise RuntimeError(f"transformers returned shape {tuple(out.shape)}")
        return elapsed


def random_prompts(batch: int, length: int) -> list[list[int]]:
    rng = random.Random(SEED + batch)
    return [[rng.randrange(*TOKEN_RANGE) for _ in range(length)] for _ in range(batch)]


def measure(systems: list[System], config: Config) -> list[Timing]:
    timings: list[Timing] = []
    for batch in config.batch_sizes:
        prompts = random_prompts(batch, config.prompt_len)
        for repeat in range(config.repeats):
            for system in systems:
                first = system.generate(prompts, 1)
                full = system.generate(prompts, config.new_tokens)
                timings.append(Timing(system.name, batch, repeat, first, full))
                print(f"  batch {batch:>3} repeat {repeat} {system.name:<12} "
                      f"t_1={first:.2f}s t_N={full:.2f}s", flush=True)
    return timings


def summarize(timings: list[Timing], config: Config) -> list[dict[str, float]]:
    def rates(t: Timing) -> tuple[float, float]:
        decode = t.batch * (config.new_tokens - 1) / (t.all_tokens_s - t.first_token_s)
        return decode, t.batch * config.prompt_len / t.first_token_s

    rows: list[dict[str, float]] = []
    for batch in config.batch_sizes:
        pairs = [
            (rates(o), rates(p))
            for o, p in zip(
                [t for t in timings if t.batch == batch and t.system == Ours.name],
                [t for t in timings if t.batch == batch and t.system == Transformers.name],
            )
        ]
        rows.append({
            "batch": batch,
            "ours_decode_tps": statistics.median(o[0] for o, _ in pairs),
            "peer_decode_tps": statistics.median(p[0] for _, p in pairs),
            "decode_ratio": statistics.median(o[0] / p[0] for o, p in pairs),
            "ours_prefill_tps": statistics.median(o[1] for o, _ in pairs),
            "peer_prefill_tps": statistics.median(p[1] for _, p in pairs),
            "prefill_ratio": statistics.median(o[1] / p[1] for o, p in pairs),
        })
    return rows


def markdown_table(rows: list[dict[str, float]]) -> str:
    lines = [
        (
            "| batch | ours decode tok/s | transformers decode tok/s | ratio "
            "| ours prefill tok/s | transformers prefill tok/s | ratio |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']:.0f} | {r['ours_decode_tps']:.1f} | {r['peer_decode_tps']:.1f} "
            f"| {r['decode_ratio']:.2f} | {r['ours_prefill_tps']:.0f} "
            f"| {r['peer_prefill_tps']:.0f} | {r['prefill_ratio']:.2f} |"
        )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def command(config: Config) -> str:
    args = [
        "python", "-m", "bench.engine_vs_transformers",
        "--batch-sizes", ",".join(map(str, config.batch_sizes)),
        "--prompt-len", str(config.prompt_len),
        "--new-tokens", str(config.new_tokens),
        "--repeats", str(config.repeats),
        "--threads", str(config.threads),
        "--out", str(config.out),
    ]
    return shlex.join(args)


def run(config: Config) -> dict[str, Any]:
    """Runs the comparison, writes the JSON to `config.out`, returns it."""
    if config.new_tokens < 2:
        raise ValueError("--new-tokens must be at least 2 to separate decode from prefill")
    torch.set_num_threads(config.threads)
    path = pull_model(MODEL).model.path
    systems: list[System] = [Ours(path), Transformers(path)]
    warmup = random_prompts(1, config.prompt_len)
    for system in systems:
        system.generate(warmup, 2)
    timings = measure(systems, config)
    result = {
        "benchmark": "engine_vs_transformers",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": MODEL,
        "command": command(config),
        "machine": machine(),
        "config": {**asdict(config), "out": str(config.out)},
        "timings": [asdict(t) for t in timings],
        "summary": summarize(timings, config),
    }
    config.out.parent.mkdir(parents=True, exist_ok=True)
    config.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ns = parser.parse_args(argv)
    return Config(
        batch_sizes=tuple(int(b) for b in ns.batch_sizes.split(",")),
        prompt_len=ns.prompt_len,
        new_tokens=ns.new_tokens,
        repeats=ns.repeats,
        threads=ns.threads,
        out=ns.out,
    )


def main(argv: list[str] | None = None) -> None:
    result = run(parse_args(argv))
    print(markdown_table(result["summary"]))
    print(f"machine: {result['machine']}")


if __name__ == "__main__":
    main()
