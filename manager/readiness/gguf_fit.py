"""The memory a GGUF model needs, known before it is downloaded: the weights are the file's
size (the hub's listing, or the disk), the KV cache comes from the header's head counts and
lengths, read from the file's first megabytes (by HTTP range requests for a hub file).

NOTE: the weights are counted as the file: the engine keeps GGUF weights in their block
formats, so the file is what sits in memory (RAM on the CPU, VRAM on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from manager.gguf.byte_source import ByteSource, FileSource, HeaderReadError
from manager.gguf.header import read_header
from manager.gguf.http_source import HubRangeSource
from manager.gguf.model_facts import GgufModelFacts, model_facts
from manager.models.errors import ModelError
from manager.models.gguf_choice import choose_gguf
from manager.models.hub_listing import repo_listing
from manager.models.store import RepoId
from manager.readiness.memory import MemoryEstimate, context_within, estimate_from_parts
from manager.readiness.weights import WeightsSize, WeightsUnknownError

# NOTE: a GGUF names no compute dtype; the engine's "auto" runs it in bf16 on a GPU (the fit
# readiness checks) and in fp32 on the CPU, so this undercounts a CPU engine's KV cache by half,
# as config_dtype_bytes does for a bf16 config.json.
GGUF_KV_DTYPE_BYTES = 2


@dataclass(frozen=True)
class GgufFit:
    facts: GgufModelFacts
    weights: WeightsSize
    memory: MemoryEstimate
    context_tokens: int


def local_gguf_fit(path: Path, context_tokens: int | None) -> GgufFit:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise WeightsUnknownError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return _fit(FileSource(path), WeightsSize(size, "gguf-file", {}), context_tokens)


def remote_gguf_fit(repo: RepoId, token: str | None, context_tokens: int | None) -> GgufFit:
    """The fit of the file `repo` (`org/name:TAG`, or a bare GGUF-only repo) would download."""
    try:
        listing = repo_listing(repo.repo, token)
        choice = choose_gguf(repo.repo, list(listing.files), repo.tag)
    except ModelError as exc:
        raise WeightsUnknownError(exc.message) from exc
    source = HubRangeSource(repo.repo, choice.file.path, listing.revision, token)
    try:
        weights = WeightsSize(choice.file.size, "gguf-listing", {choice.tag: choice.file.size})
        return _fit(source, weights, context_tokens)
    finally:
        source.close()


def _fit(source: ByteSource, weights: WeightsSize, context_tokens: int | None) -> GgufFit:
    try:
        facts = model_facts(read_header(source), source.name)
    except HeaderReadError as exc:
        raise WeightsUnknownError(str(exc)) from exc
    context = context_within(facts.context_length, context_tokens)
    kv_cache = facts.kv_cache_bytes(context, GGUF_KV_DTYPE_BYTES)
    return GgufFit(facts, weights, estimate_from_parts(weights.total_bytes, kv_cache), context)
