"""transformers' greedy continuation of a GGUF model dequantized to float32, with each step's
margin, and the comparison of the engine's output to it.

Two ways to the dequantized model: transformers' own GGUF loader (``from_pretrained(...,
gguf_file=...)``), or, for a llama file of a model whose Hugging Face directory is at hand, that
directory's model with every weight replaced by the file's tensor dequantized by the ``gguf``
package (the dequantizer transformers' loader calls) — the same weights in ~5 s instead of
~25 s a file (transformers parses the file's 49k-token vocabulary twice and maps tensor names
hundreds of times). ``test_file_weights_equal_transformers_gguf_loader`` proves the two equal.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from gguf import GGUFReader
from gguf.quants import dequantize
from transformers import AutoModelForCausalLM, PreTrainedModel

from tests.support.batched_greedy import greedy_in_one_batch
from tests.support.gguf_files import CACHE_DIR, hf_name, llama_cpp_unpermute

PAD = 0  # the left padding's id: masked out, so any token would do


@dataclass(frozen=True)
class Greedy:
    ids: list[int]
    logprobs: list[float]  # of each chosen token
    margins: list[float]  # top-1 minus top-2 log-prob at each step


def transformers_greedy(
    gguf: Path, prompts: list[list[int]], max_new: int, base: Path | None = None
) -> list[Greedy]:
    """Cached by the file's identity, the prompts and transformers' version: a reference is a
    pure function of them, and transformers' float32 generation on CPU is the slow part.

    ``base``: a Hugging Face directory of the same llama model, filled with the file's weights
    (see the module's docstring); without it transformers loads the GGUF itself."""
    stat = gguf.stat()
    key = json.dumps([gguf.name, stat.st_size, stat.st_mtime_ns, prompts, max_new, transformers.__version__])
    cached = CACHE_DIR / "references" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    if cached.is_file():
        return [Greedy(**ref) for ref in json.loads(cached.read_text())]
    refs = _generate(_model(gguf, base), prompts, max_new)
    cached.parent.mkdir(parents=True, exist_ok=True)
    staging = cached.with_suffix(".tmp")
    staging.write_text(json.dumps([asdict(ref) for ref in refs]))
    staging.replace(cached)
    return refs


def file_weights(gguf: Path) -> dict[str, torch.Tensor]:
    """A llama GGUF's tensors dequantized to float32 by the ``gguf`` package, under Hugging
    Face names, q/k rows back in Hugging Face's order."""
    reader = GGUFReader(gguf, "r")
    heads = int(reader.fields["llama.attention.head_count"].contents())
    kv_heads = int(reader.fields["llama.attention.head_count_kv"].contents())
    weights = {}
    for tensor in reader.tensors:
        rows_cols = tuple(reversed([int(n) for n in tensor.shape]))
        values = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32).reshape(rows_cols)
        name = hf_name(tensor.name)
        if ".q_proj." in name:
            values = llama_cpp_unpermute(values, heads)
        elif ".k_proj." in name:
            values = llama_cpp_unpermute(values, kv_heads)
        weights[name] = torch.from_numpy(np.ascontiguousarray(values))
    return weights


def _model(gguf: Path, base: Path | None) -> PreTrainedModel:
    if base is None:
        model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        return model.eval()
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    missing, unexpected = model.load_state_dict(file_weights(gguf), strict=False)
    # NOTE: a tied head has no tensor of its own in the file.
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    return model.eval()


def _generate(model: PreTrainedModel, prompts: list[list[int]], max_new: int) -> list[Greedy]:
    refs = []
    for row in greedy_in_one_batch(model, prompts, max_new, pad=PAD, min_new=max_new):
        logprobs, margins = [], []
        for step, token in zip(row.logits, row.ids):
            lp = torch.log_softmax(step.float(), -1)
            top = lp.topk(2).values
            logprobs.append(lp[token].item())
            margins.append((top[0] - top[1]).item())
        refs.append(Greedy(row.ids, logprobs, margins))
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
