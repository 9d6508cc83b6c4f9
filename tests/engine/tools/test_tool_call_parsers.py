"""Each --tool-call-parser on the outputs its models really write: one-shot and streamed."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.function_call import (
    TOOL_CALL_DETECTORS,
    ParseResult,
    StreamDelta,
    ToolCall,
    ToolCallParser,
    tool_call_detector,
)
from engine.function_call.forced import NAMED_CALL, REQUIRED_CALLS
from tests.engine.tools.parser_outputs import CASES, LATE_NOT_CALLS, NAMES, NOT_CALLS, TIME


def _parse(parser: str, text: str) -> ParseResult:
    return ToolCallParser(tool_call_detector(parser), NAMES).parse(text)


def _stream(parser: ToolCallParser, chunks: list[str]) -> list[StreamDelta]:
    return [parser.feed(chunk) for chunk in chunks] + [parser.feed("", final=True)]


def _assemble(deltas: list[StreamDelta]) -> ParseResult:
    """The streamed deltas put together; also checks each call is named before its arguments."""
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for delta in deltas:
        for call in delta.calls:
            if call.index not in names:
                assert call.name is not None, f"call {call.index} got arguments before its name"
                assert call.index == len(names), "calls must be announced in index order"
                names[call.index] = call.name
            else:
                assert call.name is None, f"call {call.index} was named twice"
            arguments[call.index] = arguments.get(call.index, "") + call.arguments
    calls = tuple(ToolCall(names[i], arguments[i]) for i in sorted(names))
    return ParseResult("".join(d.normal_text for d in deltas), calls)


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)]) if b > a]


def test_every_registered_parser_has_cases() -> None:
    assert {case[0] for case in CASES} == set(TOOL_CALL_DETECTORS)


@pytest.mark.parametrize(("parser", "text", "normal", "calls"), CASES)
def test_one_shot(parser: str, text: str, normal: str, calls: tuple[ToolCall, ...]) -> None:
    result = _parse(parser, text)
    assert result.normal_text == normal
    assert [c.name for c in result.calls] == [c.name for c in calls]
    assert [json.loads(c.arguments) for c in result.calls] == [
        json.loads(c.arguments) for c in calls
    ]


@pytest.mark.parametrize(("parser", "text", "normal", "calls"), CASES)
def test_char_by_char_stream_names_first_then_argument_fragments(
    parser: str, text: str, normal: str, calls: tuple[ToolCall, ...]
) -> None:
    deltas = _stream(ToolCallParser(tool_call_detector(parser), NAMES), list(text))
    assert _assemble(deltas) == _parse(parser, text)
    # NOTE: pythonic calls come whole, once the list is closed; a call whose arguments come
    # before its name (Hermes) is held until the name arrives.
    arguments_key = re.search(r'"(arguments|parameters)"', text)
    if parser != "pythonic" and arguments_key and text.find('"name"') < arguments_key.start():
        fragments = [c for d in deltas for c in d.calls if c.index == 0 and c.name is None]
        assert len(fragments) > 3, "arguments should arrive in pieces when streamed char by char"


@settings(max_examples=60, deadline=None)
@given(
    case=st.sampled_from(CASES + [(p, t, t, ()) for p, t in NOT_CALLS]),
    cuts=st.lists(st.integers(0, 300)),
)
def test_any_chunking_concatenates_to_the_one_shot_result(
    case: tuple[str, str, str, tuple[ToolCall, ...]], cuts: list[int]
) -> None:
    parser, text, _, _ = case
    streamed = _assemble(
        _stream(ToolCallParser(tool_call_detector(parser), NAMES), _chunks(text, cuts))
    )
    assert streamed == _parse(parser, text)


@pytest.mark.parametrize(("parser", "text"), NOT_CALLS + LATE_NOT_CALLS)
def test_malformed_or_unknown_calls_are_plain_text(parser: str, text: str) -> None:
    assert _parse(parser, text) == ParseResult(text, ())


def test_plain_answers_pass_through_untouched() -> None:
    text = 'The weather in Paris is {"mild"}; see [the forecast](https://x.y) <b>today</b>.'
    for parser in TOOL_CALL_DETECTORS:
        assert _parse(parser, text) == ParseResult(text, ())


def test_a_valid_call_after_a_malformed_one_is_still_found() -> None:
    text = (
        "<tool_call>\n{oops}\n</tool_call>\n"
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}\n</tool_call>'
    )
    result = _parse("qwen25", text)
    assert result.normal_text == "<tool_call>\n{oops}\n</tool_call>\n"
    assert result.calls == (TIME,)


def test_without_tool_names_any_name_is_a_call() -> None:
    text = '<tool_call>\n{"name": "anything", "arguments": {}}\n</tool_call>'
    assert ToolCallParser(tool_call_detector("qwen25")).parse(text).calls == (
        ToolCall("anything", "{}"),
    )


def test_a_call_without_arguments_gets_an_empty_object() -> None:
    assert _parse("llama3", '{"name": "get_time"}').calls == (ToolCall("get_time", "{}"),)


def test_held_marker_prefix_is_released_when_it_does_not_complete() -> None:
    parser = ToolCallParser(tool_call_detector("qwen25"), NAMES)
    assert parser.feed("a <tool_c").normal_text == "a "
    assert parser.feed("ar> b").normal_text == "<tool_car> b"
    assert parser.feed("", final=True) == StreamDelta()


def test_a_call_cut_off_mid_stream_keeps_what_was_sent() -> None:
    """NOTE: a stream cannot take back a released name: the call stays, with partial arguments."""
    parser = ToolCallParser(tool_call_detector("qwen25"), NAMES)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
    streamed = _assemble(_stream(parser, [text[:30], text[30:]]))
    assert streamed.calls == (ToolCall("get_weather", '{"city": "Pa'),)
    assert _parse("qwen25", text) == ParseResult(text, ())


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(
            [
                "<tool_call>",
                "</tool_call>",
                "[TOOL_CALLS]",
                "<|python_tag|>",
                "{",
                "}",
                "[",
                "]",
                "(",
                ")",
                '"name"',
                '"arguments"',
                '"parameters"',
                ":",
                ",",
                ";",
                '"get_time"',
                "get_time",
                "=",
                "'x'",
                " ",
                "\n",
                "1",
                "true",
                '"',
                "\\",
                "é",
            ]
        ),
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 200)),
    parser=st.sampled_from(sorted(TOOL_CALL_DETECTORS)),
)
def test_arbitrary_text_never_raises_and_loses_nothing(
    pieces: list[str], cuts: list[int], parser: str
) -> None:
    text = "".join(pieces)
    result = _parse(parser, text)
    if not result.calls:
        assert result.normal_text == text
    for call in result.calls:
        assert isinstance(json.loads(call.arguments), dict)
    _assemble(_stream(ToolCallParser(tool_call_detector(parser), NAMES), _chunks(text, cuts)))


@pytest.mark.parametrize(
    ("detector", "text", "calls"),
    [
        (
            REQUIRED_CALLS,
            '[{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}]',
            (TIME,),
        ),
        (
            REQUIRED_CALLS,
            (
                '[ {"name":"get_time","arguments":{"timezone":"Europe/Paris"}} ,\n'
                '{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}} ]'
            ),
            (
                ToolCall("get_time", '{"timezone":"Europe/Paris"}'),
                ToolCall("get_weather", '{"city":"Paris","unit":"celsius"}'),
            ),
        ),
        (NAMED_CALL, '{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}', (TIME,)),
    ],
)
def test_constrained_json_calls(detector: object, text: str, calls: tuple[ToolCall, ...]) -> None:
    parser = ToolCallParser(detector, NAMES)  # type: ignore[arg-type]
    assert parser.parse(text) == ParseResult("", calls)
    streamed = _assemble(_stream(ToolCallParser(detector, NAMES), list(text)))  # type: ignore[arg-type]
    assert streamed == ParseResult("", calls)
