"""The test GGUF files are what llama.cpp would write, and --model-path finds the file.

- The K-type quantizers of tests/support write blocks gguf's reference dequantizer reads back
  within each type's error.
- SmolLM2 re-quantized to Q4_1 from the store's fp32 weights (themselves the bundled Q4_1
  file dequantized) reproduces the bundled file's blocks exactly: the metadata, the tensor
  names and llama.cpp's q/k row permutation are the converter's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from engine.core.errors import UnsupportedModelError
from engine.gguf.location import gguf_file
from tests.support.gguf_files import bundled_smollm2_gguf, smollm2_gguf
from tests.support.k_quants import quantize_k

Q = GGMLQuantizationType


@pytest.mark.parametrize(
    ("qtype", "max_rms_error"), [(Q.Q4_K, 0.09), (Q.Q5_K, 0.045), (Q.Q6_K, 0.025)], ids=lambda v: getattr(v, "name", str(v))
)
def test_k_quantizers_write_blocks_gguf_reads_back(qtype: GGMLQuantizationType, max_rms_error: float) -> None:
    values = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32)
    values[3] = 0.0  # NOTE: an all-zero row has zero scales: no division by zero
    values[5] = -np.abs(values[5])  # NOTE: a row without positive values
    restored = dequantize(quantize_k(values, qtype), qtype)
    assert restored.shape == values.shape
    assert np.all(restored[3] == 0.0)
    assert np.sqrt(np.mean((restored - values) ** 2)) / values.std() <= max_rms_error


def test_requantized_q4_1_equals_the_bundled_file(smollm2_dir: Path) -> None:
    bundled = GGUFReader(bundled_smollm2_gguf(), "r")
    ours = GGUFReader(smollm2_gguf(Q.Q4_1, smollm2_dir), "r")
    theirs = {tensor.name: tensor for tensor in bundled.tensors}
    assert {tensor.name for tensor in ours.tensors} == set(theirs)
    assert {key: f.contents() for key, f in ours.fields.items() if not key.startswith("GGUF.")} == {
        key: f.contents() for key, f in bundled.fields.items() if not key.startswith("GGUF.")
    }
    for tensor in ours.tensors:
        if theirs[tensor.name].tensor_type == tensor.tensor_type:  # NOTE: the bundled embedding is Q8_0
            assert np.array_equal(tensor.data, theirs[tensor.name].data), tensor.name


def test_model_path_names_a_gguf_file_or_a_directory_of_one(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "m.Q4_0.gguf").write_bytes(b"")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    (tmp_path / "hf" / "m.gguf").write_bytes(b"")
    assert gguf_file(tmp_path / "one") == tmp_path / "one" / "m.Q4_0.gguf"
    assert gguf_file(tmp_path / "one" / "m.Q4_0.gguf") == tmp_path / "one" / "m.Q4_0.gguf"
    assert gguf_file(tmp_path / "hf") is None  # NOTE: config.json: a Hugging Face directory
    with pytest.raises(UnsupportedModelError, match="does not exist"):
        gguf_file(tmp_path / "missing.gguf")
