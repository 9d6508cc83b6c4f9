"""The CPU's model name and the instruction-set flags that pick a kernel path, from /proc/cpuinfo."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# NOTE: the flags the quantized and bf16 kernels (ours and llama.cpp's) choose between.
KERNEL_FLAGS = (
    "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512_vnni", "avx512_bf16", "avx512vbmi", "amx_tile", "amx_int8", "amx_bf16",
)  # fmt: skip
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _field(name: str) -> str:
    for line in CPUINFO.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return ""


def cpu_flags() -> tuple[str, ...]:
    """The KERNEL_FLAGS this CPU has, in KERNEL_FLAGS' order."""
    present = set(_field("flags").split())
    return tuple(flag for flag in KERNEL_FLAGS if flag in present)


def cpu_description() -> dict[str, object]:
    return {"model": _field("model name"), "flags": list(cpu_flags())}


def has_bf16() -> bool:
    return any(flag in cpu_flags() for flag in BF16_FLAGS)
