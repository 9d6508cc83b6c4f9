"""A GGUF model's metadata as a Hugging Face directory: config.json and the tokenizer files
(the chat template included), converted once per file and cached.

NOTE: transformers builds a tokenizer from GGUF metadata in ~5 s (SmolLM2's 49k tokens),
and three processes load one at every start (HTTP, scheduler, detokenizer); from the
converted files it takes ~0.3 s. The cache is keyed by the file's identity (path, size,
mtime) and the transformers version that converted it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from importlib.metadata import version
from pathlib import Path

from engine.core.file_cache import cache_root, staged_entry
from engine.gguf.location import gguf_file

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "ENGINE_GGUF_CACHE_DIR"


def hf_directory(model_path: str) -> str:
    """The Hugging Face directory of ``model_path``: itself, or for a GGUF its converted metadata."""
    path = gguf_file(model_path)
    if path is None:
        return model_path
    target = cache_root("gguf", CACHE_DIR_ENV) / _cache_key(path)
    if not (target / "config.json").is_file():
        _convert(path, target)
    return str(target)


def _cache_key(path: Path) -> str:
    stat = path.stat()
    # NOTE: the version from the package's metadata: importing transformers (and torch) to
    # ask it would cost seconds before the server spawns its children.
    identity = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{version('transformers')}"
    return f"{path.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def _convert(path: Path, target: Path) -> None:
    from transformers import AutoTokenizer

    from engine.gguf.header import read_header
    from engine.gguf.hparams import hf_config

    started = time.monotonic()
    config = hf_config(read_header(path))
    with staged_entry(target, "config.json") as staging:
        (staging / "config.json").write_text(json.dumps(config, indent=2))
        AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(staging)
    logger.info("converted the tokenizer and config of %s in %.1f s (cached in %s)", path.name, time.monotonic() - started, target)
