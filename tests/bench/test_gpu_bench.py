"""bench/gpu_bench.py without a GPU: the roofline's byte count, the shapes, the arguments,
the report from a canned result, and the whole bench on CPU with a tiny shape (the plumbing;
the GPU numbers come from bench/gpu_check.sh on a CUDA machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.gpu_bench import main, markdown, parse_args, summary_lines
from bench.gpu_models import SHAPES, checkpoint_tensors
from bench.gpu_roofline import decode_step, weight_bytes_read


def _meta(named: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, torch.Tensor]]:
    return [(name, torch.empty(shape, dtype=torch.bfloat16, device="meta")) for name, shape in named]


LAYER = [("layers.0.qkv_proj.weight", (48, 16)), ("layers.0.norm.weight", (16,))]


def test_untied_embedding_reads_only_the_batchs_rows_and_the_head_whole() -> None:
    params = _meta([("embed_tokens.weight", (100, 16)), *LAYER, ("lm_head.weight", (100, 16))])
    layer_bytes = (48 * 16 + 16) * 2
    assert weight_bytes_read(params, 1) == 16 * 2 + layer_bytes + 100 * 16 * 2
    assert weight_bytes_read(params, 4) == 4 * 16 * 2 + layer_bytes + 100 * 16 * 2
    # NOTE: a batch larger than the vocabulary still reads each row at most once.
    assert weight_bytes_read(params, 500) == 100 * 16 * 2 + layer_bytes + 100 * 16 * 2


def test_tied_embedding_is_the_head_read_whole_once() -> None:
    params = _meta([("embed_tokens.weight", (100, 16)), *LAYER])
    assert weight_bytes_read(params, 1) == weight_bytes_read(params, 64) == (100 * 16 + 48 * 16 + 16) * 2


def test_roofline_adds_the_kv_at_the_mean_context() -> None:
    params = _meta([("embed_tokens.weight", (100, 16)), *LAYER])
    step = decode_step(params, batch_size=2, mean_kv_len=10.5, kv_bytes_per_token=8)
    assert step.kv_bytes == 2 * 10.5 * 8
    assert step.total_bytes == weight_bytes_read(params, 2) + 168
    assert step.roofline_tok_s(1e9) == pytest.approx(2 * 1e9 / step.total_bytes)


def test_shapes_match_the_published_models() -> None:
    """8.03 B parameters with an untied head (Llama-3-8B), 0.49 B with a tied one (Qwen2.5-0.5B);
    at batch 1 the 8B's step reads its weights less all but one embedding row."""
    llama = checkpoint_tensors(SHAPES["8b"].config)
    qwen = checkpoint_tensors(SHAPES["0.5b"].config)
    assert sum(s.numel() for _, s in llama) == 8_030_261_248
    assert sum(s.numel() for _, s in qwen) == 494_032_768
    assert "lm_head.weight" in dict(llama) and "lm_head.weight" not in dict(qwen)
    params = [(name, torch.empty(s, dtype=torch.bfloat16, device="meta")) for name, s in llama]
    assert weight_bytes_read(params, 1) == (8_030_261_248 - 128_255 * 4096) * 2
    assert SHAPES["8b"].attention_heads == (32, 8, 128)
    assert SHAPES["0.5b"].attention_heads == (14, 2, 64)


def test_arguments() -> None:
    config = parse_args([])
    assert [s.key for s in config.shapes] == ["8b", "0.5b"]
    assert config.device.type == "cuda" and config.batch_sizes == (1, 32, 128)
    assert [s.key for s in parse_args(["--shapes", "0.5b", "--device", "cpu"]).shapes] == ["0.5b"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shapes", "70b"], "unknown shape(s) 70b; known: 8b, 0.5b, tiny"),
        (["--batch-sizes", "1,x"], "expected comma-separated integers"),
        (["--decode-steps", "0"], "must be >= 1"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


CANNED: dict[str, Any] = {
    "device": "NVIDIA H200", "torch": "2.11.0+cu130", "copy_bandwidth_gb_s": 4249.0,
    "config": {"prompt_len": 256, "decode_steps": 128},
    "models": [{
        "shape": "8b", "model": "Llama-3-8B", "architecture": "LlamaForCausalLM", "weight_gb": 16.06,
        "dtype": "bfloat16", "attention_backend": "TritonAttention", "cuda_graphs": True,
        "ready_s": {"eager": 2.5, "cuda_graphs": 4.0, "capture": 1.5},
        "throughput": [{
            "batch": 1, "prefill_tok_s": 9000.0, "decode_tok_s": 200.0, "decode_eager_tok_s": 40.0,
            "step_read_gb": 15.05, "roofline_tok_s": 282.3, "roofline_ratio": 0.7085,
        }],
    }],
    "kernels": [{
        "model": "8b", "kernel": "decode", "shape": "B=1 L=4096", "triton_ms": 0.02,
        "sdpa_dense_ms": 0.01, "gather_sdpa_ms": 0.04,
    }],
    "prefill": [{"kernel": "flash", "tokens": 4096, "ms": 0.25}],
}


def test_report_from_a_canned_result() -> None:
    text = markdown(CANNED)
    assert "copy bandwidth 4,249 GB/s; prompt 256 tokens, 128 decode steps." in text
    assert "Ready 4.00 s after the runner's build starts with CUDA graphs, 2.50 s without (capture 1.50 s)" in text
    assert "| 1 | 9,000 | 200 | 40 | 15.050 | 282 | 0.71 |" in text
    assert "| 8b | decode | B=1 L=4096 | 0.020 | 0.010 | 0.040 | 0.50x | 2.00x |" in text
    assert "| kernel | tokens | ms |\n|---|---|---|\n| flash | 4096 | 0.250 |" in text
    assert summary_lines(CANNED) == [
        "bench: NVIDIA H200: copy bandwidth 4,249 GB/s",
        "bench: 8b: decode tok/s (of roofline) B=1 200 (71%); ready 4.0 s with CUDA graphs, 2.5 s without (capture 1.5 s)",
        "bench: 8b: attention, triton vs SDPA dense: decode B=1 L=4096 0.50x",
        "bench: no-prefix prefill: 1 rows (table above)",
    ]


def test_the_bench_runs_on_cpu_with_the_tiny_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gpu.json"
    argv = ["--device", "cpu", "--shapes", "tiny", "--batch-sizes", "1,3", "--prompt-len", "8", "--decode-steps", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (model,) = result["models"]
    assert model["shape"] == "tiny" and [t["batch"] for t in model["throughput"]] == [1, 3]
    assert model["ready_s"]["capture"] is None and model["ready_s"]["eager"] > 0
    assert all(t["decode_tok_s"] > 0 and 0 < t["roofline_ratio"] for t in model["throughput"])
    assert result["kernels"] == [] and result["prefill"] == []
    printed = capsys.readouterr().out
    assert "bench: tiny: decode tok/s (of roofline) B=1 " in printed
    assert "| 3 |" in printed


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the bench itself")
def test_without_cuda_the_gpu_bench_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--shapes", "tiny"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
