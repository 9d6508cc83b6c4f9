"""One sequence of token ids as text, typed as ``str``."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase


def decode_text(
    tokenizer: PreTrainedTokenizerBase, ids: list[int], skip_special_tokens: bool = False
) -> str:
    """``tokenizer.decode(ids, skip_special_tokens=...)`` for one flat list of ids.

    NOTE: transformers types ``decode`` as ``str | list[str]`` (a batch of sequences gives a
    list); one flat list always gives ``str``, and this narrows to it once for every caller.
    """
    text = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
    assert isinstance(text, str), "decode of one flat id list returns str"
    return text
