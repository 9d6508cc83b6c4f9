"""The `--gpus` choice of a start: auto, all, none, or the GPU indices it pins (`0,1`)."""

from __future__ import annotations

GPU_WORDS = ("auto", "all", "none")
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def check_gpus(value: str) -> str:
    """`value` normalised ("0, 1" → "0,1"); ValueError with one readable line if it is neither
    a word of GPU_WORDS nor comma-separated GPU indices."""
    if value in GPU_WORDS:
        return value
    parts = [p.strip() for p in value.split(",")]
    if not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(
            f"{value!r}: give auto, all, none or GPU indices as nvidia-smi numbers them, e.g. 0,1"
        )
    return ",".join(str(int(p)) for p in parts)


def gpu_pins(gpus: str) -> tuple[int, ...]:
    """The GPU indices `gpus` pins the engine to; none for auto, all and none."""
    return () if gpus in GPU_WORDS else tuple(int(p) for p in check_gpus(gpus).split(","))
