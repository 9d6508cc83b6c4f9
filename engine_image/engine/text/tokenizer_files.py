"""Loads a model directory's tokenizer as a ``TextTokenizer``: from its tokenizer.json where that
file alone is the tokenizer, else from the generic form transformers' build of it was saved in.

NOTE: transformers takes ~0.8 s to import and ~1.3 s to build SmolLM2's tokenizer, in each of
the server's three processes at every start; ``tokenizers`` reads tokenizer.json in ~0.1 s.
The file alone is what transformers serves only for its generic class (``TokenizersBackend``,
``PreTrainedTokenizerFast``) and only where its ``__init__`` would not change it: a class of
its own (``LlamaTokenizer``, ``Qwen2Tokenizer``, ...) rebuilds the tokenizer from the vocabulary
with its own rules, an explicit ``add_bos_token``/``add_eos_token`` rewrites the
post-processor, a missing special token is added, and vocabularies over 100k tokens may get
Mistral's pre-tokenizer patch. Those tokenizers, and those without tokenizer.json, are built
by transformers once and read from ``engine.text.tokenizer_cache`` after that.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from engine.text.tokenizer import TextTokenizer
from engine.text.tokenizer_cache import converted_tokenizer_dir

logger = logging.getLogger(__name__)

_GENERIC_CLASSES = frozenset({None, "PreTrainedTokenizerFast", "TokenizersBackend"})
_SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_MISTRAL_PATCH_MIN_VOCAB = 100_000


def load_tokenizer(path: str) -> TextTokenizer:
    """The tokenizer of the model directory ``path``."""
    started = time.monotonic()
    directory = Path(path)
    config = _tokenizer_config(directory)
    backend = _backend_as_is(directory, config)
    if backend is None:
        directory = converted_tokenizer_dir(path)
        config = _tokenizer_config(directory)
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer = _tokenizer(backend, directory, config)
    logger.debug("loaded the tokenizer of %s from %s in %.2f s", path, directory, time.monotonic() - started)
    return tokenizer


def _tokenizer_config(directory: Path) -> dict[str, Any]:
    config_file = directory / "tokenizer_config.json"
    return dict(json.loads(config_file.read_text())) if config_file.is_file() else {}


def _token_text(value: object) -> str | None:
    """A special token of tokenizer_config.json: plain text or an AddedToken's dict."""
    if isinstance(value, dict):
        content = value.get("content")
        return content if isinstance(content, str) else None
    return value if isinstance(value, str) else None


def _special_tokens(config: dict[str, Any]) -> dict[str, str]:
    return {name: text for name in _SPECIAL_TOKEN_NAMES if (text := _token_text(config.get(name))) is not None}


def _extra_special_tokens(config: dict[str, Any]) -> list[str]:
    extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
    values = extra.values() if isinstance(extra, dict) else extra
    return [text for text in map(_token_text, values) if text is not None]


def _chat_templates(directory: Path, config: dict[str, Any]) -> dict[str, str]:
    """Named templates as transformers reads them: the config's, then chat_template.jinja and
    additional_chat_templates/*.jinja over them."""
    templates: dict[str, str] = {}
    configured = config.get("chat_template")
    if isinstance(configured, str):
        templates["default"] = configured
    elif isinstance(configured, list):
        templates.update({entry["name"]: entry["template"] for entry in configured})
    default_file = directory / "chat_template.jinja"
    if default_file.is_file():
        templates["default"] = default_file.read_text(encoding="utf-8")
    extra_dir = directory / "additional_chat_templates"
    if extra_dir.is_dir():
        templates.update({f.stem: f.read_text(encoding="utf-8") for f in sorted(extra_dir.glob("*.jinja"))})
    return templates


def _backend_as_is(directory: Path, config: dict[str, Any]) -> Tokenizer | None:
    """tokenizer.json's tokenizer; None where transformers would serve something else."""
    tokenizer_file = directory / "tokenizer.json"
    if not tokenizer_file.is_file() or config.get("tokenizer_class") not in _GENERIC_CLASSES:
        return None
    if "add_bos_token" in config or "add_eos_token" in config or config.get("split_special_tokens"):
        return None
    backend = Tokenizer.from_file(str(tokenizer_file))
    if backend.post_processor is None or backend.get_vocab_size(with_added_tokens=False) > _MISTRAL_PATCH_MIN_VOCAB:
        return None
    added = {token.content for token in backend.get_added_tokens_decoder().values()}
    if not {*_special_tokens(config).values(), *_extra_special_tokens(config)} <= added:
        return None
    return backend


def _tokenizer(backend: Tokenizer, directory: Path, config: dict[str, Any]) -> TextTokenizer:
    # NOTE: transformers ignores clean_up_tokenization_spaces for BPE vocabularies.
    clean_up = bool(config.get("clean_up_tokenization_spaces", False)) and type(backend.model).__name__ != "BPE"
    return TextTokenizer(backend, _special_tokens(config), _chat_templates(directory, config), clean_up)
