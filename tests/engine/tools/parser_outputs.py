"""The outputs models really write for each --tool-call-parser, with what each parses to."""

from __future__ import annotations

from engine.function_call import ToolCall

WEATHER = ToolCall("get_weather", '{"city": "Paris", "unit": "celsius"}')
TIME = ToolCall("get_time", '{"timezone": "Europe/Paris"}')
NAMES = ("get_weather", "get_time")

# (parser, model output, expected normal text, expected calls)
CASES: list[tuple[str, str, str, tuple[ToolCall, ...]]] = [
    # Qwen 2.5: one tag pair per call, as its chat template asks for.
    (
        "qwen25",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>',
        "",
        (WEATHER,),
    ),
    (
        "qwen25",
        (
            "I will look both up.\n"
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}\n</tool_call>'
        ),
        "I will look both up.\n\n",
        (WEATHER, TIME),
    ),
    # Nested arguments, escapes and numbers: streamed, they must come out byte for byte.
    (
        "qwen25",
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa\\"ris\\u00e9", "unit": "celsius", '
            '"extra": [1, -2.5e3, {"a": [true, null, "x,]}"]}, []], "o": {}}}\n</tool_call>'
        ),
        "",
        (
            ToolCall(
                "get_weather",
                '{"city": "Pa\\"ris\\u00e9", "unit": "celsius", '
                '"extra": [1, -2.5e3, {"a": [true, null, "x,]}"]}, []], "o": {}}',
            ),
        ),
    ),
    # Hermes 2 Pro writes the arguments before the name.
    (
        "hermes",
        '<tool_call>\n{"arguments": {"city": "Paris", "unit": "celsius"}, "name": "get_weather"}\n</tool_call>',
        "",
        (WEATHER,),
    ),
    (
        "hermes",
        (
            'Sure.<tool_call>{"arguments": {"timezone": "Europe/Paris"}, "name": "get_time"}</tool_call>'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</tool_call>'
        ),
        "Sure.",
        (TIME, WEATHER),
    ),
    # Llama 3.1: <|python_tag|> (when special tokens are kept) or bare JSON, ";"-separated.
    (
        "llama3",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}',
        "",
        (WEATHER,),
    ),
    (
        "llama3",
        (
            '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}; '
            '{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}'
        ),
        "",
        (WEATHER, TIME),
    ),
    (
        "llama3",
        'Let me check. <|python_tag|>{"name": "get_time", "parameters": {"timezone": "Europe/Paris"}}',
        "Let me check. ",
        (TIME,),
    ),
    # Mistral: one JSON array after [TOOL_CALLS]; bare when the special token was dropped.
    (
        "mistral",
        (
            '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}, '
            '{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}]'
        ),
        "",
        (WEATHER, TIME),
    ),
    (
        "mistral",
        ' [{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}]',
        " ",
        (TIME,),
    ),
    # Pythonic (Llama 3.2 / 4): a Python list of calls with literal keyword arguments.
    (
        "pythonic",
        "[get_weather(city='Paris', unit=\"celsius\"), get_time(timezone='Europe/Paris')]",
        "",
        (WEATHER, TIME),
    ),
    (
        "pythonic",
        "Checking the time [1]. [get_time(timezone='Europe/Paris')]",
        "Checking the time [1]. ",
        (TIME,),
    ),
]

# Outputs that are not (valid) calls: the whole output must come back as normal text. These
# go wrong before a call's name is complete, so a stream gives the same, however it is cut.
NOT_CALLS: list[tuple[str, str]] = [
    ("qwen25", "<tool_call>\nnot json at all\n</tool_call> and more"),
    ("qwen25", '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'),
    ("hermes", '<tool_call>\n{"arguments": {"city": "Paris"}, "name": get_weather}\n</tool_call>'),
    ("llama3", '{"answer": 42, "name": "get_weather"}'),
    ("llama3", 'The JSON is {"name": "get_weather", "parameters": {}}'),
    ("mistral", "[1, 2, 3] are numbers"),
    ("pythonic", "[get_weather(city=open('/etc/passwd'))]"),
    ("pythonic", "[get_weather('Paris')]"),
    ("pythonic", "[get_weather(city='Paris'"),
]
# NOTE: these go wrong after the name: one-shot they are text; a stream that already sent the
# name keeps the call (see test_a_call_cut_off_mid_stream_keeps_what_was_sent).
LATE_NOT_CALLS: list[tuple[str, str]] = [
    ("qwen25", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"\n</tool_call>'),
    ("qwen25", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'),
    ("llama3", '{"name": "get_weather", "parameters": "Paris"}'),
    ("mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": }}]'),
]
