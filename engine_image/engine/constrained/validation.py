"""Grammar checks for the HTTP process: refuse a bad schema, regex or EBNF before it is queued."""

from __future__ import annotations

from functools import lru_cache

from engine.constrained.base import GrammarKey, InvalidGrammar, grammar_backend_class

DEFAULT_GRAMMAR_BACKEND = "xgrammar"


def check_grammar(key: GrammarKey, backend: str = DEFAULT_GRAMMAR_BACKEND) -> None:
    """Raises InvalidGrammar with the compiler's message if ``key`` cannot compile."""
    message = _grammar_error(backend, key)
    if message is not None:
        raise InvalidGrammar(key[0], message)


# NOTE: clients resend the same schema with every request; parsing it once is enough.
@lru_cache(maxsize=256)
def _grammar_error(backend: str, key: GrammarKey) -> str | None:
    try:
        grammar_backend_class(backend).validate(key)
    except InvalidGrammar as err:
        return str(err)
    return None
