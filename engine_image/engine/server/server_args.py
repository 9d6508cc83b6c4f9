"""Command-line flags of ``python -m engine.launch_server`` (SGLang's names) as typed args."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from engine.distributed.tp_checks import tp_problems
from engine.engine_config import KV_CACHE_DTYPES, EngineConfig
from engine.function_call.registry import TOOL_CALL_DETECTORS
from engine.reasoning.registry import REASONING_FORMATS


@dataclass(frozen=True)
class ServerArgs:
    model_path: str
    tokenizer_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    served_model_name: str | None = None
    trust_remote_code: bool = False
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    device: str = "auto"
    context_length: int | None = None
    max_total_tokens: int | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_running_requests: int = 128
    disable_radix_cache: bool = False
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    random_seed: int = 0
    api_key: str | None = None
    enable_metrics: bool = False
    enable_http2: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    is_embedding: bool = False
    preferred_sampling_params: dict[str, Any] | None = None
    log_level: str = "info"
    skip_server_warmup: bool = False
    batch_notify_size: int = 16
    tokenizer_worker_num: int = 1
    tp_size: int = 1
    enable_overlap_schedule: bool = False

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model_path

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            model_path=self.model_path,
            tokenizer_path=self.tokenizer_path,
            dtype=self.dtype,
            kv_cache_dtype=self.kv_cache_dtype,
            device=self.device,
            context_length=self.context_length,
            max_total_tokens=self.max_total_tokens,
            mem_fraction_static=self.mem_fraction_static,
            chunked_prefill_size=self.chunked_prefill_size,
            max_running_requests=self.max_running_requests,
            disable_radix_cache=self.disable_radix_cache,
            attention_backend=self.attention_backend,
            disable_cuda_graph=self.disable_cuda_graph,
            random_seed=self.random_seed,
            is_embedding=self.is_embedding,
            tp_size=self.tp_size,
            enable_overlap_schedule=self.enable_overlap_schedule,
        )

    def public_dict(self) -> dict[str, Any]:
        """The args as /server_info shows them; the API key is never echoed."""
        out = dataclasses.asdict(self)
        out["api_key"] = "***" if self.api_key else None
        return out


class _OneLineParser(argparse.ArgumentParser):
    """Fails with one readable line (not argparse's usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"engine.launch_server: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m engine.launch_server", allow_abbrev=False)
    p.add_argument("--model-path", required=True)
    p.add_argument("--tokenizer-path")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--served-model-name")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--kv-cache-dtype", default="auto", choices=list(KV_CACHE_DTYPES))
    p.add_argument("--device", default="auto")
    p.add_argument("--context-length", type=int)
    p.add_argument("--max-total-tokens", type=int)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--max-running-requests", type=int, default=128)
    p.add_argument("--disable-radix-cache", action="store_true")
    # NOTE: unset, the engine picks triton on CUDA (when installed), cpu on CPU, else torch_native.
    p.add_argument("--attention-backend")
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--random-seed", type=int, default=0)
    p.add_argument("--api-key")
    p.add_argument("--enable-metrics", action="store_true")
    # NOTE: as SGLang's: the HTTP server is Granian, HTTP/2 and HTTP/1.1 on the one port.
    p.add_argument("--enable-http2", action="store_true")
    p.add_argument("--tool-call-parser", choices=tuple(TOOL_CALL_DETECTORS))
    p.add_argument("--reasoning-parser", choices=tuple(REASONING_FORMATS))
    p.add_argument("--is-embedding", action="store_true")
    p.add_argument("--preferred-sampling-params")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--batch-notify-size", type=int, default=16)
    # NOTE: HTTP/tokenizer processes sharing the port (SGLang's multi-tokenizer mode).
    p.add_argument("--tokenizer-worker-num", type=int, default=1)
    # NOTE: tensor parallelism: the model sharded over N processes (engine/distributed).
    p.add_argument("--tp-size", type=int, default=1)
    # NOTE: SGLang's overlap scheduler: step n+1 is built while step n's forward runs (off by default).
    p.add_argument("--enable-overlap-schedule", action="store_true")
    return p


def parse_server_args(argv: list[str] | None = None) -> ServerArgs:
    parser = build_parser()
    ns = parser.parse_args(argv)
    fields = {k: v for k, v in vars(ns).items()}
    if ns.preferred_sampling_params is not None:
        try:
            fields["preferred_sampling_params"] = json.loads(ns.preferred_sampling_params)
        except json.JSONDecodeError:
            parser.error("--preferred-sampling-params must be a JSON object")
        if not isinstance(fields["preferred_sampling_params"], dict):
            parser.error("--preferred-sampling-params must be a JSON object")
    for problem in _contradictions(ns):
        parser.error(problem)
    args = ServerArgs(**fields)
    try:
        args.engine_config()
    except ValueError as err:
        parser.error(str(err))
    return args


def _contradictions(ns: argparse.Namespace) -> list[str]:
    problems = []
    model_path = Path(ns.model_path)
    if not model_path.is_dir() and not (model_path.is_file() and model_path.suffix == ".gguf"):
        problems.append(f"--model-path {ns.model_path} is neither a model directory nor a .gguf file")
    if not 0 < ns.port < 65536:
        problems.append(f"--port must be in 1..65535, got {ns.port}")
    if ns.max_total_tokens is not None and ns.mem_fraction_static is not None:
        problems.append("give --max-total-tokens or --mem-fraction-static, not both")
    if ns.batch_notify_size < 1:
        problems.append(f"--batch-notify-size must be >= 1, got {ns.batch_notify_size}")
    if ns.tokenizer_worker_num < 1:
        problems.append(f"--tokenizer-worker-num must be >= 1, got {ns.tokenizer_worker_num}")
    if ns.api_key is not None and not ns.api_key:
        problems.append("--api-key must not be empty")
    if not problems:
        problems.extend(tp_problems(ns.model_path, ns.tp_size, ns.is_embedding))
    return problems
