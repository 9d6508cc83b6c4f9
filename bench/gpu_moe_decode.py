"""One MoE layer's routed experts at decode batch sizes: the capture-safe kernels CUDA-graph
decode uses (gather, dense; each replayed from a CUDA graph) against the host-routed one
(eager: it cannot be captured), on random bf16 weights of real models' expert shapes.

Prints one row per (shape, batch): each kernel's median ms ("-": not run) and the kernel
``expert_kernel`` picks, which should be the faster capture-safe one. ``--device cpu --small`` is a smoke run
of the script itself (tiny shape, wall-clock timing), not a measurement.

    python -m bench.gpu_moe_decode            # on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.models.moe import Experts, route
from engine.models.moe_static import dense_experts, expert_kernel, gathered_experts


@dataclass(frozen=True)
class MoeShape:
    name: str
    num_experts: int
    top_k: int
    hidden: int
    intermediate: int


SHAPES = (
    MoeShape("Qwen3-30B-A3B", 128, 8, 2048, 768),
    MoeShape("Mixtral-8x7B", 8, 2, 4096, 14336),
)
SMALL = MoeShape("tiny", 8, 2, 64, 32)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _median_ms(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median of ``repeats`` timed calls, after two warm-ups."""
    for _ in range(2):
        run()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            run()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def _graphed(fn: Callable[[], torch.Tensor], device: torch.device) -> Callable[[], object]:
    """``fn`` captured in a CUDA graph (its replay); as it is elsewhere."""
    if device.type != "cuda":
        return fn
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


@torch.inference_mode()
def measure(shape: MoeShape, batch: int, device: torch.device, dtype: torch.dtype, repeats: int) -> dict[str, object]:
    experts = Experts(shape.num_experts, shape.hidden, shape.intermediate).to(device, dtype)
    for param in experts.parameters():
        torch.nn.init.normal_(param, std=0.02)
    x = torch.randn(batch, shape.hidden, device=device, dtype=dtype)
    router = torch.randn(batch, shape.num_experts, device=device)
    weights, ids = route(router, shape.top_k, True)
    gate_up, down = experts.gate_up_proj, experts.down_proj

    def routed() -> torch.Tensor:
        counts = torch.bincount(ids.flatten(), minlength=shape.num_experts).tolist()
        return experts(x, ids, weights, counts)

    row: dict[str, object] = {"shape": shape.name, "batch": batch}
    row["routed_ms"] = _median_ms(routed, device, repeats)
    # NOTE: gather copies batch × top_k experts' weights (120 GB for Mixtral at batch 256):
    # measured up to a little past its crossover with dense only.
    if 3 * batch * shape.top_k <= 4 * shape.num_experts:
        gather = _graphed(lambda: gathered_experts(x, gate_up, down, ids, weights), device)
        row["gather_ms"] = _median_ms(gather, device, repeats)
    row["dense_ms"] = _median_ms(_graphed(lambda: dense_experts(x, gate_up, down, ids, weights), device), device, repeats)
    row["picked"] = expert_kernel(batch, shape.top_k, shape.num_experts, torch.device("cuda"))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="a tiny shape: a smoke run of the script")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    print("shape            batch  routed_ms  gather_ms  dense_ms  picked")
    for shape in (SMALL,) if args.small else SHAPES:
        for batch in BATCHES:
            r = measure(shape, batch, device, dtype, args.repeats)
            gather = f"{r['gather_ms']:>9.3f}" if "gather_ms" in r else f"{'-':>9}"
            print(f"{r['shape']:<16} {batch:>5}  {r['routed_ms']:>9.3f}  {gather}  {r['dense_ms']:>8.3f}  {r['picked']}")


if __name__ == "__main__":
    main()
