"""The xgrammar grammar backend: JSON schema, regex and EBNF compiled to token-level matchers."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.constrained.base import (
    CompiledGrammar,
    GrammarBackend,
    GrammarKey,
    GrammarMatcher,
    InvalidGrammar,
    register_grammar_backend,
)
from engine.text.tokenizer import TextTokenizer

if TYPE_CHECKING:
    import torch
    import xgrammar as xgr

# NOTE: xgrammar is imported by the methods that use it, on first use: it imports torch and
# transformers (seconds), which a server that never sees a grammar should not pay at start.

# NOTE: xgrammar's C++ errors start with "[hh:mm:ss] /path/file.cc:123: " and sometimes a
# failed-check preamble; the user gets only the compiler's own words.
_LOG_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: (Check failed: \(.*?\) is false: )?")


def _clean(err: Exception) -> str:
    return _LOG_PREFIX.sub("", str(err)).strip()


def _grammar(key: GrammarKey) -> xgr.Grammar:
    import xgrammar as xgr

    kind, text = key
    if kind == "json_schema":
        # NOTE: compact JSON (no free whitespace): small models otherwise tend to emit
        # newlines and spaces until max_tokens, leaving the JSON unfinished.
        return xgr.Grammar.from_json_schema(text, any_whitespace=False)
    if kind == "regex":
        return xgr.Grammar.from_regex(text)
    if kind == "ebnf":
        return xgr.Grammar.from_ebnf(text)
    raise InvalidGrammar(kind, f"unknown grammar kind {kind!r}")


class XGrammarMatcher(GrammarMatcher):
    def __init__(self, matcher: xgr.GrammarMatcher) -> None:
        self._matcher = matcher

    def accept_token(self, token_id: int) -> bool:
        return bool(self._matcher.accept_token(token_id))

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        self._matcher.fill_next_token_bitmask(bitmask, row)

    def is_terminated(self) -> bool:
        return bool(self._matcher.is_terminated())


@register_grammar_backend("xgrammar")
class XGrammarBackend(GrammarBackend):
    def __init__(
        self, tokenizer: TextTokenizer, vocab_size: int, stop_token_ids: Sequence[int]
    ) -> None:
        super().__init__(tokenizer, vocab_size, stop_token_ids)
        self._compiler: xgr.GrammarCompiler | None = None
        self._lock = threading.Lock()

    @classmethod
    def validate(cls, key: GrammarKey) -> None:
        try:
            _grammar(key)
        except RuntimeError as err:
            raise InvalidGrammar(key[0], f"invalid {key[0]}: {_clean(err)}") from None

    def compile(self, key: GrammarKey) -> CompiledGrammar:
        try:
            return self._grammar_compiler().compile_grammar(_grammar(key))
        except RuntimeError as err:
            raise InvalidGrammar(key[0], f"invalid {key[0]}: {_clean(err)}") from None

    def matcher(self, compiled: CompiledGrammar) -> GrammarMatcher:
        import xgrammar as xgr

        return XGrammarMatcher(xgr.GrammarMatcher(compiled))

    def allocate_bitmask(self, batch_size: int) -> torch.Tensor:
        import xgrammar as xgr

        return xgr.allocate_token_bitmask(batch_size, self.vocab_size)

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
        import xgrammar as xgr

        xgr.apply_token_bitmask_inplace(
            logits,
            bitmask.to(logits.device, non_blocking=True),
            vocab_size=self.vocab_size,
            indices=rows,
        )

    def _grammar_compiler(self) -> xgr.GrammarCompiler:
        # NOTE: built on first use (~0.2 s over the whole vocabulary), in a compile thread,
        # so servers that never see a grammar do not pay for it at start.
        import xgrammar as xgr

        with self._lock:
            if self._compiler is None:
                from transformers import PreTrainedTokenizerFast

                # NOTE: xgrammar reads a vocabulary's type from a transformers tokenizer; this one
                # wraps (a copy of) the engine's own tokenizers backend, no files read again.
                # transformers leaves this constructor untyped.
                hf_tokenizer = PreTrainedTokenizerFast(tokenizer_object=self.tokenizer.backend)  # type: ignore[no-untyped-call]
                info = xgr.TokenizerInfo.from_huggingface(
                    hf_tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_token_ids
                )
                # NOTE: xgrammar's own cache is off: GrammarCache is the one, keyed by (kind, text).
                self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
            return self._compiler
