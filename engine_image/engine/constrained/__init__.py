"""Structured output: grammars (JSON schema, regex, EBNF) that constrain sampling, per request.

Backends sit behind one interface, chosen by name from a registry. The scheduler compiles
through a ``GrammarCache`` (worker threads, one compile per grammar), gives each request a
``GrammarMatcher`` and masks each step's logits with ``GrammarLogitsMask``.
"""

from engine.constrained.base import (
    CompiledGrammar,
    GrammarBackend,
    GrammarKey,
    GrammarMatcher,
    InvalidGrammar,
    available_grammar_backends,
    create_grammar_backend,
    grammar_backend_class,
    register_grammar_backend,
)
from engine.constrained.grammar_cache import GrammarCache
from engine.constrained.logits_mask import GrammarLogitsMask
from engine.constrained.validation import DEFAULT_GRAMMAR_BACKEND, check_grammar

__all__ = [
    "DEFAULT_GRAMMAR_BACKEND",
    "CompiledGrammar",
    "GrammarBackend",
    "GrammarCache",
    "GrammarKey",
    "GrammarLogitsMask",
    "GrammarMatcher",
    "InvalidGrammar",
    "available_grammar_backends",
    "check_grammar",
    "create_grammar_backend",
    "grammar_backend_class",
    "register_grammar_backend",
]
