"""Per-request, per-step random generators for seeded (reproducible) requests.

A seeded request draws its noise from its own generator, so its tokens do not depend on
which other requests share the batch. The generator for a step is derived statelessly
from (seed, step), where step is the number of tokens the request has generated so far:
every step gets fresh noise, and a step re-run after preemption or retry draws the same
noise again. Streams differ between CPU and CUDA, so a seed reproduces on one device type.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.sampling.params import SamplingParams

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """SplitMix64 finaliser: a bijective 64-bit mix, so nearby inputs give unrelated outputs."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def step_seed(seed: int, step: int) -> int:
    """The generator seed for `step` of a request seeded with `seed`.

    NOTE: mixing the seed before adding the step keeps (seed, step + 1) and (seed + 1, step)
    unrelated, which matters because n > 1 requests use consecutive seeds.
    """
    return _splitmix64((_splitmix64(seed) + step) & _MASK64)


def make_generators(
    params: Sequence[SamplingParams],
    output_lens: Sequence[int],
    device: torch.device | str,
) -> tuple[torch.Generator | None, ...]:
    """One generator per seeded, non-greedy row (greedy rows need no randomness)."""
    if len(output_lens) != len(params):
        raise ValueError(f"got {len(output_lens)} output_lens for {len(params)} requests")
    generators: list[torch.Generator | None] = []
    for p, step in zip(params, output_lens):
        if p.seed is None or p.is_greedy:
            generators.append(None)
            continue
        generator = torch.Generator(device=device)
        generator.manual_seed(step_seed(p.seed, step))
        generators.append(generator)
    return tuple(generators)
