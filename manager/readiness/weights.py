"""The bytes of a model's weights, read from safetensors metadata without loading a tensor.

Local directory: `model.safetensors.index.json` `metadata.total_size` when present, else the
sum over every `*.safetensors` file of its header's tensor sizes (the header is an 8-byte
little-endian length followed by that many bytes of JSON). Remote repo: the hub's safetensors
metadata (parameter counts per dtype), fetched before anything is downloaded.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

INDEX_FILE = "model.safetensors.index.json"
# NOTE: bytes per element of the safetensors dtypes; sub-byte formats (F4, F6) are not
# listed because a parameter count alone cannot size their packing.
DTYPE_BYTES: dict[str, int] = {
    "F64": 8, "I64": 8, "U64": 8,
    "F32": 4, "I32": 4, "U32": 4,
    "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1,
}
# NOTE: a header larger than this is not a safetensors header (the format caps it at 100 MB).
_MAX_HEADER_BYTES = 100_000_000


class WeightsUnknownError(Exception):
    """The weights' size cannot be known; `str(exc)` says why in one line."""


@dataclass(frozen=True)
class WeightsSize:
    total_bytes: int
    source: str  # "index", "headers" or "hub"
    bytes_by_dtype: dict[str, int]  # empty when the source (an index) does not say


def read_header(path: Path) -> dict[str, dict[str, object]]:
    """The tensor entries of one safetensors file's JSON header (no `__metadata__`)."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise WeightsUnknownError(f"{path} is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", prefix)
        if length > _MAX_HEADER_BYTES:
            raise WeightsUnknownError(f"{path} has no valid safetensors header")
        raw = handle.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WeightsUnknownError(f"{path} has a corrupt safetensors header: {exc}") from exc
    header.pop("__metadata__", None)
    return header


def header_bytes_by_dtype(path: Path) -> dict[str, int]:
    """Tensor bytes of one file per dtype, from each entry's `data_offsets` span."""
    sizes: dict[str, int] = {}
    for name, entry in read_header(path).items():
        offsets = entry.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2):
            raise WeightsUnknownError(f"{path}: tensor {name!r} has no data_offsets")
        dtype = str(entry.get("dtype"))
        sizes[dtype] = sizes.get(dtype, 0) + int(offsets[1]) - int(offsets[0])
    return sizes


def local_weights(model_dir: Path) -> WeightsSize:
    index = model_dir / INDEX_FILE
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if isinstance(total, int):
            return WeightsSize(total, "index", {})
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise WeightsUnknownError(f"{model_dir} has no *.safetensors files")
    by_dtype: dict[str, int] = {}
    for path in files:
        for dtype, size in header_bytes_by_dtype(path).items():
            by_dtype[dtype] = by_dtype.get(dtype, 0) + size
    return WeightsSize(sum(by_dtype.values()), "headers", by_dtype)


def remote_weights(repo: str, token: str | None) -> WeightsSize:
    """Weights of a hub repo from its safetensors metadata (a few small HTTP range reads)."""
    # NOTE (issue 30): imported here: the hub's API client is a tenth of the supervisor's
    # boot, and a start of a model already in the store never asks the hub.
    from huggingface_hub import get_safetensors_metadata

    try:
        metadata = get_safetensors_metadata(repo, token=token or False, timeout=10)
    # NOTE: any failure means "size unknown": the hub client raises OSError subclasses
    # (HTTP errors, offline mode), transport errors of its HTTP library (which differs across
    # huggingface_hub releases) or NotASafetensorsRepoError; the caller reports the reason.
    except Exception as exc:
        raise WeightsUnknownError(f"the hub did not describe {repo}: {exc}") from exc
    by_dtype: dict[str, int] = {}
    for dtype, count in metadata.parameter_count.items():
        if dtype not in DTYPE_BYTES:
            raise WeightsUnknownError(f"{repo} stores weights as {dtype}, of unknown size")
        by_dtype[dtype] = count * DTYPE_BYTES[dtype]
    return WeightsSize(sum(by_dtype.values()), "hub", by_dtype)
