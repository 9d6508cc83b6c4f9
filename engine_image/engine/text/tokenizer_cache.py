"""A tokenizer transformers had to build, saved once as a directory ``tokenizers`` reads as it is.

NOTE: most models name a tokenizer class of their own (``Qwen2Tokenizer``,
``LlamaTokenizerFast``, ...), which transformers rebuilds from the vocabulary with its own
rules: ~2-3 s (transformers and torch imported, the tokenizer built) in each of the server's
three processes. What it builds is a ``tokenizers`` backend, the special tokens and the chat
templates; saved as tokenizer.json and a tokenizer_config.json of transformers' generic
class, the next start reads them in ~0.1 s, and transformers itself would read them back
unchanged. Keyed by the model directory's path, its tokenizer files' sizes and mtimes and the
transformers version, in ``$ENGINE_TOKENIZER_CACHE_DIR`` (default
``~/.cache/gomgr-engine/tokenizers``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from importlib.metadata import version
from pathlib import Path

from tokenizers import Tokenizer

from engine.core.errors import UnsupportedModelError
from engine.core.file_cache import cache_root, staged_entry

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "ENGINE_TOKENIZER_CACHE_DIR"
# NOTE: every file transformers may read to build a tokenizer (weights and configs aside).
_TOKENIZER_FILES = (
    "tokenizer*", "*.model", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json",
    "chat_template*", "additional_chat_templates/*", "tekken.json",
)  # fmt: skip


def _cache_key(directory: Path) -> str:
    files = sorted({f for pattern in _TOKENIZER_FILES for f in directory.glob(pattern) if f.is_file()})
    identity = "\0".join(
        [str(directory.resolve()), version("transformers")]
        + [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    )
    return f"{directory.name}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def converted_tokenizer_dir(path: str) -> Path:
    """The saved generic form of ``path``'s tokenizer, converted through transformers if missing."""
    target = cache_root("tokenizers", CACHE_DIR_ENV) / _cache_key(Path(path))
    if not (target / "tokenizer_config.json").is_file():
        _convert(path, target)
    return target


def _convert(path: str, target: Path) -> None:
    from transformers import AutoTokenizer

    started = time.monotonic()
    hf = AutoTokenizer.from_pretrained(path)
    if not isinstance(getattr(hf, "backend_tokenizer", None), Tokenizer):
        raise UnsupportedModelError(f"{path}: the tokenizer has no tokenizers (fast) form; the engine serves only those")
    templates = hf.chat_template
    config = {
        "tokenizer_class": "TokenizersBackend",
        **hf.special_tokens_map,
        "clean_up_tokenization_spaces": bool(hf.clean_up_tokenization_spaces),
        "chat_template": (
            [{"name": name, "template": text} for name, text in templates.items()]
            if isinstance(templates, dict)
            else templates
        ),
    }
    with staged_entry(target, "tokenizer_config.json") as staging:
        hf.backend_tokenizer.save(str(staging / "tokenizer.json"))
        (staging / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    logger.info("converted the tokenizer of %s in %.1f s (cached in %s)", path, time.monotonic() - started, target)
