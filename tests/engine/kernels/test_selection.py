"""Which attention backend and which captured CUDA-graph size a batch gets (no kernels run)."""

from __future__ import annotations

import pytest
import torch

from engine.attention import (
    available_attention_backends,
    create_attention_backend,
    default_attention_backend,
)
from engine.attention import base as attention_base
from engine.kernels.triton import triton_available
from engine.runtime.cuda_graph_runner import capture_batch_sizes, padded_batch_size


def test_the_cpu_kernel_backend_is_the_default_on_cpu() -> None:
    assert default_attention_backend(torch.device("cpu")) == "cpu"


def test_triton_is_the_default_on_cuda_when_installed() -> None:
    expected = "triton" if triton_available() else "torch_native"
    assert default_attention_backend(torch.device("cuda")) == expected


def test_triton_is_listed_without_importing_it_and_a_missing_package_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert {"cpu", "torch_native", "triton"} <= set(available_attention_backends())
    monkeypatch.setitem(attention_base._OPTIONAL, "missing", "engine.attention.no_such_backend")
    with pytest.raises(ValueError, match="'missing' needs the 'engine.attention.no_such_backend'"):
        create_attention_backend("missing", 4, 2, 16)


def test_capture_sizes_cover_every_batch_up_to_the_request_limit() -> None:
    assert capture_batch_sizes(1) == [1]
    assert capture_batch_sizes(8) == [1, 2, 4, 8]
    assert capture_batch_sizes(40) == [1, 2, 4, 8, 16, 32, 40]
    assert capture_batch_sizes(128) == [1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128]
    assert capture_batch_sizes(1000)[-1] == 256


def test_a_batch_pads_to_the_smallest_captured_size_that_holds_it() -> None:
    sizes = capture_batch_sizes(40)
    assert [padded_batch_size(b, sizes) for b in (1, 3, 8, 9, 33, 40)] == [1, 4, 8, 16, 40, 40]
    assert padded_batch_size(41, sizes) is None
