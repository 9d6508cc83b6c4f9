"""Regex and EBNF constraints: native /generate (one batch) and /v1/completions' SGLang extras."""

from __future__ import annotations

import re

import pytest
from openai import OpenAI

from tests.engine.structured.conftest import SERVED_NAME
from tests.support.engine_process import EngineServer

pytestmark = pytest.mark.slow

REGEXES = {
    "Give me a US phone number.": r"\(\d{3}\) \d{3}-\d{4}",
    "Is Paris in France? Answer yes or no.": r"(yes|no)",
    "Name a fruit.": r"[A-Z][a-z]{2,8}",
    "Write an email address.": r"[a-z]{3,8}@[a-z]{3,8}\.(com|org)",
    "Give me the IP address of a home router.": (
        r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)"
    ),
}

# A key=value list and a sentence, each with the regular expression that recognises the same
# language (the grammars are regular, so a regex is an exact hand-written checker).
EBNFS = {
    "List some settings as key=value pairs.": (
        'root ::= pair ("," pair){0,2}\npair ::= [a-z]{1,8} "=" [0-9]{1,3}',
        r"[a-z]{1,8}=[0-9]{1,3}(,[a-z]{1,8}=[0-9]{1,3}){0,2}",
    ),
    "Is the sky blue?": (
        'root ::= "The answer is " answer "."\nanswer ::= "yes" | "no" | "maybe"',
        r"The answer is (yes|no|maybe)\.",
    ),
    "What is 12 plus 30?": (
        (
            'root ::= number " " op " " number " = " number\n'
            'number ::= [1-9] [0-9]{0,2} | "0"\nop ::= "+" | "-"'
        ),
        r"([1-9][0-9]{0,2}|0) [+-] ([1-9][0-9]{0,2}|0) = ([1-9][0-9]{0,2}|0)",
    ),
}


def _chat_prompt(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def test_generate_batch_output_fully_matches_each_regex_and_grammar(server: EngineServer) -> None:
    cases = [(q, {"regex": r}, r) for q, r in REGEXES.items()]
    cases += [(q, {"ebnf": grammar}, checker) for q, (grammar, checker) in EBNFS.items()]
    body = {
        "text": [_chat_prompt(q) for q, _, _ in cases],
        "sampling_params": [{**g, "temperature": 0, "max_new_tokens": 40} for _, g, _ in cases],
    }
    with server.client(timeout_s=300) as client:
        reply = client.post("/generate", json=body)
    assert reply.status_code == 200, reply.text
    for (question, _, pattern), result in zip(cases, reply.json(), strict=True):
        assert result["meta_info"]["finish_reason"]["type"] == "stop", (question, result)
        assert re.fullmatch(pattern, result["text"]), (question, pattern, result["text"])


def test_completions_accept_sglang_regex_and_ebnf_extras(server: EngineServer) -> None:
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)
    grammar, checker = EBNFS["Is the sky blue?"]
    for extra, pattern in (({"regex": r"[0-9]{4}"}, r"[0-9]{4}"), ({"ebnf": grammar}, checker)):
        reply = client.completions.create(
            model=SERVED_NAME,
            prompt="The year the first man walked on the moon:",
            max_tokens=20,
            temperature=0,
            extra_body=extra,
        )
        assert re.fullmatch(pattern, reply.choices[0].text), (extra, reply.choices[0].text)
        assert reply.choices[0].finish_reason == "stop"
