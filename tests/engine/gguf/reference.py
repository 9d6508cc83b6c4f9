"""transformers' greedy continuation of a GGUF model (dequantized to float32 by transformers'
own GGUF loader), with each step's margin, and the comparison of the engine's output to it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM

from tests.support.gguf_files import CACHE_DIR


@dataclass(frozen=True)
class Greedy:
    ids: list[int]
    logprobs: list[float]  # of each chosen token
    margins: list[float]  # top-1 minus top-2 log-prob at each step


def transformers_greedy(gguf: Path, prompts: list[list[int]], max_new: int) -> list[Greedy]:
    """Cached by the file's identity, the prompts and transformers' version: a reference is a
    pure function of them, and transformers' float32 generation on CPU is the slow part."""
    stat = gguf.stat()
    key = json.dumps([gguf.name, stat.st_size, stat.st_mtime_ns, prompts, max_new, transformers.__version__])
    cached = CACHE_DIR / "references" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    if cached.is_file():
        return [Greedy(**ref) for ref in json.loads(cached.read_text())]
    refs = _generate(gguf, prompts, max_new)
    cached.parent.mkdir(parents=True, exist_ok=True)
    staging = cached.with_suffix(".tmp")
    staging.write_text(json.dumps([asdict(ref) for ref in refs]))
    staging.replace(cached)
    return refs


def _generate(gguf: Path, prompts: list[list[int]], max_new: int) -> list[Greedy]:
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    refs = []
    for ids in prompts:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_new,
                min_new_tokens=max_new,
                do_sample=False,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=0,
            )
        new = out.sequences[0, len(ids) :].tolist()
        logprobs, margins = [], []
        for step, token in zip(out.logits, new):
            lp = torch.log_softmax(step[0].float(), -1)
            top = lp.topk(2).values
            logprobs.append(lp[token].item())
            margins.append((top[0] - top[1]).item())
        refs.append(Greedy(new, logprobs, margins))
    return refs


@dataclass(frozen=True)
class Comparison:
    agreed_steps: int  # leading steps where the engine chose the reference's tokens
    total_steps: int
    max_logprob_error: float  # over the agreed steps
    mean_logprob_error: float
    errors: list[str]  # divergences where the reference's choice was clear


def compare(results: list[dict[str, Any]], refs: list[Greedy], min_margin: float) -> Comparison:
    """The engine's greedy ``results`` against ``refs``, prompt by prompt.

    Until the first token that differs, both saw the same context, so the log-probs compare
    step by step. At that token the reference's top-1 must beat its top-2 by less than
    ``min_margin``: a quantized kernel may flip a close call, never a clear one.
    """
    agreed_total, total, errors = 0, 0, []
    differences: list[float] = []
    for index, (result, ref) in enumerate(zip(results, refs, strict=True)):
        ours = result["output_ids"]
        agreed = next((step for step, (a, b) in enumerate(zip(ours, ref.ids)) if a != b), len(ref.ids))
        if agreed < len(ref.ids) and ref.margins[agreed] >= min_margin:
            errors.append(
                f"prompt {index} step {agreed}: ours {ours[agreed]}, reference {ref.ids[agreed]} "
                f"by a margin of {ref.margins[agreed]:.3f}"
            )
        logprobs = [lp for lp, *_ in result["meta_info"]["output_token_logprobs"]]
        differences += [abs(a - b) for a, b in zip(logprobs[:agreed], ref.logprobs[:agreed])]
        agreed_total += agreed
        total += len(ref.ids)
    mean = sum(differences) / len(differences) if differences else 0.0
    return Comparison(agreed_total, total, max(differences, default=0.0), mean, errors)
