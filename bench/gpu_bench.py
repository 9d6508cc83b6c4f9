"""The GPU path: decode and prefill throughput against the HBM roofline, and the Triton
attention kernels against torch SDPA. Needs a CUDA device; refuses (exit 2) without one.

The model has Qwen2.5-0.5B's shape (its config.json values, written here: nothing is
downloaded) with random bf16 weights, run by the engine's ModelRunner (Triton backend,
fused kernels). Throughput is the model forward alone (no HTTP, no scheduler, greedy
argmax on the device):
- prefill tok/s = B * L / t(one extend forward of B prompts of L tokens);
- decode tok/s = B * steps / t(steps decode forwards), with and without CUDA graphs;
- roofline: a decode step must read every weight once plus each request's KV; at the
  measured device-to-device copy bandwidth that takes bytes / bandwidth, so the roofline is
  B / that time, and the ratio is measured / roofline (1.0 = bandwidth bound, no waste).
Kernel rows time one attention layer (triton.testing.do_bench, median ms): our kernels
over the paged KV pool (shuffled slots) against SDPA on dense, contiguous K/V (its best
case) and against the torch-native backend (gather + SDPA).

    bash bench/gpu.sh      (= python -m bench.gpu_bench --out bench/results/gpu.json)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

# NOTE: Qwen/Qwen2.5-0.5B-Instruct's config.json (the fields the engine and transformers read).
QWEN25_05B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "use_sliding_window": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}


@dataclass(frozen=True)
class Config:
    batch_sizes: tuple[int, ...]
    prompt_len: int
    decode_steps: int
    out: Path | None


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_bench", description=__doc__.split("\n")[0])
    p.add_argument("--batch-sizes", default="1,32,128")
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--decode-steps", type=int, default=128)
    p.add_argument("--out", type=Path, help="also write the raw results here as JSON")
    ns = p.parse_args(argv)
    return Config(
        batch_sizes=tuple(int(b) for b in ns.batch_sizes.split(",")),
        prompt_len=ns.prompt_len,
        decode_steps=ns.decode_steps,
        out=ns.out,
    )


def write_random_checkpoint(path: Path) -> None:
    """config.json plus random bf16 safetensors with Qwen2.5-0.5B's tensor names and shapes."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**{k: v for k, v in QWEN25_05B_CONFIG.items() if k != "architectures"})
    config.architectures = QWEN25_05B_CONFIG["architectures"]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(str(path))


def copy_bandwidth(device: torch.device, size_bytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s (each byte read once and written once)."""
    src = torch.empty(size_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start = time.perf_counter()
    repeats = 10
    for _ in range(repeats):
        dst.copy_(src)
    torch.cuda.synchronize()
    return 2 * size_bytes * repeats / (time.perf_counter() - start)


def _forward_batch(
    runner: Any, mode: Any, ids: torch.Tensor, positions: torch.Tensor, loc: torch.Tensor,
    rows: torch.Tensor, seq_lens: list[int], prefix_lens: list[int], new_lens: list[int],
) -> Any:
    from engine.core.forward_batch import ForwardBatch

    return ForwardBatch(
        mode=mode, input_ids=ids, positions=positions, out_cache_loc=loc, req_pool_indices=rows,
        seq_lens=torch.tensor(seq_lens, device=ids.device), seq_lens_cpu=seq_lens,
        extend_prefix_lens_cpu=prefix_lens, extend_seq_lens_cpu=new_lens,
        req_to_token=runner.req_to_token_pool.req_to_token, kv_pool=runner.kv_pool,
    )


def measure_throughput(runner: Any, batch_size: int, prompt_len: int, steps: int) -> dict[str, float]:
    """One prefill of B random prompts, then ``steps`` timed decode steps (after 2 untimed),
    with CUDA graphs and again eagerly over the same KV."""
    from engine.core.forward_batch import ForwardMode

    device = runner.device
    table = runner.req_to_token_pool
    warmup = 2
    total = prompt_len + warmup + steps
    rows_list = [table.alloc() for _ in range(batch_size)]
    slots = runner.allocator.alloc(batch_size * total)
    if None in rows_list or slots is None:
        raise RuntimeError("the KV pool or request table is too small for this batch")
    slots = slots.view(batch_size, total)
    for row, own in zip(rows_list, slots):
        table.write(row, 0, own)
    rows = torch.tensor(rows_list, device=device)
    vocab = runner.model_config.vocab_size
    try:
        ids = torch.randint(100, vocab - 100, (batch_size * prompt_len,), device=device)
        prefill = _forward_batch(
            runner, ForwardMode.EXTEND, ids, torch.arange(prompt_len, device=device).repeat(batch_size),
            slots[:, :prompt_len].flatten(), rows, [prompt_len] * batch_size, [0] * batch_size,
            [prompt_len] * batch_size,
        )
        torch.cuda.synchronize()
        start = time.perf_counter()
        next_ids = runner.forward(prefill).argmax(-1)
        torch.cuda.synchronize()
        prefill_s = time.perf_counter() - start

        def decode(first: int, count: int, tokens: torch.Tensor) -> tuple[torch.Tensor, float]:
            torch.cuda.synchronize()
            begin = time.perf_counter()
            for pos in range(first, first + count):
                batch = _forward_batch(
                    runner, ForwardMode.DECODE, tokens, torch.full((batch_size,), pos, device=device),
                    slots[:, pos].contiguous(), rows, [pos + 1] * batch_size, [pos] * batch_size,
                    [1] * batch_size,
                )
                tokens = runner.forward(batch).argmax(-1)
            torch.cuda.synchronize()
            return tokens, time.perf_counter() - begin

        next_ids, _ = decode(prompt_len, warmup, next_ids)
        _, graph_s = decode(prompt_len + warmup, steps, next_ids)
        # NOTE: the eager pass rewrites the same positions (same KV length), graphs off.
        graphs, runner.cuda_graph = runner.cuda_graph, None
        try:
            _, eager_s = decode(prompt_len + warmup, steps, next_ids)
        finally:
            runner.cuda_graph = graphs
    finally:
        runner.allocator.free(slots.flatten())
        for row in rows_list:
            table.free(row)
    return {
        "prefill_tok_s": batch_size * prompt_len / prefill_s,
        "decode_tok_s": batch_size * steps / graph_s,
        "decode_eager_tok_s": batch_size * steps / eager_s,
    }


def decode_roofline(runner: Any, batch_size: int, mean_kv_len: float, bandwidth: float) -> float:
    """Tokens/s if a decode step only moved its compulsory bytes at ``bandwidth``."""
    mc = runner.model_config
    weight_bytes = sum(p.numel() * p.element_size() for p in runner.model.parameters())
    kv_bytes = batch_size * mean_kv_len * runner.kv_pool.bytes_per_token(
        mc.num_layers, mc.num_kv_heads, mc.head_dim, runner.dtype
    )
    return batch_size * bandwidth / (weight_bytes + kv_bytes)


def _paged_kv(
    batch: int, length: int, kv_heads: int, head_dim: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A bf16 pool holding B sequences of ``length`` tokens at shuffled slots; returns
    (k_buffer, v_buffer, req_to_token, dense k [B, kv_heads, L, D], dense v)."""
    slots = torch.randperm(batch * length, device=device) + 1
    req_to_token = slots.view(batch, length)
    shape = (batch * length + 1, kv_heads, head_dim)
    k_buffer = torch.randn(shape, dtype=torch.bfloat16, device=device)
    v_buffer = torch.randn(shape, dtype=torch.bfloat16, device=device)
    dense_k = k_buffer[req_to_token].transpose(1, 2).contiguous()
    dense_v = v_buffer[req_to_token].transpose(1, 2).contiguous()
    return k_buffer, v_buffer, req_to_token, dense_k, dense_v


_HEADS, _KV_HEADS, _HEAD_DIM = 14, 2, 64  # Qwen2.5-0.5B's attention shape


def _decode_row(batch: int, length: int, device: torch.device) -> dict[str, Any]:
    from triton.testing import do_bench

    from engine.kernels.triton.decode_attention import decode_attention

    k_buf, v_buf, r2t, dense_k, dense_v = _paged_kv(batch, length, _KV_HEADS, _HEAD_DIM, device)
    q = torch.randn(batch, _HEADS, _HEAD_DIM, dtype=torch.bfloat16, device=device)
    pool_rows = torch.arange(batch, device=device)
    seq_lens = torch.full((batch,), length, device=device)
    scale = _HEAD_DIM**-0.5

    def ours() -> torch.Tensor:
        return decode_attention(q, k_buf, v_buf, r2t, pool_rows, seq_lens, scale)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.unsqueeze(2), keys, values, enable_gqa=True)

    return {
        "kernel": "decode",
        "shape": f"B={batch} L={length}",
        "triton_ms": do_bench(ours),
        "sdpa_dense_ms": do_bench(lambda: sdpa(dense_k, dense_v)),
        "gather_sdpa_ms": do_bench(lambda: sdpa(k_buf[r2t].transpose(1, 2), v_buf[r2t].transpose(1, 2))),
    }


def _extend_row(batch: int, prefix: int, new: int, device: torch.device) -> dict[str, Any]:
    from triton.testing import do_bench

    from engine.kernels.triton.extend_attention import extend_attention

    length = prefix + new
    k_buf, v_buf, r2t, dense_k, dense_v = _paged_kv(batch, length, _KV_HEADS, _HEAD_DIM, device)
    q = torch.randn(batch * new, _HEADS, _HEAD_DIM, dtype=torch.bfloat16, device=device)
    dense_q = q.view(batch, new, _HEADS, _HEAD_DIM).transpose(1, 2)
    pool_rows = torch.arange(batch, device=device)
    q_starts = torch.arange(batch, device=device) * new
    new_lens = torch.full((batch,), new, device=device)
    prefix_lens = torch.full((batch,), prefix, device=device)
    # NOTE: bottom-right causal: query i (position prefix + i) sees keys 0 .. prefix + i.
    mask = torch.ones(new, length, dtype=torch.bool, device=device).tril(diagonal=prefix)
    scale = _HEAD_DIM**-0.5

    def ours() -> torch.Tensor:
        return extend_attention(q, k_buf, v_buf, r2t, pool_rows, q_starts, new_lens, prefix_lens, new, scale)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        if prefix == 0:
            return F.scaled_dot_product_attention(dense_q, keys, values, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(dense_q, keys, values, attn_mask=mask, enable_gqa=True)

    return {
        "kernel": "extend",
        "shape": f"B={batch} prefix={prefix} new={new}",
        "triton_ms": do_bench(ours),
        "sdpa_dense_ms": do_bench(lambda: sdpa(dense_k, dense_v)),
        "gather_sdpa_ms": do_bench(lambda: sdpa(k_buf[r2t].transpose(1, 2), v_buf[r2t].transpose(1, 2))),
    }


def attention_kernels(device: torch.device) -> list[dict[str, Any]]:
    """Median ms of one layer's attention: our Triton kernels, SDPA on dense K/V, and the
    torch-native backend's gather + SDPA, at Qwen2.5-0.5B's head shape."""
    decode = [_decode_row(b, n, device) for b, n in ((1, 4096), (32, 1024), (128, 1024))]
    extend = [_extend_row(b, p, n, device) for b, p, n in ((1, 0, 4096), (8, 512, 512))]
    return decode + extend


def run(config: Config) -> dict[str, Any]:
    from engine.engine_config import EngineConfig
    from engine.runtime.model_runner import ModelRunner

    device = torch.device("cuda")
    bandwidth = copy_bandwidth(device)
    with tempfile.TemporaryDirectory(prefix="gomgr-gpu-bench-") as tmp:
        write_random_checkpoint(Path(tmp))
        runner = ModelRunner(EngineConfig(
            model_path=tmp, device="cuda", dtype="bfloat16",
            context_length=config.prompt_len + config.decode_steps + 16,
            max_running_requests=max(config.batch_sizes),
        ))
    # NOTE: compiles the Triton kernels for the extend path before anything is timed.
    measure_throughput(runner, 1, 16, 2)
    throughput = []
    for batch_size in config.batch_sizes:
        result = measure_throughput(runner, batch_size, config.prompt_len, config.decode_steps)
        roofline = decode_roofline(runner, batch_size, config.prompt_len + 2 + config.decode_steps / 2, bandwidth)
        throughput.append({
            "batch": batch_size, **result, "roofline_tok_s": roofline,
            "roofline_ratio": result["decode_tok_s"] / roofline,
        })
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "attention_backend": type(runner.attention).__name__,
        "cuda_graphs": runner.cuda_graph is not None,
        "copy_bandwidth_gb_s": bandwidth / 1e9,
        "command": "python -m bench.gpu_bench " + " ".join(sys.argv[1:]),
        "config": {"prompt_len": config.prompt_len, "decode_steps": config.decode_steps},
        "throughput": throughput,
        "kernels": attention_kernels(device),
    }


def markdown(result: dict[str, Any]) -> str:
    graphs = "on" if result["cuda_graphs"] else "off"
    setup = (
        f"{result['device']}, torch {result['torch']}, {result['attention_backend']}, CUDA graphs "
        f"{graphs}; copy bandwidth {result['copy_bandwidth_gb_s']:.0f} GB/s; prompt "
        f"{result['config']['prompt_len']} tokens, {result['config']['decode_steps']} decode steps."
    )
    lines = [
        setup,
        "",
        "| batch | prefill tok/s | decode tok/s | decode tok/s (eager) | roofline tok/s | of roofline |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for t in result["throughput"]:
        lines.append(
            f"| {t['batch']} | {t['prefill_tok_s']:,.0f} | {t['decode_tok_s']:,.0f} | "
            f"{t['decode_eager_tok_s']:,.0f} | {t['roofline_tok_s']:,.0f} | {t['roofline_ratio']:.2f} |"
        )
    lines += [
        "",
        "| kernel | shape | triton ms | SDPA dense ms | gather + SDPA ms | vs dense | vs gather |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for k in result["kernels"]:
        lines.append(
            f"| {k['kernel']} | {k['shape']} | {k['triton_ms']:.3f} | {k['sdpa_dense_ms']:.3f} | "
            f"{k['gather_sdpa_ms']:.3f} | {k['sdpa_dense_ms'] / k['triton_ms']:.2f}x | "
            f"{k['gather_sdpa_ms'] / k['triton_ms']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "bench.gpu_bench: no CUDA device (torch.cuda.is_available() is False); "
            "the GPU path is measured on a GPU machine only",
            file=sys.stderr,
        )
        return 2
    try:
        import triton  # noqa: F401
    except ImportError:
        print("bench.gpu_bench: triton is not installed (CUDA builds of torch ship it)", file=sys.stderr)
        return 2
    result = run(config)
    if config.out is not None:
        config.out.parent.mkdir(parents=True, exist_ok=True)
        config.out.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
