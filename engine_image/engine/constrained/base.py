"""The grammar backend interface (compile a grammar, match tokens, mask logits) and its registry."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.sampling.errors import InvalidSamplingParams
from engine.text.tokenizer import TextTokenizer

if TYPE_CHECKING:
    import torch

# (kind, text): kind is a sampling parameter name of `engine.sampling.params.GRAMMAR_KINDS`.
GrammarKey = tuple[str, str]

# NOTE: a backend's compiled grammar is opaque to everyone but that backend.
CompiledGrammar = Any


class InvalidGrammar(InvalidSamplingParams):
    """A schema, regex or EBNF grammar its compiler refused; the message is the compiler's."""


class GrammarMatcher(ABC):
    """One request's position in its grammar: which tokens may come next, and when it is done."""

    @abstractmethod
    def accept_token(self, token_id: int) -> bool:
        """Advances past ``token_id``; False (state unchanged) if the grammar forbids it."""

    @abstractmethod
    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Writes the allowed next tokens into ``bitmask[row]`` (see ``allocate_bitmask``)."""

    @abstractmethod
    def is_terminated(self) -> bool:
        """True once the grammar accepted a stop token: the output is complete."""


class GrammarBackend(ABC):
    """Compiles grammars for one tokenizer and masks a batch's logits with per-request matchers.

    ``vocab_size`` is the width of the model's logits; it may exceed the tokenizer's
    vocabulary (padded embeddings): tokens the tokenizer lacks are never allowed.
    ``compile`` is thread-safe and may be slow; everything else runs on the step's thread.
    """

    def __init__(
        self, tokenizer: TextTokenizer, vocab_size: int, stop_token_ids: Sequence[int]
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = sorted(stop_token_ids)

    @classmethod
    @abstractmethod
    def validate(cls, key: GrammarKey) -> None:
        """Raises InvalidGrammar if ``key`` cannot compile; needs no tokenizer (HTTP process)."""

    @abstractmethod
    def compile(self, key: GrammarKey) -> CompiledGrammar:
        """The compiled grammar for ``key``; raises InvalidGrammar."""

    @abstractmethod
    def matcher(self, compiled: CompiledGrammar) -> GrammarMatcher:
        """A fresh matcher at the start of ``compiled``."""

    @abstractmethod
    def allocate_bitmask(self, batch_size: int) -> torch.Tensor:
        """A CPU bitmask with one row per request of a batch."""

    @abstractmethod
    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
        """Sets ``logits[r]`` to -inf for every token ``bitmask[r]`` forbids, for r in ``rows``."""


_REGISTRY: dict[str, type[GrammarBackend]] = {}
# NOTE: the built-in backends are imported on first use, not with this package: xgrammar
# imports torch and transformers (seconds), which the HTTP process needs only for its first
# structured-output request and the scheduler only for its first grammar compile.
_BUILT_IN_MODULES = {"xgrammar": "engine.constrained.xgrammar_backend"}


def register_grammar_backend(name: str) -> Callable[[type[GrammarBackend]], type[GrammarBackend]]:
    def decorate(cls: type[GrammarBackend]) -> type[GrammarBackend]:
        _REGISTRY[name] = cls
        return cls

    return decorate


def available_grammar_backends() -> list[str]:
    return sorted({*_REGISTRY, *_BUILT_IN_MODULES})


def grammar_backend_class(name: str) -> type[GrammarBackend]:
    if name not in _REGISTRY and name in _BUILT_IN_MODULES:
        importlib.import_module(_BUILT_IN_MODULES[name])
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown grammar backend {name!r}; available: {', '.join(available_grammar_backends())}"
        )
    return _REGISTRY[name]


def create_grammar_backend(
    name: str, tokenizer: TextTokenizer, vocab_size: int, stop_token_ids: Sequence[int]
) -> GrammarBackend:
    return grammar_backend_class(name)(tokenizer, vocab_size, stop_token_ids)
