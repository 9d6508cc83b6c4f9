"""CUDA graph capture and replay of decode forwards, one graph per captured batch size.

A decode batch is padded up to the nearest captured size: padded rows read request row 0
with one key, write their K/V to the dummy slot 0 and their logits are dropped. Batches
larger than every captured size run eagerly. Only the model runner builds this, and only
on CUDA with a backend whose decode path is capture-safe (no host syncs, shapes that
depend on the batch size alone); a MoE model's experts are (``models/moe_static``), and its
expert-distribution recorder counts each replay's real rows after the replay.
"""

from __future__ import annotations

import bisect
import logging

import torch

from engine.attention.base import AttentionBackend
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.memory import KVPool
from engine.models.expert_distribution import ExpertDistributionRecorder

logger = logging.getLogger(__name__)

# NOTE: beyond this, a decode step is compute-heavy enough that launch overhead no longer
# matters and each extra graph only costs capture time and memory.
_MAX_CAPTURED_BATCH = 256


def capture_batch_sizes(max_running_requests: int) -> list[int]:
    """1, 2, 4, 8, then every multiple of 16, up to the running-request limit (itself included)."""
    limit = min(max_running_requests, _MAX_CAPTURED_BATCH)
    sizes = [s for s in (1, 2, 4, 8) if s < limit] + list(range(16, limit, 16))
    return [*sizes, limit]


def padded_batch_size(batch_size: int, sizes: list[int]) -> int | None:
    """The smallest captured size that holds ``batch_size``; None when none does."""
    i = bisect.bisect_left(sizes, batch_size)
    return sizes[i] if i < len(sizes) else None


class CudaGraphRunner:
    def __init__(
        self,
        model: torch.nn.Module,
        backend: AttentionBackend,
        kv_pool: KVPool,
        req_to_token: torch.Tensor,
        batch_sizes: list[int],
        device: torch.device,
        expert_recorder: ExpertDistributionRecorder | None = None,
    ) -> None:
        self.model = model
        self.expert_recorder = expert_recorder
        self.backend = backend
        self.kv_pool = kv_pool
        self.req_to_token = req_to_token
        self.batch_sizes = sorted(batch_sizes)
        max_bs = self.batch_sizes[-1]
        # NOTE: the graphs read their inputs from these buffers; replay copies a batch in.
        # Their resting values are the padding: token 0 at position 0, request row 0 with
        # one key, K/V written to the dummy slot 0.
        self.input_ids = torch.zeros(max_bs, dtype=torch.int64, device=device)
        self.positions = torch.zeros(max_bs, dtype=torch.int64, device=device)
        self.out_cache_loc = torch.zeros(max_bs, dtype=torch.int64, device=device)
        self.req_pool_indices = torch.zeros(max_bs, dtype=torch.int64, device=device)
        self.seq_lens = torch.ones(max_bs, dtype=torch.int64, device=device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        # NOTE: per graph, each MoE layer's [bs, top_k] expert choices, which replay refills.
        self.expert_choices: dict[int, dict[int, torch.Tensor]] = {}
        # NOTE: torch's own name for a graph memory pool handle; annotations are never evaluated.
        self._pool: torch.cuda._POOL_HANDLE | None = None
        # NOTE: largest first, so smaller graphs reuse the memory pool the largest reserved.
        for bs in reversed(self.batch_sizes):
            self._capture(bs)
        logger.info("captured CUDA graphs for decode batch sizes %s", self.batch_sizes)

    def can_run(self, batch: ForwardBatch) -> bool:
        return batch.mode is ForwardMode.DECODE and batch.batch_size <= self.batch_sizes[-1]

    def replay(self, batch: ForwardBatch) -> torch.Tensor:
        """Logits ``[B, vocab]`` of a decode batch. NOTE: a view of the graph's output
        buffer, valid until the next replay."""
        bs = batch.batch_size
        padded = padded_batch_size(bs, self.batch_sizes)
        assert padded is not None, "can_run() must be checked before replay()"
        self.input_ids[:bs].copy_(batch.input_ids)
        self.positions[:bs].copy_(batch.positions)
        self.out_cache_loc[:bs].copy_(batch.out_cache_loc)
        self.req_pool_indices[:bs].copy_(batch.req_pool_indices)
        self.seq_lens[:bs].copy_(batch.seq_lens)
        if padded > bs:
            self.input_ids[bs:padded].zero_()
            self.positions[bs:padded].zero_()
            self.out_cache_loc[bs:padded].zero_()
            self.req_pool_indices[bs:padded].zero_()
            self.seq_lens[bs:padded].fill_(1)
        self.graphs[padded].replay()
        recorder = self.expert_recorder
        if recorder is not None and recorder.recording:
            recorder.record_replay(self.expert_choices[padded], bs)
        return self.outputs[padded][:bs]

    def _static_batch(self, bs: int) -> ForwardBatch:
        return ForwardBatch(
            mode=ForwardMode.DECODE,
            input_ids=self.input_ids[:bs],
            positions=self.positions[:bs],
            out_cache_loc=self.out_cache_loc[:bs],
            req_pool_indices=self.req_pool_indices[:bs],
            seq_lens=self.seq_lens[:bs],
            # NOTE: host-side lengths are baked in at capture; capture-safe backends and the
            # model's decode path never read them.
            seq_lens_cpu=[1] * bs,
            extend_prefix_lens_cpu=[0] * bs,
            extend_seq_lens_cpu=[1] * bs,
            req_to_token=self.req_to_token,
            kv_pool=self.kv_pool,
        )

    def _capture(self, bs: int) -> None:
        if self.expert_recorder is None:
            self._capture_graph(bs)
            return
        # NOTE: warm-ups and capture are never counted, even while a recording runs.
        with self.expert_recorder.capturing() as choices:
            self._capture_graph(bs)
        self.expert_choices[bs] = choices

    def _capture_graph(self, bs: int) -> None:
        batch = self._static_batch(bs)
        # NOTE: eager warm-up runs compile the Triton kernels and set up cuBLAS workspaces,
        # neither of which may happen during capture.
        for _ in range(2):
            self.model(batch, self.backend)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self.outputs[bs] = self.model(batch, self.backend)
        self._pool = graph.pool()
        self.graphs[bs] = graph
