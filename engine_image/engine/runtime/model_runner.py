"""Owns the model, its KV memory and the attention backend; runs one forward at a time."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from engine.attention import create_attention_backend, default_attention_backend
from engine.config.model_config import ModelConfig
from engine.core.errors import UnsupportedModelError
from engine.core.forward_batch import ForwardBatch
from engine.distributed.parallel_layers import parallelize
from engine.distributed.parallel_state import min_over_ranks, tensor_parallel
from engine.distributed.shard_plan import ShardPlan
from engine.distributed.step_channel import TableWrite, broadcast_step, describe
from engine.engine_config import EngineConfig
from engine.gguf.hparams import gguf_model_config
from engine.gguf.location import gguf_file
from engine.gguf.weights import GGUFWeights
from engine.layers.packed_linear import can_pack
from engine.layers.rotary import RotaryEmbedding
from engine.memory import KVPool, ReqToTokenPool, TokenAllocator
from engine.memory.kv_pool import FP8_KV_DTYPE
from engine.models.expert_distribution import ExpertDistributionRecorder
from engine.models.gguf_loader import load_gguf_weights
from engine.models.moe import attach_expert_recorder
from engine.models.quantized_loader import load_quantized_weights
from engine.models.registry import model_class
from engine.models.weight_loader import iterate_weights
from engine.runtime.cuda_graph_runner import CudaGraphRunner, capture_batch_sizes
from engine.runtime.host_malloc import keep_freed_memory, return_freed_memory
from engine.runtime.input_buffers import InputBuffers
from engine.runtime.kv_pool_size import kv_pool_tokens
from engine.runtime.meta_model import allocate_on
from engine.runtime.weights_info import (
    WeightsInfo,
    checkpoint_kernel_paths,
    packed_kernel_paths,
    quantized_kernel_paths,
)

if TYPE_CHECKING:
    from engine.models.llama import LlamaFamilyForCausalLM

logger = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return device


def resolve_dtype(name: str, model: ModelConfig, device: torch.device) -> torch.dtype:
    if name != "auto":
        return _DTYPES[name]
    if device.type == "cpu":
        # NOTE: without native bf16 (AVX-512 BF16 / AMX) fp32 is faster for prefill and
        # batches on CPU, and it is the dtype the reference outputs are checked in.
        return torch.float32
    return torch.float16 if model.config_dtype == torch.float16 else torch.bfloat16


def load_model_config(model_path: str) -> ModelConfig:
    """The model at ``model_path``: a Hugging Face directory, or a GGUF file (or a directory of one)."""
    gguf = gguf_file(model_path)
    return ModelConfig.from_dir(model_path) if gguf is None else gguf_model_config(gguf)


class ModelRunner:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.model_config = load_model_config(config.model_path)
        self.tp = tensor_parallel()
        if (self.tp.size if self.tp is not None else 1) != config.tp_size:
            raise UnsupportedModelError("--tp-size > 1 runs in the server only (python -m engine.launch_server)")
        self.device = resolve_device(config.device)
        if self.tp is not None and self.device.type == "cuda":
            self.device = torch.device("cuda", self.tp.rank)
        # NOTE: with tensor parallelism this rank's heads, MLP columns and vocab rows; the
        # scheduler sees the whole model's config (model_config) all the same.
        self.shard_plan = (
            None if self.tp is None else ShardPlan.for_rank(self.model_config, self.tp.rank, self.tp.size)
        )
        self.local_config = self.model_config if self.shard_plan is None else self.shard_plan.local_config(self.model_config)
        keep_freed_memory(self.device)
        self.dtype = resolve_dtype(config.dtype, self.model_config, self.device)
        # NOTE: on CPU, bfloat16 is the linear layers' weights (the bf16 kernels: AVX512-BF16
        # dot products where the CPU has them, else widened in registers); activations, norms
        # and the KV pool stay float32, the dtype of the CPU's other kernels.
        self.linear_weight_dtype = self.dtype
        if self.device.type == "cpu" and self.dtype == torch.bfloat16:
            self.dtype = torch.float32
        self.context_length = self._context_length()
        # NOTE: before the weights load, so a KV dtype the engine cannot run is refused at once.
        kv_dtype = self._kv_dtype(config.kv_cache_dtype)
        # NOTE: owned here, not by the model, so a recording survives a weight reload.
        self.expert_recorder = self._expert_recorder()
        # NOTE: the FP8 KV pool's (k, v) scale per layer: an FP8 checkpoint's where it has
        # them (set by its loader), else 1.0.
        self.kv_scales: list[tuple[float, float]] | None = None
        self.model, self.weights = self._build_model(self.model_config.model_path)
        mc = self.local_config
        per_token = KVPool.bytes_per_token(mc.num_layers, mc.num_kv_heads, mc.head_dim, kv_dtype)
        self.max_total_tokens = kv_pool_tokens(config, self.device, per_token, self.context_length)
        if self.tp is not None:
            # NOTE: the scheduler's one allocator hands out the same slots on every rank.
            self.max_total_tokens = min_over_ranks(self.max_total_tokens)
        scales = self.kv_scales if kv_dtype == FP8_KV_DTYPE else None
        self.kv_pool = KVPool(mc.num_layers, mc.num_kv_heads, mc.head_dim, self.max_total_tokens, kv_dtype, self.device, scales)
        self.allocator = TokenAllocator(self.max_total_tokens, device=self.device)
        # NOTE: +1 position so a request at the context limit can still write its last token.
        self.req_to_token_pool = ReqToTokenPool(config.max_running_requests, self.context_length + 1, self.device)
        if self.tp is not None and self.tp.is_driver:
            self.req_to_token_pool.keep_journal()
        # NOTE: as wide as a prefill chunk or a full decode batch; wider steps grow it.
        self.input_buffers = InputBuffers(
            max(config.max_running_requests, config.prefill_chunk(self.device.type) or 0), self.device
        )
        backend = config.attention_backend or default_attention_backend(self.device)
        self.attention = create_attention_backend(backend, mc.num_heads, mc.num_kv_heads, mc.head_dim)
        self.cuda_graph = self._capture_cuda_graphs()
        return_freed_memory(self.device)
        logger.info(
            "loaded %s (%s, %s) on %s in %s; KV pool %d tokens in %s (%.2f GiB), context %d",
            mc.model_path, mc.architecture, self.weights, self.device, str(self.dtype).removeprefix("torch."),
            self.max_total_tokens, str(kv_dtype).removeprefix("torch."), self.kv_pool.nbytes / (1 << 30), self.context_length,
        )

    def forward(self, batch: ForwardBatch, table_writes: list[TableWrite] | None = None) -> torch.Tensor:
        """The logits [B, vocab]; a tensor-parallel worker gets its vocab part, unused.

        ``table_writes``: the request-table writes this step brings to the workers, taken with
        ``take_table_writes`` where the batch was built (the overlap scheduler's forward thread
        runs it while the next batch is built); by default the writes made since the last step.
        """
        if self.tp is not None and self.tp.is_driver:
            writes = self.take_table_writes() if table_writes is None else table_writes
            broadcast_step(describe(batch, writes), self.tp)
        if self.cuda_graph is not None and self.cuda_graph.can_run(batch):
            return self.cuda_graph.replay(batch)
        logits: torch.Tensor = self.model(batch, self.attention)
        return logits

    def take_table_writes(self) -> list[TableWrite]:
        """The request-table writes since the last step, which the tensor-parallel workers
        replay (none without tensor parallelism)."""
        if self.tp is None or not self.tp.is_driver:
            return []
        return [TableWrite(*write) for write in self.req_to_token_pool.take_journal()]

    def reload_weights(self, model_path: str) -> None:
        """Loads another checkpoint of the same architecture and shapes into the live model."""
        if self.tp is not None:
            raise UnsupportedModelError("reloading weights is not supported with --tp-size > 1")
        other = load_model_config(model_path)
        mc = self.model_config
        if (other.architecture, other.hidden_size, other.num_layers, other.vocab_size) != (
            mc.architecture, mc.hidden_size, mc.num_layers, mc.vocab_size
        ):
            raise UnsupportedModelError(f"{model_path} has a different architecture or shape than the served model")
        # NOTE: the new weights load into a separate model; the live one is replaced only
        # once every tensor loaded, so a bad checkpoint leaves the old weights serving.
        self.model, self.weights = self._build_model(model_path)
        return_freed_memory(self.device)
        # NOTE: graphs replay the old parameters' addresses, so the new model is captured
        # anew; the old graphs go first so their memory pool is free for the capture.
        self.cuda_graph = None
        self.cuda_graph = self._capture_cuda_graphs()

    def _capture_cuda_graphs(self) -> CudaGraphRunner | None:
        """Decode graphs on CUDA unless disabled; None (eager) everywhere else."""
        if self.device.type != "cuda" or self.config.disable_cuda_graph:
            return None
        if not self.attention.cuda_graph_safe:
            logger.info("CUDA graphs off: the %s attention backend cannot be captured", type(self.attention).__name__)
            return None
        return CudaGraphRunner(
            self.model, self.attention, self.kv_pool, self.req_to_token_pool.req_to_token,
            capture_batch_sizes(self.config.max_running_requests), self.device, self.expert_recorder,
        )

    def _kv_dtype(self, kv_cache_dtype: str) -> torch.dtype:
        """The KV pool's dtype for ``--kv-cache-dtype``: FP8, bfloat16, or the model's."""
        if kv_cache_dtype == "fp8_e4m3":
            return FP8_KV_DTYPE
        if kv_cache_dtype in ("bf16", "bfloat16") and self.dtype != torch.bfloat16:
            # NOTE: the GPU kernels read a pool of the model's dtype or FP8; the CPU ones a
            # float32 or bfloat16 pool with float32 queries.
            if self.device.type != "cpu" or self.dtype != torch.float32:
                raise ValueError(
                    "kv_cache_dtype bf16 is for CPU engines computing in float32 (--dtype auto, float32 or "
                    "bfloat16); elsewhere the KV pool takes the model's dtype or fp8_e4m3"
                )
            return torch.bfloat16
        return self.dtype

    def _context_length(self) -> int:
        mc = self.model_config
        limit = mc.max_position_embeddings
        wanted = self.config.context_length
        if wanted is None:
            return limit
        if wanted > limit:
            raise ValueError(f"context_length {wanted} exceeds what the model supports ({limit})")
        return wanted

    def _build_model(self, weights_path: str) -> tuple[LlamaFamilyForCausalLM, WeightsInfo]:
        mc = self.local_config
        rotary = RotaryEmbedding(mc.rope, mc.head_dim, self.context_length + 1, self.device)
        with torch.device("meta"):
            model = model_class(mc.architecture)(mc, rotary)
            if self.shard_plan is not None and self.tp is not None:
                parallelize(model, self.shard_plan, self.tp)
        model = model.to(self.dtype)
        allocate_on(model, self.device)
        gguf = gguf_file(weights_path)
        info = WeightsInfo("safetensors", (), "")
        if gguf is not None:
            weights = GGUFWeights(gguf, mc)
            # NOTE: the quantized layers bring their own kernels: no packing.
            load_gguf_weights(model, weights, self.device, self.dtype)
            info = WeightsInfo("gguf", weights.quant_types, quantized_kernel_paths(model))
        elif mc.quantization is not None:
            # NOTE: the int4/FP8 projections bring their own kernels; the float head still packs.
            self.kv_scales = load_quantized_weights(model, iterate_weights(weights_path), mc.quantization, self.device, self.dtype)
            if can_pack(self.device, self.dtype):
                model.pack_for_cpu(self.linear_weight_dtype)
            info = WeightsInfo(mc.quantization.method, (mc.quantization.describe(),), checkpoint_kernel_paths(model))
        elif self.shard_plan is not None:
            # NOTE: the packed CPU kernels stay whole-model only: the shards run plain torch.
            model.load_weights(self.shard_plan.shard_weights(iterate_weights(weights_path)))
        else:
            model.load_weights(iterate_weights(weights_path))
            if can_pack(self.device, self.dtype):
                model.pack_for_cpu(self.linear_weight_dtype)
                info = WeightsInfo("safetensors", (), packed_kernel_paths(model))
        if self.expert_recorder is not None:
            attach_expert_recorder(model, self.expert_recorder)
        return model.eval(), info

    def _expert_recorder(self) -> ExpertDistributionRecorder | None:
        moe = self.model_config.moe
        if moe is None:
            return None
        layer_ids = [i for i in range(self.model_config.num_layers) if moe.is_moe_layer(i)]
        return ExpertDistributionRecorder(layer_ids, moe.num_experts, self.device)
