"""Prefill and decode throughput of a ModelRunner's forward alone: no HTTP, no scheduler,
greedy argmax on the device.

- prefill tok/s = B * L / t(one extend forward of B prompts of L tokens);
- decode tok/s = B * steps / t(steps decode forwards), with the runner's CUDA graphs and
  again eagerly over the same KV.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from bench.gpu_models import sync

if TYPE_CHECKING:
    from engine.core.forward_batch import ForwardBatch, ForwardMode
    from engine.runtime.model_runner import ModelRunner

# NOTE: untimed decode steps before the timed ones (graph replay and allocator warm).
WARMUP_STEPS = 2


def mean_kv_len(prompt_len: int, steps: int) -> float:
    """The mean KV length over the timed decode steps of ``measure_throughput``."""
    return prompt_len + WARMUP_STEPS + steps / 2


def _forward_batch(
    runner: ModelRunner, mode: ForwardMode, ids: torch.Tensor, positions: torch.Tensor, loc: torch.Tensor,
    rows: torch.Tensor, seq_lens: list[int], prefix_lens: list[int], new_lens: list[int],
) -> ForwardBatch:
    from engine.core.forward_batch import ForwardBatch

    return ForwardBatch(
        mode=mode, input_ids=ids, positions=positions, out_cache_loc=loc, req_pool_indices=rows,
        seq_lens=torch.tensor(seq_lens, device=ids.device), seq_lens_cpu=seq_lens,
        extend_prefix_lens_cpu=prefix_lens, extend_seq_lens_cpu=new_lens,
        req_to_token=runner.req_to_token_pool.req_to_token, kv_pool=runner.kv_pool,
    )


def measure_throughput(runner: ModelRunner, batch_size: int, prompt_len: int, steps: int) -> dict[str, float]:
    """One prefill of B random prompts, then ``steps`` timed decode steps (after
    WARMUP_STEPS untimed), with CUDA graphs and again eagerly over the same KV."""
    from engine.core.forward_batch import ForwardMode

    device = runner.device
    table = runner.req_to_token_pool
    total = prompt_len + WARMUP_STEPS + steps
    allocated = [table.alloc() for _ in range(batch_size)]
    rows_list = [row for row in allocated if row is not None]
    slots = runner.allocator.alloc(batch_size * total)
    if len(rows_list) < batch_size or slots is None:
        for row in rows_list:
            table.free(row)
        if slots is not None:
            runner.allocator.free(slots)
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
        sync(device)
        start = time.perf_counter()
        next_ids = runner.forward(prefill).argmax(-1)
        sync(device)
        prefill_s = time.perf_counter() - start

        def decode(first: int, count: int, tokens: torch.Tensor) -> tuple[torch.Tensor, float]:
            sync(device)
            begin = time.perf_counter()
            for pos in range(first, first + count):
                batch = _forward_batch(
                    runner, ForwardMode.DECODE, tokens, torch.full((batch_size,), pos, device=device),
                    slots[:, pos].contiguous(), rows, [pos + 1] * batch_size, [pos] * batch_size,
                    [1] * batch_size,
                )
                tokens = runner.forward(batch).argmax(-1)
            sync(device)
            return tokens, time.perf_counter() - begin

        next_ids, _ = decode(prompt_len, WARMUP_STEPS, next_ids)
        _, graph_s = decode(prompt_len + WARMUP_STEPS, steps, next_ids)
        # NOTE: the eager pass rewrites the same positions (same KV length), graphs off.
        graphs, runner.cuda_graph = runner.cuda_graph, None
        try:
            _, eager_s = decode(prompt_len + WARMUP_STEPS, steps, next_ids)
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
