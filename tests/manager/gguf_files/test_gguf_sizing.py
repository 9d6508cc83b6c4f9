"""Readiness' numbers for a GGUF: the file's size as weights, the header's shape as KV cache."""

from __future__ import annotations

import json
from pathlib import Path

from manager.readiness.gguf_fit import GGUF_KV_DTYPE_BYTES, local_gguf_fit
from manager.readiness.memory import (
    OVERHEAD_FIXED_BYTES,
    OVERHEAD_WEIGHTS_FRACTION,
    kv_cache_bytes,
)
from manager.readiness.start import check_for_start
from tests.support.tiny_gguf import write_tiny_gguf


def test_tiny_gguf_numbers(tmp_path: Path) -> None:
    path = write_tiny_gguf(
        tmp_path / "tiny-Q8_0.gguf", layers=4, heads=8, kv_heads=2, embedding=256, context=1024
    )
    fit = local_gguf_fit(path, None)
    size = path.stat().st_size
    assert fit.context_tokens == 1024  # the default 8192, capped by the model's own context
    assert fit.weights.total_bytes == size
    kv = 4 * 2 * (32 + 32) * GGUF_KV_DTYPE_BYTES * 1024  # layers * kv heads * (K + V) * ...
    assert fit.memory.kv_cache == kv
    overhead = OVERHEAD_FIXED_BYTES + int(size * OVERHEAD_WEIGHTS_FRACTION)
    assert fit.memory.total == size + kv + overhead
    assert local_gguf_fit(path, 100).memory.kv_cache == kv * 100 // 1024


def test_smollm2_gguf_kv_cache_equals_the_safetensors_rule(
    smollm2_gguf: Path, smollm2_dir: Path
) -> None:
    """The same model sized from its GGUF header and from its converted config.json."""
    fit = local_gguf_fit(smollm2_gguf, None)
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert fit.facts.architecture == "llama" and fit.facts.block_count == 30
    assert fit.context_tokens == 8192
    assert fit.memory.kv_cache == kv_cache_bytes(config, 8192, GGUF_KV_DTYPE_BYTES)
    assert fit.weights.total_bytes == smollm2_gguf.stat().st_size


def test_readiness_of_a_local_gguf_file(smollm2_gguf: Path) -> None:
    report = check_for_start(str(smollm2_gguf), None, "process", None, None)
    assert [b.id for b in report.blockers if b.id.startswith("vram")] == []
    assert report.weights is not None and report.weights.total_bytes == smollm2_gguf.stat().st_size
    assert report.memory is not None and report.context_tokens == 8192
