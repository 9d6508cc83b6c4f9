"""The engine's own tokenizer renders, encodes and decodes exactly as the model's transformers tokenizer.

Covers SmolLM2's tokenizer read from its tokenizer.json (the path every server process
takes for it), the same files under a tool-aware template that uses every extra transformers
gives templates, and a tokenizer class of its own (built by transformers once, then read
from the engine's cache).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jinja2 import TemplateError
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from engine.text.tokenizer import TextTokenizer
from engine.text.tokenizer_cache import CACHE_DIR_ENV
from engine.text.tokenizer_files import load_tokenizer

pytestmark = pytest.mark.slow

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city — «quoted» & <tagged>",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Héllo <|im_end|> wörld 日本語 😀"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_1"},
        {"role": "user", "content": "  and tomorrow?\n"},
    ],
]
# NOTE: written for this test; it uses what real templates use (Qwen's, Llama 3's, Hermes'):
# the special tokens as variables, tools through tojson, namespace, loop controls, dict,
# raise_exception and transformers' generation tag.
TOOL_TEMPLATE = """{{ bos_token }}{% set ns = namespace(system=false) %}
{% if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>
{% endif %}
{% for message in messages %}
    {% if message.role not in ['system', 'user', 'assistant', 'tool'] %}{{ raise_exception('bad role ' + message.role) }}{% endif %}
    {% if message.role == 'system' %}{% set ns.system = true %}{% endif %}
    <|im_start|>{{ message.role }}
    {% if message.role == 'assistant' %}{% generation %}{{ message.content }}{% endgeneration %}{% else %}{{ message.content }}{% endif %}
    {% for call in message.tool_calls or [] %}{{ dict(name=call.function.name, arguments=call.function.arguments) | tojson(indent=2) }}{% break %}{% endfor %}
    <|im_end|>
{% endfor %}
{% if add_generation_prompt %}<|im_start|>assistant{% if not ns.system %} (no system){% endif %}
{% endif %}"""


def _same_everywhere(ours: TextTokenizer, theirs: PreTrainedTokenizerBase) -> None:
    for messages in CONVERSATIONS:
        for tools in (None, TOOLS):
            expected = theirs.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
            rendered = ours.render_chat(messages, tools, add_generation_prompt=True)
            assert rendered == expected
            assert ours.encode(rendered, add_special_tokens=False) == theirs.encode(expected, add_special_tokens=False)
    text = "Héllo <|im_start|> wörld 日本語 😀  spaces\n\ttabs"
    assert ours.encode(text) == theirs.encode(text)
    ids = [*theirs.encode(text), 0, 1, 2, 42]
    for skip in (True, False):
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
    assert (len(ours), ours.bos_token_id, ours.eos_token_id) == (len(theirs), theirs.bos_token_id, theirs.eos_token_id)


def _tokenizer_copy(smollm2_dir: Path, target: Path, **config_changes: Any) -> Path:
    target.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(smollm2_dir / name, target / name)
    config = {**json.loads((smollm2_dir / "tokenizer_config.json").read_text()), **config_changes}
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


def test_smollm2_from_its_tokenizer_json(smollm2_dir: Path) -> None:
    _same_everywhere(load_tokenizer(str(smollm2_dir)), AutoTokenizer.from_pretrained(smollm2_dir))


def test_a_tool_template_with_every_extra(smollm2_dir: Path, tmp_path: Path) -> None:
    templates = [{"name": "default", "template": "{{ raise_exception('not this one') }}"}]
    templates.append({"name": "tool_use", "template": TOOL_TEMPLATE})
    model = _tokenizer_copy(smollm2_dir, tmp_path / "tools", chat_template=templates)
    (model / "chat_template.jinja").write_text(TOOL_TEMPLATE)  # NOTE: overrides "default"
    ours, theirs = load_tokenizer(str(model)), AutoTokenizer.from_pretrained(model)
    _same_everywhere(ours, theirs)
    bad = [{"role": "robot", "content": "hi"}]
    with pytest.raises(TemplateError, match="bad role robot"):
        ours.render_chat(bad, add_generation_prompt=True)
    with pytest.raises(TemplateError, match="bad role robot"):
        theirs.apply_chat_template(bad, add_generation_prompt=True, tokenize=False)


def test_a_class_of_its_own_is_built_by_transformers_once(
    smollm2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPT2Tokenizer rebuilds the tokenizer from the vocabulary; the engine saves what it built
    and reads that back, then and at every later start, without transformers."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    model = _tokenizer_copy(smollm2_dir, tmp_path / "gpt2", tokenizer_class="GPT2Tokenizer", add_bos_token=True)
    _same_everywhere(load_tokenizer(str(model)), AutoTokenizer.from_pretrained(model))
    [saved] = (tmp_path / "cache").iterdir()
    probe = (
        "import sys\nfrom engine.text.tokenizer_files import load_tokenizer\n"
        f"load_tokenizer({str(model)!r})\nprint('transformers' in sys.modules)"
    )
    later = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert later.stdout.split() == ["False"]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [saved.name]
