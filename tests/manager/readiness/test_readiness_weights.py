"""Weights sized from safetensors headers and indexes, checked against safetensors itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from manager.readiness.weights import INDEX_FILE, local_weights


def tensor_bytes(path: Path) -> int:
    total = 0
    with safe_open(str(path), framework="numpy") as f:
        for name in f.keys():  # noqa: SIM118 (safe_open is not a dict)
            total += f.get_tensor(name).nbytes
    return total


def test_real_smollm2_headers_sum_to_its_tensors(smollm2_dir: Path) -> None:
    weights = local_weights(smollm2_dir)
    expected = sum(tensor_bytes(p) for p in smollm2_dir.glob("*.safetensors"))
    assert weights.source == "headers"
    assert weights.total_bytes == expected
    assert weights.bytes_by_dtype == {"F32": expected}


def write_shards(model_dir: Path) -> list[Path]:
    shard_1 = model_dir / "model-00001-of-00002.safetensors"
    shard_2 = model_dir / "model-00002-of-00002.safetensors"
    save_file({"a": np.zeros((3, 5), np.float32), "b": np.ones(7, np.float16)}, str(shard_1))
    save_file({"c": np.zeros((2, 2, 2), np.int8)}, str(shard_2))
    return [shard_1, shard_2]


def test_sharded_dir_uses_the_index_total(tmp_path: Path) -> None:
    shards = write_shards(tmp_path)
    total = sum(tensor_bytes(p) for p in shards)
    weight_map = {"a": shards[0].name, "b": shards[0].name, "c": shards[1].name}
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (tmp_path / INDEX_FILE).write_text(json.dumps(index))

    weights = local_weights(tmp_path)

    assert weights.source == "index"
    assert weights.total_bytes == total == 3 * 5 * 4 + 7 * 2 + 8


def test_index_without_total_falls_back_to_headers(tmp_path: Path) -> None:
    write_shards(tmp_path)
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": {}}))

    weights = local_weights(tmp_path)

    assert weights.source == "headers"
    assert weights.bytes_by_dtype == {"F32": 60, "F16": 14, "I8": 8}
