"""The quantized section's systems: our engine and llama.cpp's server on the same GGUF files
(Q4_K_M and Q8_0 made by llama-quantize, the bundled Q4_1 as it is), our fp32 path beside them,
and, on CPUs with bf16 instructions, our engine and vLLM CPU in bf16.

Both engines compute on both cores: ours on every CPU it may use, llama.cpp with
`--threads 2 --threads-batch 2`. llama-server gets 32 slots (`--parallel 32`, continuous
batching) over one unified KV cache of the tokens ours may hold (`--max-total-tokens`).
Both keep that cache in 16 bits: llama.cpp's default F16, ours `--kv-cache-dtype bf16` on the
GGUF files (its fp32 path keeps its float32 pool).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.serving.cpu_features import has_bf16
from bench.serving.gguf_model import quantized_gguf
from bench.serving.llama_cpp_build import LLAMA_CPP_PYTHON_VERSION, llama_cpp_tools
from bench.serving.process import Server
from bench.serving.systems import (
    MAX_TOKENS_IN_FLIGHT,
    MODEL_NAME,
    REPO,
    VLLM_SPEC,
    Launch,
    System,
    ours_launch,
    vllm,
)

GGUF_TYPES = ("Q4_K_M", "Q8_0", "Q4_1")
OURS_FP32 = "ours fp32"
OURS_BF16 = "ours bf16"
VLLM_BF16 = "vLLM CPU bf16"
SLOTS = 32
THREADS = "2"
# NOTE: the lines of llama-server's start-up log that say which kernels it runs: the CPU
# features its build uses (system_info), the file's type, and the weight buffers (a CPU_REPACK
# buffer means weights repacked for its interleaved GEMM kernels).
LLAMA_LOG_FACTS = ("system_info:", "file type", "model buffer size")
# NOTE: those lines are logged at debug level (4) only. At that level llama.cpp logs a few lines
# per request arrival and none per token, from its own log thread: no cost that shows here.
LOG_VERBOSITY = "4"
# NOTE: what the engine's /server_info says about its weights and the kernels multiplying them.
OURS_FACTS = ("dtype", "kv_pool_dtype", "weights_format", "weights_quant_types", "weights_kernel")


def ours_gguf(qtype: str) -> Callable[[Path, int], Launch]:
    return lambda _model_dir, port: ours_launch(quantized_gguf(REPO, qtype), port, "--kv-cache-dtype", "bf16")


def llama_server(qtype: str) -> Callable[[Path, int], Launch]:
    def prepare(_model_dir: Path, port: int) -> Launch:
        server = llama_cpp_tools().server
        return Launch([
            str(server), "-m", str(quantized_gguf(REPO, qtype)), "--alias", MODEL_NAME,
            "--host", "127.0.0.1", "--port", str(port),
            "--threads", THREADS, "--threads-batch", THREADS,
            "--parallel", str(SLOTS), "--cont-batching", "--kv-unified",
            "-c", str(MAX_TOKENS_IN_FLIGHT), "--log-verbosity", LOG_VERBOSITY,
        ])  # fmt: skip

    return prepare


def ours_facts(server: Server) -> dict[str, Any]:
    """The /server_info fields that name the engine's kernel path, quantization and dtype."""
    info = httpx.get(f"{server.url}/server_info", timeout=30.0).json()
    return {key: info[key] for key in OURS_FACTS if key in info}


def llama_facts(server: Server) -> dict[str, Any]:
    """The start-up log's lines that name its kernels, without the time and source prefix."""
    lines = server.log_path.read_text(errors="replace").splitlines()
    found = [line for line in lines if any(fact in line for fact in LLAMA_LOG_FACTS)]
    return {"log": [" ".join(line.split(": ", 1)[-1].split()) for line in found]}


def _systems() -> list[System]:
    systems: list[System] = []
    for qtype in GGUF_TYPES:
        systems.append(System(
            f"ours GGUF {qtype}", f"GGUF {qtype}", "--model-path file.gguf --kv-cache-dtype bf16", ours_gguf(qtype),
            describe=ours_facts,
        ))  # fmt: skip
        systems.append(System(
            f"llama.cpp server {qtype}", f"GGUF {qtype}",
            f"llama-server of llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}'s llama.cpp, "
            f"{SLOTS} slots, continuous batching, {THREADS} threads",
            llama_server(qtype), describe=llama_facts,
        ))  # fmt: skip
    systems.append(System(
        OURS_FP32, "fp32", "the converted safetensors, --dtype float32",
        lambda model_dir, port: ours_launch(model_dir, port, "--dtype", "float32"),
        describe=ours_facts,
    ))  # fmt: skip
    if has_bf16():
        systems.append(System(
            OURS_BF16, "bf16", "the converted safetensors, --dtype bfloat16",
            lambda model_dir, port: ours_launch(model_dir, port, "--dtype", "bfloat16"),
            describe=ours_facts,
        ))  # fmt: skip
        systems.append(
            System(VLLM_BF16, "bf16", f"{VLLM_SPEC}, prefix caching on", vllm("bfloat16"))
        )
    return systems


QUANTIZED_SYSTEMS: dict[str, System] = {system.name: system for system in _systems()}
