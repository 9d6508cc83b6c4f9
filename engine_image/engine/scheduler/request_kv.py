"""A request's KV slots over its life: allocated per step, shared through the radix tree, released.

Keeps the invariant stated on ``Req``: the KV of ``fill_ids[:kv_len]`` sits at
``req_to_token[req_pool_idx, :kv_len]``, the first ``prefix_len`` slots owned by the radix
tree (locked through ``last_node``), the rest by the request.
"""

from __future__ import annotations

import torch

from engine.memory import RadixCache
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.request import Req


class RequestKV:
    def __init__(self, runner: ModelRunner, tree: RadixCache) -> None:
        self.allocator = runner.allocator
        self.table = runner.req_to_token_pool
        self.tree = tree

    def alloc_slots(self, n: int) -> torch.Tensor:
        """``n`` free slots, evicting unlocked tree leaves when the pool is short."""
        slots = self.allocator.alloc(n)
        if slots is None:
            self.tree.evict(n - self.allocator.available_size())
            slots = self.allocator.alloc(n)
        if slots is None:
            # NOTE: admission reserves every request's future tokens, so this is a bug.
            raise RuntimeError(f"KV pool exhausted: needed {n}, {self.allocator.available_size()} free")
        return slots

    def cache_prefilled(self, req: Req) -> None:
        """Shares the prompt KV computed so far through the tree, right after the prefill step.

        NOTE: SGLang's ``cache_unfinished_req``: requests sharing a prompt prefix that
        arrive while this one still decodes reuse its KV instead of all missing until it
        finishes. Where a request that ran alongside inserted the same tokens first, the
        tree keeps its slots: this request switches to them and frees its duplicates.
        """
        if self.tree.disable or req.req_pool_idx is None:
            return
        key = req.fill_ids[: req.kv_len]
        slots = self.table.req_to_token[req.req_pool_idx, : req.kv_len]
        already_cached = self.tree.insert(key, slots)
        self.allocator.free(slots[req.prefix_len : already_cached].clone())
        match = self.tree.match_prefix(key)
        self.tree.inc_lock_ref(match.last_node)
        if req.last_node is not None:
            self.tree.dec_lock_ref(req.last_node)
        self.table.write(req.req_pool_idx, 0, match.indices)
        req.prefix_indices, req.last_node = match.indices, match.last_node

    def release(self, req: Req) -> None:
        """Hands the request's KV to the radix tree (or frees it) and unlocks its prefix."""
        if req.req_pool_idx is None:
            return
        slots = self.table.req_to_token[req.req_pool_idx, : req.kv_len].clone()
        already_cached = self.tree.insert(req.fill_ids[: req.kv_len], slots)
        self.allocator.free(slots[req.prefix_len : already_cached])
        if req.last_node is not None:
            self.tree.dec_lock_ref(req.last_node)
        self.table.free(req.req_pool_idx)
        req.req_pool_idx, req.last_node, req.prefix_indices = None, None, None
