"""tools + tool_choice → the request's plan: template tools, output grammar, output parser."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine.function_call import ToolCallDelta, tool_call_detector
from engine.function_call.forced import NAMED_CALL, REQUIRED_CALLS
from engine.server.chat.messages import NamedToolChoice, Tool
from engine.server.chat.output import chat_output_parser
from engine.server.chat.tool_calling import NO_TOOL_CALLING, tool_calling, with_call_grammar
from engine.server.http_errors import ApiError
from engine.server.ollama.protocol import Done, FunctionCallReply, ToolCallReply
from engine.server.ollama.serving_chat import tool_call_render

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
}
TOOLS = [
    Tool.model_validate(
        {"type": "function", "function": {"name": "search", "parameters": PARAMETERS}}
    ),
    Tool.model_validate({"type": "function", "function": {"name": "now"}}),
]
NAMED = NamedToolChoice.model_validate({"type": "function", "function": {"name": "search"}})


def test_auto_without_a_parser_is_a_clear_400() -> None:
    with pytest.raises(ApiError) as caught:
        tool_calling(TOOLS, "auto", None)
    assert caught.value.status == 400
    assert "--tool-call-parser" in caught.value.message


def test_auto_is_the_default_and_uses_the_servers_parser() -> None:
    calling = tool_calling(TOOLS, None, "qwen25")
    assert calling.detector is tool_call_detector("qwen25")
    assert calling.json_schema is None
    assert [t["function"]["name"] for t in calling.template_tools or []] == ["search", "now"]


def test_none_renders_no_tools_and_parses_nothing() -> None:
    assert tool_calling(TOOLS, "none", "qwen25") == NO_TOOL_CALLING
    assert tool_calling(None, None, None) == NO_TOOL_CALLING


def test_required_works_without_a_parser_and_its_schema_admits_only_listed_calls() -> None:
    calling = tool_calling(TOOLS, "required", None)
    assert calling.detector is REQUIRED_CALLS and calling.json_schema is not None
    schema = json.loads(calling.json_schema)
    jsonschema.validate(
        [{"name": "search", "arguments": {"q": "x"}}, {"name": "now", "arguments": {}}], schema
    )
    for bad in ([], [{"name": "search", "arguments": {}}], [{"name": "other", "arguments": {}}]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_named_schema_is_one_call_of_that_tool() -> None:
    calling = tool_calling(TOOLS, NAMED, None)
    assert calling.detector is NAMED_CALL and calling.names == {"search"}
    schema = json.loads(calling.json_schema or "")
    jsonschema.validate({"name": "search", "arguments": {"q": "x"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "now", "arguments": {}}, schema)


def test_a_forced_call_and_another_grammar_are_exclusive() -> None:
    calling = tool_calling(TOOLS, "required", None)
    assert with_call_grammar({"max_new_tokens": 8}, calling)["json_schema"] == calling.json_schema
    with pytest.raises(ApiError):
        with_call_grammar({"regex": "a+"}, calling)


def test_parameters_must_describe_an_object() -> None:
    tool = Tool.model_validate(
        {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}
    )
    with pytest.raises(ApiError):
        tool_calling([tool], "required", None)


def test_ollama_replies_carry_whole_calls_with_object_arguments() -> None:
    parser = chat_output_parser(None, tool_call_detector("qwen25"), ["search"])
    assert parser is not None
    render = tool_call_render("m", parser)
    text = 'Looking.<tool_call>\n{"name": "search", "arguments": {"q": "paris"}}\n</tool_call>'
    first = render(text[:30], None)
    assert first.message.content == "Looking." and first.message.tool_calls is None
    done = Done("stop", 1, 0, 1, 1, 1, 1)
    last = render(text[30:], done)
    assert last.message.tool_calls == [ToolCallReply(FunctionCallReply("search", {"q": "paris"}))]


def test_no_parallel_calls_limits_the_required_array_to_one() -> None:
    schema = json.loads(tool_calling(TOOLS, "required", None, parallel=False).json_schema or "")
    one = [{"name": "now", "arguments": {}}]
    jsonschema.validate(one, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(one * 2, schema)


CUT_ARRAY = '[{"name": "now", "arguments": {}}, {"name": "search", "arguments": {"q": "pa'


def test_a_cut_off_forced_array_keeps_its_complete_calls_streamed_or_not() -> None:
    whole = chat_output_parser(None, REQUIRED_CALLS, ["search", "now"])
    assert whole is not None
    output = whole.parse(CUT_ARRAY)
    assert output.content == "" and [(c.name, c.arguments) for c in output.calls] == [
        ("now", "{}")
    ]
    stream = chat_output_parser(None, REQUIRED_CALLS, ["search", "now"])
    assert stream is not None
    cuts = range(0, len(CUT_ARRAY), 7)
    deltas = [stream.feed(CUT_ARRAY[i : i + 7], i + 7 >= len(CUT_ARRAY)) for i in cuts]
    assert "".join(d.content for d in deltas) == ""
    # NOTE: a forced call goes out whole, once complete: the cut second call never starts.
    assert [c for d in deltas for c in d.calls] == [ToolCallDelta(0, "now", "{}")]


def test_a_named_call_cut_inside_its_arguments_is_neither_call_nor_text() -> None:
    parser = chat_output_parser(None, NAMED_CALL, ["search"])
    assert parser is not None
    output = parser.parse('{"name": "search", "arguments": {"q"')
    assert output.content == "" and output.calls == ()
