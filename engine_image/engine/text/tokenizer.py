"""The engine's tokenizer: a ``tokenizers.Tokenizer`` with the model's special tokens and chat templates.

Encodes, decodes and renders chat templates as the model's transformers tokenizer does,
for every process of the server (HTTP, scheduler, detokenizer), without importing
transformers or torch; ``engine.text.tokenizer_files`` loads one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from engine.text.chat_template import render_chat_template


@dataclass(frozen=True)
class PairEncoding:
    """A batch of (first, second) text pairs as the model reads them (cross-encoders)."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]


def _clean_up_spaces(text: str) -> str:
    """transformers' ``clean_up_tokenization``: spaces a WordPiece decode leaves before punctuation."""
    for spaced, joined in (
        (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
        (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
    ):  # fmt: skip
        text = text.replace(spaced, joined)
    return text


class TextTokenizer:
    """Text ↔ token ids for one model.

    ``special_tokens`` maps transformers' names (``bos_token``, ``eos_token``, ...) to token
    text; chat templates read them as variables. ``chat_templates`` maps a template's name
    to its text; ``"default"`` is the model's chat template, ``"tool_use"`` (where a model
    has one) the template for requests that carry tools.
    """

    def __init__(
        self,
        backend: Tokenizer,
        special_tokens: Mapping[str, str],
        chat_templates: Mapping[str, str],
        clean_up_spaces: bool,
    ) -> None:
        # NOTE: transformers turns off the truncation and padding a tokenizer.json may carry
        # unless a call asks for them; so does this tokenizer.
        backend.no_truncation()
        backend.no_padding()
        self.backend = backend
        self.special_tokens = dict(special_tokens)
        self.chat_templates = dict(chat_templates)
        self._clean_up_spaces = clean_up_spaces
        self.bos_token_id = self._special_id("bos_token")
        self.eos_token_id = self._special_id("eos_token")

    def _special_id(self, name: str) -> int | None:
        text = self.special_tokens.get(name)
        return None if text is None else self.backend.token_to_id(text)

    def __len__(self) -> int:
        """The vocabulary with the added tokens (transformers' ``len(tokenizer)``)."""
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    @property
    def chat_template(self) -> str | None:
        return self.chat_templates.get("default")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        text = str(self.backend.decode(ids, skip_special_tokens=skip_special_tokens))
        return _clean_up_spaces(text) if self._clean_up_spaces else text

    def encode_pairs(self, firsts: list[str], seconds: list[str], max_length: int) -> PairEncoding:
        """Each (first, second) pair as one sequence, longest side truncated first to fit ``max_length``.

        NOTE: transformers' ``tokenizer(firsts, seconds, truncation=True, max_length=...)``;
        the truncation is switched on for this call only, as transformers does.
        """
        self.backend.enable_truncation(max_length, strategy="longest_first")
        try:
            encodings = self.backend.encode_batch(list(zip(firsts, seconds, strict=True)), add_special_tokens=True)
        finally:
            self.backend.no_truncation()
        return PairEncoding([list(e.ids) for e in encodings], [list(e.type_ids) for e in encodings])

    def render_chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = False,
        **template_kwargs: Any,
    ) -> str:
        """The prompt text of ``messages`` (``apply_chat_template(..., tokenize=False)``).

        Raises ValueError where the model has no chat template, jinja2's TemplateError where
        the template refuses the messages.
        """
        template = self.chat_templates.get("tool_use") if tools is not None else None
        template = template or self.chat_template
        if template is None:
            raise ValueError("this model has no chat template")
        # NOTE: the caller's kwargs override the special tokens, as in transformers.
        variables = {**self.special_tokens, **template_kwargs}
        return render_chat_template(template, messages, tools, add_generation_prompt, variables)
