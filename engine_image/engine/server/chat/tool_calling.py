"""A chat request's ``tools`` and ``tool_choice``: what the template sees, how the output is
constrained and parsed.

- "none" (or no tools): the tools are not rendered and nothing is parsed.
- "auto": the model decides; its output is parsed by the server's --tool-call-parser.
- "required" / a named function: the output is constrained to JSON calls (a JSON schema
  grammar), so it is always a valid call to a listed tool; no model parser is needed. Cut off
  by max_tokens, the reply carries the calls completed so far, with finish_reason "length"
  (as vLLM: "tool_calls" only when the model stopped by itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from engine.function_call import ToolCallDetector, tool_call_detector
from engine.function_call.forced import (
    NAMED_CALL,
    REQUIRED_CALLS,
    call_schema,
    required_calls_schema,
)
from engine.sampling.params import GRAMMAR_KINDS
from engine.server.chat.messages import NamedToolChoice, Tool, ToolChoice
from engine.server.http_errors import bad_request

NO_PARSER = (
    'tool calling is not enabled for this model: tool_choice "auto" needs the tool-call parser that '
    'the model\'s manifest sets (--tool-call-parser); "required" or a named tool works without one'
)
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolCalling:
    template_tools: list[dict[str, Any]] | None  # the tools as the chat template gets them
    json_schema: str | None  # the output grammar for "required" and named choices
    detector: ToolCallDetector | None  # None: the output is not parsed for calls
    names: frozenset[str] = frozenset()


NO_TOOL_CALLING = ToolCalling(None, None, None)


def tool_calling(
    tools: list[Tool] | None,
    choice: ToolChoice | None,
    parser: str | None,
    parallel: bool = True,
) -> ToolCalling:
    """The plan for one request; a 400 for a choice that cannot be honoured.

    ``parallel`` False (``parallel_tool_calls: false``) makes "required" exactly one call.
    """
    if not tools:
        if choice == "required" or isinstance(choice, NamedToolChoice):
            raise bad_request("tool_choice needs tools: none were given", param="tool_choice")
        return NO_TOOL_CALLING
    parameters = _parameters_by_name(tools)
    if choice == "none":
        return NO_TOOL_CALLING
    template_tools = [tool.model_dump(exclude_none=True) for tool in tools]
    names = frozenset(parameters)
    if choice is None or choice == "auto":
        if parser is None:
            raise bad_request(NO_PARSER, param="tool_choice")
        return ToolCalling(template_tools, None, tool_call_detector(parser), names)
    if choice == "required":
        schema = required_calls_schema(parameters, parallel)
        return ToolCalling(template_tools, orjson.dumps(schema).decode(), REQUIRED_CALLS, names)
    name = choice.function.name
    if name not in parameters:
        raise bad_request(
            f"tool_choice names {name!r}, which is not among the tools", param="tool_choice"
        )
    schema = call_schema(name, parameters[name])
    return ToolCalling(
        template_tools, orjson.dumps(schema).decode(), NAMED_CALL, frozenset((name,))
    )


def _parameters_by_name(tools: list[Tool]) -> dict[str, dict[str, Any]]:
    parameters: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = tool.function
        if function.name in parameters:
            raise bad_request(f"two tools are named {function.name!r}", param="tools")
        schema = function.parameters if function.parameters is not None else _EMPTY_PARAMETERS
        if schema.get("type", "object") != "object":
            raise bad_request(
                f"tool {function.name!r}: parameters must be a JSON schema of type object",
                param="tools",
            )
        parameters[function.name] = {"type": "object", **schema}
    return parameters


def with_call_grammar(params: dict[str, Any], calling: ToolCalling) -> dict[str, Any]:
    """The sampling params with the calls' JSON schema, for "required" and named choices."""
    if calling.json_schema is None:
        return params
    given = [kind for kind in GRAMMAR_KINDS if kind in params]
    if given:
        raise bad_request(
            f'tool_choice "required" or a named function constrains the output itself; drop {given[0]} '
            "(or response_format)",
            param="tool_choice",
        )
    return {**params, "json_schema": calling.json_schema}
