"""--reasoning-parser qwen3 / deepseek-r1 on their models' outputs, one-shot and streamed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.function_call import ToolCall, tool_call_detector
from engine.reasoning import REASONING_FORMATS, ReasoningDelta, ReasoningParser, reasoning_format
from engine.server.chat.output import ChatOutputParser

CASES: list[tuple[str, str, str, str]] = [
    (
        "qwen3",
        "<think>\nParis is in France.\n</think>\n\nParis.",
        "Paris is in France.\n",
        "Paris.",
    ),
    ("qwen3", "Paris.", "", "Paris."),  # NOTE: thinking switched off: no block at all
    (
        "qwen3",
        "<think>\nstill thinking when the tokens ran out",
        "still thinking when the tokens ran out",
        "",
    ),
    ("qwen3", "a </think> in an answer is text", "", "a </think> in an answer is text"),
    # DeepSeek-R1's template opens the block in the prompt: the output starts inside it.
    ("deepseek-r1", "Paris is in France.\n</think>\n\nParis.", "Paris is in France.\n", "Paris."),
    ("deepseek-r1", "<think>\nHmm.\n</think>\n\nParis.", "Hmm.\n", "Paris."),
    ("deepseek-r1", "thinking only", "thinking only", ""),
]


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)]) if b > a]


@pytest.mark.parametrize(("name", "text", "reasoning", "content"), CASES)
def test_one_shot(name: str, text: str, reasoning: str, content: str) -> None:
    assert ReasoningParser(reasoning_format(name)).feed(text, final=True) == ReasoningDelta(
        reasoning, content
    )


@settings(max_examples=80, deadline=None)
@given(case=st.sampled_from(CASES), cuts=st.lists(st.integers(0, 80)))
def test_any_chunking_gives_the_one_shot_split(
    case: tuple[str, str, str, str], cuts: list[int]
) -> None:
    name, text, reasoning, content = case
    parser = ReasoningParser(reasoning_format(name))
    deltas = [parser.feed(chunk) for chunk in _cut(text, cuts)] + [parser.feed("", final=True)]
    assert "".join(d.reasoning for d in deltas) == reasoning
    assert "".join(d.content for d in deltas) == content


def test_no_tag_text_is_held_longer_than_needed() -> None:
    parser = ReasoningParser(REASONING_FORMATS["qwen3"])
    assert parser.feed("<thi") == ReasoningDelta()
    assert parser.feed("nk>Hmm </th") == ReasoningDelta("Hmm ", "")
    assert parser.feed("ink>Yes") == ReasoningDelta("", "Yes")


def test_reasoning_then_tool_call() -> None:
    """Qwen3 thinks, then calls a tool: the call parser only sees the answer."""
    text = (
        "<think>\nI need the time.\n</think>\n\n"
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n</tool_call>'
    )
    whole = ChatOutputParser(
        reasoning_format("qwen3"), tool_call_detector("qwen25"), ["get_time"]
    ).parse(text)
    assert whole.reasoning == "I need the time.\n"
    assert whole.content == ""
    assert whole.calls == (ToolCall("get_time", '{"timezone": "UTC"}'),)
    streamed = ChatOutputParser(
        reasoning_format("qwen3"), tool_call_detector("qwen25"), ["get_time"]
    )
    deltas = [streamed.feed(ch) for ch in text[:-1]] + [streamed.feed(text[-1], final=True)]
    assert "".join(d.reasoning for d in deltas) == whole.reasoning
    assert "".join(c.arguments for d in deltas for c in d.calls) == '{"timezone": "UTC"}'
