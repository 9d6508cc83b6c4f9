"""A GGUF file's header: its metadata and where each tensor lies, read without its arrays of strings.

NOTE: gguf's ``GGUFReader`` builds numpy views of every element of every metadata array:
SmolLM2's 49k tokens and 49k merges cost ~160 MiB for a moment and a second or more, in each
process that opens the file. The engine needs the hyperparameters and the tensor table only
(the tokenizer is transformers' to build, once, in ``hf_view``), so this walks the header
and skips arrays of strings. The layout: magic, version, tensor count, metadata count; the
metadata (key, type, value); the tensor infos (name, dimensions, type, offset); the tensor
data from the next multiple of ``general.alignment`` (32 by default).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from engine.core.errors import UnsupportedModelError

_MAGIC = b"GGUF"
_SCALARS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


@dataclass(frozen=True)
class SkippedStrings:
    """A metadata array of strings, left unread (the tokenizer's tokens, merges)."""

    count: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # GGML's order: the fastest-varying dimension first
    offset: int  # from the start of the file
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]

    def float_values(self, name: str) -> list[float]:
        """The values of the small F32 tensor ``name`` (``rope_freqs.weight``), read from the file."""
        info = self.tensors[name]
        if info.qtype != GGMLQuantizationType.F32:
            raise UnsupportedModelError(f"GGUF tensor {name} is {info.qtype.name}, expected F32")
        with self.path.open("rb") as file:
            file.seek(info.offset)
            raw = file.read(info.nbytes)
        return [float(v) for v in struct.unpack(f"<{info.nbytes // 4}f", raw)]


class _Cursor:
    def __init__(self, buffer: mmap.mmap) -> None:
        self.buffer = buffer
        self.at = 0

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buffer, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        text = self.buffer[self.at : self.at + length].decode("utf-8", errors="replace")
        self.at += length
        return text

    def value(self, kind: GGUFValueType) -> Any:
        if kind == GGUFValueType.STRING:
            return self.string()
        if kind == GGUFValueType.ARRAY:
            item = GGUFValueType(self.unpack("<I"))
            count = self.unpack("<Q")
            if item == GGUFValueType.STRING:
                for _ in range(count):
                    length = self.unpack("<Q")  # NOTE: apart: ``at += unpack()`` would read ``at`` first
                    self.at += length
                return SkippedStrings(count)
            return [self.value(item) for _ in range(count)]
        return self.unpack(_SCALARS[kind])


def read_header(path: Path) -> GGUFHeader:
    """The header of the GGUF file at ``path``; raises for a file that is not GGUF v2/v3."""
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        if buffer[:4] != _MAGIC:
            raise UnsupportedModelError(f"{path.name} is not a GGUF file")
        cursor = _Cursor(buffer)
        cursor.at = 4
        version = cursor.unpack("<I")
        if version not in (2, 3):
            raise UnsupportedModelError(f"{path.name} is GGUF version {version}; supported: 2, 3")
        tensor_count, field_count = cursor.unpack("<Q"), cursor.unpack("<Q")
        metadata: dict[str, Any] = {}
        for _ in range(field_count):
            key = cursor.string()
            metadata[key] = cursor.value(GGUFValueType(cursor.unpack("<I")))
        infos = []
        for _ in range(tensor_count):
            name = cursor.string()
            dims = tuple(cursor.unpack("<Q") for _ in range(cursor.unpack("<I")))
            infos.append((name, dims, GGMLQuantizationType(cursor.unpack("<I")), cursor.unpack("<Q")))
        alignment = int(metadata.get("general.alignment", 32))
        data_start = -(-cursor.at // alignment) * alignment
    tensors = {}
    for name, dims, qtype, offset in infos:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        count = 1
        for dim in dims:
            count *= dim
        tensors[name] = TensorInfo(name, qtype, dims, data_start + offset, count // block_size * type_size)
    return GGUFHeader(path, metadata, tensors)
