"""The GPU path: decode and prefill throughput against the HBM roofline, time to ready with and
without CUDA graphs, and the Triton attention kernels against torch SDPA. Needs a CUDA device
(refuses with exit 2 without one); ``--device cpu --shapes tiny`` runs the plumbing on CPU.

Each shape (``--shapes``; bench/gpu_models.py: Llama-3-8B's and Qwen2.5-0.5B's config values,
nothing downloaded) gets random bf16 weights drawn on the device and the engine's ModelRunner
(Triton backend, fused kernels):
- time to ready: from the runner's construction (weights already on the device) until it can
  serve, once with CUDA graphs off and once with them captured; the difference is the capture;
- prefill and decode tok/s of the model forward alone (bench/gpu_throughput.py), decode with
  and without CUDA graphs;
- roofline (bench/gpu_roofline.py): a decode step must read each weight once (an untied input
  embedding only the batch's rows) plus each request's KV; at the measured device-to-device
  copy bandwidth that takes bytes / bandwidth, so the roofline is B / that time, and the ratio
  is measured / roofline (1.0 = bandwidth bound, no waste).
Kernel rows (bench/gpu_attention.py) time one attention layer at each shape's head shape.
The last lines, each starting ``bench:``, are a compact summary (bench/gpu_check.sh keeps them).

    bash bench/gpu.sh      (= python -m bench.gpu_bench --out bench/results/gpu.json)
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from bench.gpu_attention import attention_rows, no_prefix_prefill_rows
from bench.gpu_models import RandomModel, RunnerSpec, Shape, parse_shapes, release_memory
from bench.gpu_roofline import copy_bandwidth, decode_step
from bench.gpu_throughput import mean_kv_len, measure_throughput

# NOTE: the copy that measures the bandwidth: large enough to stream from HBM (not L2) on a
# GPU; small on CPU, where the smoke run only checks the plumbing.
_COPY_BYTES = {"cuda": 2 << 30, "cpu": 32 << 20}


@dataclass(frozen=True)
class Config:
    shapes: tuple[Shape, ...]
    device: torch.device
    batch_sizes: tuple[int, ...]
    prompt_len: int
    decode_steps: int
    out: Path | None


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return values


def _shapes(text: str) -> tuple[Shape, ...]:
    try:
        return parse_shapes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_bench", description=__doc__.split("\n")[0])
    p.add_argument("--shapes", type=_shapes, default="8b,0.5b", help="comma-separated: 8b, 0.5b, tiny")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--batch-sizes", type=_int_list, default="1,32,128")
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--decode-steps", type=int, default=128)
    p.add_argument("--out", type=Path, help="also write the raw results here as JSON (after each shape)")
    ns = p.parse_args(argv)
    if ns.prompt_len < 1 or ns.decode_steps < 1:
        p.error("--prompt-len and --decode-steps must be >= 1")
    return Config(
        shapes=ns.shapes, device=torch.device(ns.device), batch_sizes=ns.batch_sizes,
        prompt_len=ns.prompt_len, decode_steps=ns.decode_steps, out=ns.out,
    )


def measure_shape(shape: Shape, config: Config, bandwidth: float) -> dict[str, Any]:
    """Time to ready (CUDA graphs off, then on), then throughput on the runner with graphs."""
    cuda = config.device.type == "cuda"
    spec = RunnerSpec(
        device=config.device, dtype="bfloat16" if cuda else "float32",
        context_length=config.prompt_len + config.decode_steps + 16,
        max_running_requests=max(config.batch_sizes),
        # NOTE: on CPU the torch-native backend: the smoke run needs no C++ kernel build.
        attention_backend=None if cuda else "torch_native",
    )
    model = RandomModel(shape, spec)
    try:
        eager, eager_s = model.build(cuda_graphs=False)
        # NOTE: compiles this head shape's Triton kernels before the build with graphs, so its
        # extra time is the capture, as on an engine start with the kernel cache warm.
        measure_throughput(eager, 1, 16, 2)
        del eager
        release_memory(config.device)
        runner, graphs_s = model.build(cuda_graphs=True)
        weight_bytes = model.weight_bytes
    finally:
        model.close()
    mc = runner.model_config
    kv_per_token = runner.kv_pool.bytes_per_token(mc.num_layers, mc.num_kv_heads, mc.head_dim, runner.dtype)
    throughput = []
    for batch_size in config.batch_sizes:
        measured = measure_throughput(runner, batch_size, config.prompt_len, config.decode_steps)
        step = decode_step(
            runner.model.named_parameters(), batch_size, mean_kv_len(config.prompt_len, config.decode_steps),
            kv_per_token,
        )
        roofline = step.roofline_tok_s(bandwidth)
        throughput.append({
            "batch": batch_size, **measured, "step_read_gb": step.total_bytes / 1e9,
            "roofline_tok_s": roofline, "roofline_ratio": measured["decode_tok_s"] / roofline,
        })
    row = {
        "shape": shape.key,
        "model": shape.label,
        "architecture": mc.architecture,
        "weight_gb": weight_bytes / 1e9,
        "dtype": str(runner.dtype).removeprefix("torch."),
        "attention_backend": type(runner.attention).__name__,
        "cuda_graphs": runner.cuda_graph is not None,
        # NOTE: no capture where the runner has no graphs (CPU, or a backend they cannot capture).
        "ready_s": {
            "eager": eager_s, "cuda_graphs": graphs_s,
            "capture": graphs_s - eager_s if runner.cuda_graph is not None else None,
        },
        "throughput": throughput,
    }
    del runner
    release_memory(config.device)
    return row


def _save(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))


def run(config: Config) -> dict[str, Any]:
    """Every shape, then the kernel rows (CUDA only); the JSON is rewritten after each part,
    so a run cut short by its time limit keeps what it measured."""
    device = config.device
    bandwidth = copy_bandwidth(device, _COPY_BYTES[device.type])
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "copy_bandwidth_gb_s": bandwidth / 1e9,
        "command": "python -m bench.gpu_bench " + " ".join(sys.argv[1:]),
        "config": {"prompt_len": config.prompt_len, "decode_steps": config.decode_steps},
        "models": [],
        "kernels": [],
        "prefill": [],
    }
    print(summary_lines(result)[0], flush=True)
    for shape in config.shapes:
        result["models"].append(measure_shape(shape, config, bandwidth))
        _save(result, config.out)
        print(_model_summary(result["models"][-1]), flush=True)
    if device.type == "cuda":
        for shape in config.shapes:
            result["kernels"] += attention_rows(shape, device)
        result["prefill"] = no_prefix_prefill_rows(device)
        _save(result, config.out)
    return result


def _model_markdown(m: dict[str, Any]) -> list[str]:
    title = (
        f"**{m['shape']}**: {m['model']}'s shape ({m['architecture']}, {m['weight_gb']:.2f} GB of "
        f"{m['dtype']} weights), {m['attention_backend']}. {_ready_text(m)}."
    )
    lines = [
        title,
        "",
        "| batch | prefill tok/s | decode tok/s | decode tok/s (eager) | GB read / step | roofline tok/s | of roofline |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in m["throughput"]:
        lines.append(
            f"| {t['batch']} | {t['prefill_tok_s']:,.0f} | {t['decode_tok_s']:,.0f} | "
            f"{t['decode_eager_tok_s']:,.0f} | {t['step_read_gb']:.3f} | {t['roofline_tok_s']:,.0f} | "
            f"{t['roofline_ratio']:.2f} |"
        )
    return [*lines, ""]


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(result: dict[str, Any]) -> str:
    setup = (
        f"{result['device']}, torch {result['torch']}; copy bandwidth {result['copy_bandwidth_gb_s']:,.0f} GB/s; "
        f"prompt {result['config']['prompt_len']} tokens, {result['config']['decode_steps']} decode steps."
    )
    lines = [setup, ""]
    for m in result["models"]:
        lines += _model_markdown(m)
    if result["kernels"]:
        lines += [
            "| model | kernel | shape | triton ms | SDPA dense ms | gather + SDPA ms | vs dense | vs gather |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for k in result["kernels"]:
            lines.append(
                f"| {k['model']} | {k['kernel']} | {k['shape']} | {k['triton_ms']:.3f} | {k['sdpa_dense_ms']:.3f} | "
                f"{k['gather_sdpa_ms']:.3f} | {k['sdpa_dense_ms'] / k['triton_ms']:.2f}x | "
                f"{k['gather_sdpa_ms'] / k['triton_ms']:.2f}x |"
            )
        lines.append("")
    if result["prefill"]:
        columns = list(result["prefill"][0])
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in result["prefill"]]
        lines.append("")
    return "\n".join(lines).rstrip()


def _ready_text(m: dict[str, Any]) -> str:
    ready = m["ready_s"]
    if ready["capture"] is None:
        return f"Ready {ready['eager']:.2f} s after the runner's build starts (no CUDA graphs here)"
    return (
        f"Ready {ready['cuda_graphs']:.2f} s after the runner's build starts with CUDA graphs, "
        f"{ready['eager']:.2f} s without (capture {ready['capture']:.2f} s)"
    )


def _model_summary(m: dict[str, Any]) -> str:
    decode = ", ".join(f"B={t['batch']} {t['decode_tok_s']:,.0f} ({t['roofline_ratio']:.0%})" for t in m["throughput"])
    ready = m["ready_s"]
    if ready["capture"] is None:
        return f"bench: {m['shape']}: decode tok/s (of roofline) {decode}; ready {ready['eager']:.1f} s"
    return (
        f"bench: {m['shape']}: decode tok/s (of roofline) {decode}; ready {ready['cuda_graphs']:.1f} s "
        f"with CUDA graphs, {ready['eager']:.1f} s without (capture {ready['capture']:.1f} s)"
    )


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The compact summary: the bandwidth, then one line per shape (decode tok/s and its
    share of the roofline per batch, time to ready) and one per shape's kernel rows."""
    lines = [f"bench: {result['device']}: copy bandwidth {result['copy_bandwidth_gb_s']:,.0f} GB/s"]
    lines += [_model_summary(m) for m in result["models"]]
    for key in dict.fromkeys(k["model"] for k in result["kernels"]):
        rows = [k for k in result["kernels"] if k["model"] == key]
        ratios = ", ".join(f"{k['kernel']} {k['shape']} {k['sdpa_dense_ms'] / k['triton_ms']:.2f}x" for k in rows)
        lines.append(f"bench: {key}: attention, triton vs SDPA dense: {ratios}")
    if result["prefill"]:
        lines.append(f"bench: no-prefix prefill: {len(result['prefill'])} rows (table above)")
    return lines


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if config.device.type == "cuda":
        if not torch.cuda.is_available():
            print(
                "bench.gpu_bench: no CUDA device (torch.cuda.is_available() is False); "
                "the GPU path is measured on a GPU machine only (--device cpu --shapes tiny runs the plumbing)",
                file=sys.stderr,
            )
            return 2
        try:
            import triton  # noqa: F401
        except ImportError:
            print("bench.gpu_bench: triton is not installed (CUDA builds of torch ship it)", file=sys.stderr)
            return 2
    result = run(config)
    print(markdown(result))
    print("\n".join(summary_lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
