"""The xgrammar backend, its compile cache and the logits mask, on SmolLM2's real tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.constrained import (
    GrammarCache,
    GrammarLogitsMask,
    InvalidGrammar,
    check_grammar,
    create_grammar_backend,
)
from engine.engine import Engine
from engine.text.tokenizer import TextTokenizer
from engine.text.tokenizer_files import load_tokenizer

EOS = 2
DIGITS = ("regex", r"[0-9]{2}")


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir: Path) -> TextTokenizer:
    return load_tokenizer(str(smollm2_dir))


def test_padded_logits_columns_are_never_allowed(tokenizer: TextTokenizer) -> None:
    """Logits wider than the tokenizer (padded embeddings): the padding stays masked."""
    width = len(tokenizer) + 64
    backend = create_grammar_backend("xgrammar", tokenizer, width, [EOS])
    matcher = backend.matcher(backend.compile(DIGITS))
    logits = torch.zeros(3, width)
    GrammarLogitsMask(backend, 1).apply(logits, [None, matcher, None])
    allowed = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    assert allowed and all(tokenizer.decode([t]).isdigit() for t in allowed)
    assert not torch.isfinite(logits[1, len(tokenizer) :]).any()
    assert torch.equal(logits[0], torch.zeros(width)) and torch.equal(logits[2], torch.zeros(width))


def test_matcher_allows_eos_only_when_the_grammar_is_complete(
    tokenizer: TextTokenizer,
) -> None:
    backend = create_grammar_backend("xgrammar", tokenizer, len(tokenizer), [EOS])
    matcher = backend.matcher(backend.compile(DIGITS))
    mask = GrammarLogitsMask(backend, 1)
    for digit in "42":
        logits = torch.zeros(1, len(tokenizer))
        mask.apply(logits, [matcher])
        assert logits[0, EOS] == float("-inf")
        assert matcher.accept_token(tokenizer.backend.token_to_id(digit))
    logits = torch.zeros(1, len(tokenizer))
    mask.apply(logits, [matcher])
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [EOS]
    assert not matcher.accept_token(tokenizer.backend.token_to_id("7"))
    assert not matcher.is_terminated()
    assert matcher.accept_token(EOS) and matcher.is_terminated()


def test_cache_compiles_each_grammar_once_and_evicts_the_least_recent(
    tokenizer: TextTokenizer,
) -> None:
    cache = GrammarCache(create_grammar_backend("xgrammar", tokenizer, len(tokenizer), [EOS]), 2)
    first = cache.get(DIGITS)
    assert cache.get(DIGITS) is first
    first.result(timeout=60)
    cache.get(("regex", "a"))
    cache.get(DIGITS)  # most recent again
    cache.get(("ebnf", 'root ::= "b"'))
    assert len(cache) == 2
    assert cache.get(DIGITS) is first
    bad = cache.get(("json_schema", '{"type": "objec"}'))
    with pytest.raises(InvalidGrammar, match='Unsupported type "objec"'):
        bad.result(timeout=60)
    cache.shutdown()


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("json_schema", '{"type": "objec"}', 'invalid json_schema: Unsupported type "objec"'),
        ("json_schema", "{not json", "invalid json_schema: Failed to parse JSON"),
        (
            "json_schema",
            json.dumps({"type": "integer", "minimum": 5, "maximum": 1}),
            "minimum greater than maximum",
        ),
        ("regex", "a(b", "invalid regex: Regex parsing error at position 4"),
        (
            "ebnf",
            "root ::= foo",
            'invalid ebnf: EBNF parser error at line 1, column 10: Rule "foo"',
        ),
    ],
)
def test_invalid_grammars_get_the_compilers_message(kind: str, text: str, message: str) -> None:
    with pytest.raises(InvalidGrammar) as err:
        check_grammar((kind, text))
    assert message in str(err.value)
    assert err.value.field == kind
    assert not str(err.value).split(": ", 1)[1].startswith("[")  # no C++ log prefix


@pytest.mark.slow
def test_scheduler_refuses_a_grammar_that_fails_to_compile_and_serves_the_rest(
    smollm2_dir: Path,
) -> None:
    """The scheduler's own path (the HTTP process checks first): the compile fails in the
    grammar queue, that request ends with the compiler's message, its batch-mates finish."""
    engine = Engine(str(smollm2_dir), max_total_tokens=1024, max_running_requests=4)
    bad, good = engine.generate(
        ["Hello", "Pick a number"],
        [
            {"json_schema": '{"type": "objec"}', "max_new_tokens": 4},
            {"regex": "[0-9]{2}", "max_new_tokens": 8, "temperature": 0},
        ],
    )
    assert bad["meta_info"]["finish_reason"]["type"] == "abort"
    assert 'Unsupported type "objec"' in bad["meta_info"]["finish_reason"]["message"]
    assert bad["output_ids"] == []
    assert len(good["text"]) == 2 and good["text"].isdigit()
    assert good["meta_info"]["finish_reason"] == {"type": "stop", "matched": EOS}
    assert engine.scheduler.is_idle
