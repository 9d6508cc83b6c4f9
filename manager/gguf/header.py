"""The metadata key/value section of a GGUF file (v2 and v3), read from its first bytes only.

Layout: magic `GGUF`, version (uint32), tensor count (uint64), key/value count (uint64), then
each entry as key (uint64 length + UTF-8), value type (uint32) and value. Strings are a uint64
length and bytes; an array is an item type (uint32), a count (uint64) and the items. All little-
endian. The tensor infos that follow are not read: the weights' size is the file's size.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from manager.gguf.byte_source import ByteSource, HeaderReadError
from manager.gguf.value_types import SCALAR_FORMATS, GgufValueType

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# NOTE: the first read covers the keys readiness needs in every llama.cpp-written file (they
# come before the tokenizer's); later reads double, so a large vocabulary costs a few requests.
FIRST_READ_BYTES = 1 << 20
MAX_READ_BYTES = 16 << 20
# NOTE: a metadata section larger than this is not one a model writes (the largest
# vocabularies take ~10 MB); the cap stops a corrupt length from reading a whole file.
MAX_METADATA_BYTES = 256 << 20


@dataclass(frozen=True)
class SkippedArray:
    item_type: GgufValueType
    length: int


Scalar = int | float | bool | str
# NOTE: arrays of numbers are kept (per-layer head counts); arrays of strings or arrays (the
# tokenizer's vocabulary and merges) are skipped and kept as their length only.
Value = Scalar | tuple[int | float | bool, ...] | SkippedArray


@dataclass(frozen=True)
class GgufHeader:
    version: int
    tensor_count: int
    metadata: Mapping[str, Value]
    metadata_end: int  # the offset where the tensor infos begin: how many bytes were read

    def get(self, key: str) -> Value | None:
        return self.metadata.get(key)


def read_header(source: ByteSource) -> GgufHeader:
    """Parse the header of `source`; HeaderReadError when it is not a GGUF v2/v3 file."""
    cursor = _Cursor(source)
    if cursor.take(4) != MAGIC:
        raise HeaderReadError(f"{source.name} is not a GGUF file (no GGUF magic)")
    version = int(cursor.unpack("<I"))
    if version not in SUPPORTED_VERSIONS:
        raise HeaderReadError(
            f"{source.name} is GGUF version {version}; only versions 2 and 3 are read "
            "(a big-endian file shows a huge version)"
        )
    tensor_count = int(cursor.unpack("<Q"))
    kv_count = int(cursor.unpack("<Q"))
    metadata: dict[str, Value] = {}
    for _ in range(kv_count):
        key = cursor.string()
        metadata[key] = _value(cursor, _value_type(cursor, source.name))
    return GgufHeader(version, tensor_count, MappingProxyType(metadata), cursor.position)


def _value_type(cursor: _Cursor, name: str) -> GgufValueType:
    raw = int(cursor.unpack("<I"))
    try:
        return GgufValueType(raw)
    except ValueError as exc:
        raise HeaderReadError(
            f"{name}: unknown GGUF value type {raw} at {cursor.position}"
        ) from exc


def _value(cursor: _Cursor, kind: GgufValueType) -> Value:
    if kind is GgufValueType.STRING:
        return cursor.string()
    if kind is GgufValueType.ARRAY:
        item_type = _value_type(cursor, cursor.source.name)
        length = int(cursor.unpack("<Q"))
        if item_type in SCALAR_FORMATS:
            size = struct.calcsize(SCALAR_FORMATS[item_type])
            raw = cursor.take(size * length)
            return tuple(item[0] for item in struct.iter_unpack(SCALAR_FORMATS[item_type], raw))
        for _ in range(length):  # NOTE: an item that is itself an array reads its own type
            _value(cursor, item_type)
        return SkippedArray(item_type, length)
    value: Scalar = cursor.unpack(SCALAR_FORMATS[kind])
    return value


class _Cursor:
    """Sequential reads over a ByteSource, fetched in growing chunks and buffered."""

    def __init__(self, source: ByteSource) -> None:
        self.source = source
        self.position = 0
        self._start = 0
        self._buffer = b""
        self._next_read = FIRST_READ_BYTES

    def take(self, length: int) -> bytes:
        end = self.position + length
        if end > MAX_METADATA_BYTES:
            raise HeaderReadError(
                f"{self.source.name}: GGUF metadata runs past {MAX_METADATA_BYTES >> 20} MiB; "
                "the file is corrupt"
            )
        if end > self._start + len(self._buffer):
            self._fill(length)
        offset = self.position - self._start
        data = self._buffer[offset : offset + length]
        if len(data) < length:
            raise HeaderReadError(f"{self.source.name} ends inside its GGUF header (truncated)")
        self.position = end
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def string(self) -> str:
        length = int(self.unpack("<Q"))
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HeaderReadError(f"{self.source.name}: a GGUF string is not UTF-8") from exc

    def _fill(self, length: int) -> None:
        keep = self._buffer[self.position - self._start :]
        want = max(self._next_read, length - len(keep))
        fetched = self.source.read_at(self.position + len(keep), want)
        self._start, self._buffer = self.position, keep + fetched
        self._next_read = min(self._next_read * 2, MAX_READ_BYTES)
