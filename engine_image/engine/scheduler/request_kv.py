"""The one owner of KV slots and request rows: every request's KV over its life, and the
slots a forward-only batch borrows for one forward.

Keeps the invariant stated on ``Req``: the KV of ``fill_ids[:kv_len]`` sits at
``req_to_token[req_pool_idx, :kv_len]``, the first ``prefix_len`` slots owned by the radix
tree (locked through ``last_node``), the rest by the request.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.core.forward_batch import ForwardBatch
from engine.ipc.scheduler_stats import KVCacheStats
from engine.memory import RadixCache
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.request import Req


class RequestKV:
    def __init__(self, runner: ModelRunner, tree: RadixCache) -> None:
        self.allocator = runner.allocator
        self.table = runner.req_to_token_pool
        self.tree = tree
        self.max_total_tokens = runner.max_total_tokens

    # ------------------------------------------------------------------ generation requests

    def obtainable_tokens(self) -> int:
        """Slots free now plus those the radix tree could give up."""
        return self.allocator.available_size() + self.tree.evictable_size()

    def lock_cached_prefix(self, req: Req) -> None:
        """Points a new request at the longest cached prefix of its prompt, locked in the tree.

        NOTE: never the whole prompt: its last token must be computed to get logits.
        """
        match = self.tree.match_prefix(req.input_ids[: len(req.input_ids) - 1])
        self.tree.inc_lock_ref(match.last_node)
        req.prefix_indices, req.last_node = match.indices, match.last_node
        req.kv_len = req.cached_tokens = len(match.indices)

    def unlock_cached_prefix(self, req: Req) -> None:
        """Undoes ``lock_cached_prefix`` for a request that was not admitted."""
        assert req.last_node is not None, "the request holds a locked prefix"
        self.tree.dec_lock_ref(req.last_node)
        req.prefix_indices, req.last_node, req.kv_len, req.cached_tokens = None, None, 0, 0

    def assign_row(self, req: Req) -> None:
        """Gives an admitted request its request-table row, its cached prefix written in."""
        row = self.table.alloc()
        assert row is not None, "admission checked free_rows"
        req.req_pool_idx = row
        if req.prefix_indices is not None and req.prefix_len:
            self.table.write(row, 0, req.prefix_indices)

    def extend(self, reqs: Sequence[Req], lens: Sequence[int]) -> torch.Tensor:
        """Gives each request ``lens[i]`` new slots after its KV (recorded in its table row,
        ``kv_len`` advanced); returns them in batch order, the forward's ``out_cache_loc``."""
        slots = self._reserved(sum(lens))
        offset = 0
        for req, n in zip(reqs, lens, strict=True):
            assert req.req_pool_idx is not None, "a request in a batch holds a request row"
            self.table.write(req.req_pool_idx, req.kv_len, slots[offset : offset + n])
            req.kv_len += n
            offset += n
        return slots

    def extend_decode(self, reqs: Sequence[Req]) -> torch.Tensor:
        """``extend`` by one slot each, for a decode step, but the table is written by
        ``write_decode`` once the batch is built (its rows and positions on the device)."""
        slots = self._reserved(len(reqs))
        for req in reqs:
            req.kv_len += 1
        return slots

    def write_decode(self, reqs: Sequence[Req], batch: ForwardBatch) -> None:
        """Records ``extend_decode``'s slots in the request table: one write for the batch
        instead of one per request."""
        rows = [r.req_pool_idx for r in reqs if r.req_pool_idx is not None]
        assert len(rows) == len(reqs), "a request in a batch holds a request row"
        positions = [r.kv_len - 1 for r in reqs]
        self.table.write_each(rows, positions, batch.out_cache_loc, (batch.req_pool_indices, batch.positions))

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

    # ------------------------------------------------------------------ forward-only batches

    def free_rows(self) -> int:
        return self.table.available_size()

    def lend(self, lens: Sequence[int]) -> tuple[torch.Tensor, list[int]] | None:
        """Slots and one request row per prompt (``lens[i]`` slots written in row i) for one
        forward; None when the pool cannot hold them now. Returned with ``take_back``;
        nothing of them enters the radix tree."""
        if self.table.available_size() < len(lens):
            return None
        slots = self._alloc(sum(lens))
        if slots is None:
            return None
        rows: list[int] = []
        offset = 0
        for n in lens:
            row = self.table.alloc()
            assert row is not None, "rows were counted above"
            self.table.write(row, 0, slots[offset : offset + n])
            rows.append(row)
            offset += n
        return slots, rows

    def take_back(self, slots: torch.Tensor, rows: Sequence[int]) -> None:
        self.allocator.free(slots)
        for row in rows:
            self.table.free(row)

    # ------------------------------------------------------------------ both

    def empty_tree(self) -> None:
        """Drops every cached prefix (no request may hold one)."""
        self.tree.reset()

    def stats(self) -> KVCacheStats:
        free = self.allocator.available_size()
        return KVCacheStats(
            pool_free_tokens=free,
            pool_used_tokens=self.max_total_tokens - free,
            radix_cache_tokens=self.tree.total_size(),
            radix_cache_evictable_tokens=self.tree.evictable_size(),
        )

    def _reserved(self, n: int) -> torch.Tensor:
        """``n`` slots that admission reserved for running requests."""
        slots = self._alloc(n)
        if slots is None:
            # NOTE: admission reserves every request's future tokens, so this is a bug.
            raise RuntimeError(f"KV pool exhausted: needed {n}, {self.allocator.available_size()} free")
        return slots

    def _alloc(self, n: int) -> torch.Tensor | None:
        """``n`` free slots, evicting unlocked tree leaves when the pool is short."""
        slots = self.allocator.alloc(n)
        if slots is None:
            self.tree.evict(n - self.allocator.available_size())
            slots = self.allocator.alloc(n)
        return slots
