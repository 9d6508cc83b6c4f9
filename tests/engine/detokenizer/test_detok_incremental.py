"""IncrementalDetokenizer: chunked decoding equals one full decode, stop strings held back."""

from __future__ import annotations

import random

import pytest

from engine.detokenizer.incremental import IncrementalDetokenizer
from engine.text.stop_strings import trim_at_stop
from engine.text.tokenizer import TextTokenizer

IM_END = 2

TEXTS = [
    "Hello, world! How are you today?",
    "Café, naïve façade, jalapeño, Ærøskøbing — “quotes” … ",
    "Emoji: 😀🎉👩‍👩‍👧‍👦 🇫🇷 and more 🤖!",
    "中文测试：你好，世界。日本語のテキスト、한국어 텍스트.",
    "def f(x):\n    if x:\n        return [i ** 2 for i in range(x)]\n\n\n\treturn None  \n",
    "   leading spaces\t\ttabs\r\nand  double  spaces   ",
]


def _chunked(ids: list[int], rng: random.Random) -> list[list[int]]:
    """``ids`` split into random-length chunks (some empty), at least one chunk."""
    chunks: list[list[int]] = []
    pos = 0
    while pos < len(ids):
        size = rng.choice([0, 1, 1, 1, 2, 3, 7])
        chunks.append(ids[pos : pos + size])
        pos += size
    return chunks or [[]]


def _stream(
    tokenizer: TextTokenizer,
    chunks: list[list[int]],
    stops: list[str],
    skip_special_tokens: bool = True,
) -> list[str]:
    detok = IncrementalDetokenizer(tokenizer, skip_special_tokens, stops)
    return [detok.feed(chunk, finished=i == len(chunks) - 1) for i, chunk in enumerate(chunks)]


def _expected(
    tokenizer: TextTokenizer,
    ids: list[int],
    stops: list[str],
    skip_special_tokens: bool = True,
) -> str:
    return trim_at_stop(tokenizer.decode(ids, skip_special_tokens=skip_special_tokens), stops)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("seed", range(5))
def test_random_chunkings_equal_full_decode(
    tokenizer: TextTokenizer, text: str, seed: int
) -> None:
    ids = tokenizer.encode(text) + [IM_END]
    pieces = _stream(tokenizer, _chunked(ids, random.Random(seed)), [])
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)
    # NOTE: no piece ends in a half-decoded character while the stream is running.
    assert all("\ufffd" not in piece for piece in pieces)


def test_multibyte_character_waits_for_its_last_byte(tokenizer: TextTokenizer) -> None:
    ids = tokenizer.encode("😀")
    assert len(ids) > 1, "the emoji must span several byte tokens for this test"
    detok = IncrementalDetokenizer(tokenizer, True, [])
    assert [detok.feed([i], finished=False) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert detok.feed(ids[-1:], finished=False) == "😀"
    assert detok.feed([], finished=True) == ""


STOP_SETS = [["\n\n", "END"], ["return", ":"], ["😀", "世界"], ["  ", "x"], ["<|im_end|>"]]


@pytest.mark.parametrize("stops", STOP_SETS)
@pytest.mark.parametrize("seed", range(3))
def test_stream_matches_trimmed_decode_and_never_shows_a_stop(
    tokenizer: TextTokenizer, stops: list[str], seed: int
) -> None:
    rng = random.Random(seed)
    ids = [i for text in rng.sample(TEXTS, 4) for i in tokenizer.encode(text) + [IM_END]]
    for skip in (True, False):
        pieces = _stream(tokenizer, _chunked(ids, rng), stops, skip_special_tokens=skip)
        streamed = "".join(pieces)
        assert streamed == _expected(tokenizer, ids, stops, skip_special_tokens=skip)
        assert not any(stop in streamed for stop in stops)
        # NOTE: every prefix of the stream is a prefix of the final text, so no emitted
        # character is ever taken back; checked on the running concatenation.
        running = ""
        for piece in pieces:
            running += piece
            assert streamed.startswith(running)


def test_random_vocab_ids_equal_full_decode(tokenizer: TextTokenizer) -> None:
    rng = random.Random(0)
    for _ in range(20):
        ids = [rng.randrange(len(tokenizer)) for _ in range(60)]
        for skip in (True, False):
            streamed = "".join(_stream(tokenizer, _chunked(ids, rng), ["\n\n"], skip))
            assert streamed == _expected(tokenizer, ids, ["\n\n"], skip)


def test_partial_stop_is_held_then_trimmed(tokenizer: TextTokenizer) -> None:
    stops = ["\n\n", "END"]
    detok = IncrementalDetokenizer(tokenizer, True, stops)
    first = detok.feed(tokenizer.encode("abc EN"), finished=False)
    assert first == "abc "
    last = detok.feed(tokenizer.encode("D more"), finished=True)
    assert first + last == "abc "


def test_partial_stop_is_released_when_it_does_not_complete(
    tokenizer: TextTokenizer,
) -> None:
    detok = IncrementalDetokenizer(tokenizer, True, ["\n\n", "END"])
    assert detok.feed(tokenizer.encode("abc EN"), finished=False) == "abc "
    assert detok.feed(tokenizer.encode("X more\n"), finished=False) == "ENX more"
    assert detok.feed(tokenizer.encode(" done"), finished=False) == "\n done"
    assert detok.feed([], finished=True) == ""


def test_complete_stop_before_finish_is_never_emitted(tokenizer: TextTokenizer) -> None:
    detok = IncrementalDetokenizer(tokenizer, True, ["END"])
    assert detok.feed(tokenizer.encode("one END two"), finished=False) == "one "
    assert detok.feed(tokenizer.encode(" three"), finished=False) == ""
    assert detok.feed([], finished=True) == ""


@pytest.mark.parametrize(("skip", "expected"), [(True, "Hi there"), (False, "Hi there<|im_end|>")])
def test_skip_special_tokens(tokenizer: TextTokenizer, skip: bool, expected: str) -> None:
    ids = tokenizer.encode("Hi there") + [IM_END]
    detok = IncrementalDetokenizer(tokenizer, skip, [])
    streamed = "".join(detok.feed([i], finished=False) for i in ids) + detok.feed([], finished=True)
    assert streamed == expected
