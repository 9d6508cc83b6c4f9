"""The value types of a GGUF metadata entry (the GGUF spec, v2 and v3) and their fixed sizes."""

from __future__ import annotations

from enum import IntEnum


class GgufValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# NOTE: struct formats (little-endian) of the fixed-size types; STRING and ARRAY have none.
SCALAR_FORMATS: dict[GgufValueType, str] = {
    GgufValueType.UINT8: "<B",
    GgufValueType.INT8: "<b",
    GgufValueType.UINT16: "<H",
    GgufValueType.INT16: "<h",
    GgufValueType.UINT32: "<I",
    GgufValueType.INT32: "<i",
    GgufValueType.FLOAT32: "<f",
    GgufValueType.BOOL: "<?",
    GgufValueType.UINT64: "<Q",
    GgufValueType.INT64: "<q",
    GgufValueType.FLOAT64: "<d",
}
