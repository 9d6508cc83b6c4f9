"""Every system the serving benchmark can run, by section (`python -m bench.serving --section`):
`fp32` (every engine on the converted SmolLM2 in fp32, with the prefix and chat workloads) and
`quantized` (GGUF files, ours against llama.cpp's server; random prompts only)."""

from __future__ import annotations

from bench.serving.quantized_systems import QUANTIZED_SYSTEMS
from bench.serving.systems import SYSTEMS, System

SECTIONS: dict[str, dict[str, System]] = {"fp32": SYSTEMS, "quantized": QUANTIZED_SYSTEMS}
ALL_SYSTEMS: dict[str, System] = {**SYSTEMS, **QUANTIZED_SYSTEMS}
# NOTE: the shared-prefix and multi-turn workloads measure the radix cache, which the
# quantized section does not compare.
CHAT_WORKLOADS = {"fp32": True, "quantized": False}
