"""The quantized CPU linear kernels against our fp32 PackedLinear, on SmolLM2-135M's shapes.

    python -m bench.quantized_linear [--rows 1 8 32] [--types Q4_0 Q8_0 ...] [--seconds 0.3] [--threads N]

Per shape (out x in), row count and GGUF type, each kernel path this CPU runs (forced: AVX2,
AVX-VNNI, AVX-512, AMX) is timed as the median of 5 runs of enough calls to fill ``--seconds``, and
reported with its speed-up over fp32 PackedLinear on the same shape and rows (> 1: faster)
and its resident bits per weight. Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 hold gguf-quantized Gaussian
weights; K-quants random valid blocks (their speed does not depend on the values), only on
the shapes whose rows are whole 256-blocks (1536 -> 576 here).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from bench.serving.cpu_features import cpu_flags
from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.quantized import Isa, kernel_name, packed_format
from engine.layers.packed_linear import PackedLinear
from engine.layers.quantized_linear import QuantizedLinear
from tests.support.random_blocks import random_block_tensor

# NOTE: SmolLM2-135M: fused q/k/v, o, fused gate/up, down, the tied LM head.
SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576))
TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "BF16", "F16")


def time_ms(call: Callable[[torch.Tensor], object], x: torch.Tensor, seconds: float) -> float:
    """Median milliseconds of ``call(x)`` over 5 runs of enough calls to fill ``seconds``."""
    call(x)
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 5:
        call(x)
        calls += 1
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call(x)
        runs.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(runs)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--types", nargs="+", default=list(TYPES), choices=TYPES)
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    kernels = load_cpu_kernels()
    if kernels is None:
        raise SystemExit("the CPU kernels did not build: nothing to compare")
    print(f"CPU flags: {' '.join(cpu_flags())}; torch threads: {torch.get_num_threads()}")
    print(f"{'shape':>11} {'rows':>4} {'type':>5} {'path':>18} {'bits/w':>6} {'ms':>8} {'fp32 ms':>8} {'speed-up':>8}")
    for out_features, in_features in SHAPES:
        fp32 = PackedLinear(torch.randn(out_features, in_features), None)
        layers: dict[tuple[str, str], QuantizedLinear] = {}
        for name in args.types:
            qtype = GGMLQuantizationType[name]
            if in_features % GGML_QUANT_SIZES[qtype][0]:
                continue  # K-quants need rows of whole 256-blocks (llama.cpp writes Q5_0/Q5_1/Q8_0 instead)
            part = random_block_tensor(qtype, out_features, in_features)
            for isa in (Isa.AVX2, Isa.AVX_VNNI, Isa.AVX512, Isa.AMX):
                try:
                    path = kernel_name(kernels, packed_format(qtype), isa)
                except RuntimeError:
                    continue  # this CPU lacks the path
                if (name, path) not in layers:  # F16 has one path
                    layers[(name, path)] = QuantizedLinear([part], isa=isa)
        for rows in args.rows:
            x = torch.randn(rows, in_features)
            base = time_ms(fp32, x, args.seconds)
            for (name, _), layer in layers.items():
                ms = time_ms(layer, x, args.seconds)
                bits = layer.weight_bytes * 8 / (out_features * in_features)
                print(f"{out_features:>5}x{in_features:<5} {rows:>4} {name:>5} {layer.kernel_path:>18} {bits:>6.2f} "
                      f"{ms:>8.3f} {base:>8.3f} {base / ms:>7.2f}x")


if __name__ == "__main__":
    main()
