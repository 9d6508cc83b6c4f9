"""Convert a GGUF file into a Hugging Face safetensors directory (fp32), with transformers.

The result is what a hub repository holds: config.json, model.safetensors,
generation_config.json, tokenizer.json and tokenizer_config.json carrying the chat template.
The conversion runs in a child process (`python -m manager.models.convert GGUF OUT`): its
~1 GiB peak memory, transformers' global state and its console output stay out of the caller.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from manager.models.errors import ConversionError

logger = logging.getLogger(__name__)

REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantize `gguf` into `out_dir` (created); raises ConversionError on any failure."""
    started = time.monotonic()
    command = [sys.executable, "-m", "manager.models.convert", str(gguf), str(out_dir)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        reason = lines[-1] if lines else f"the converter exited with status {result.returncode}"
        raise ConversionError(f"cannot convert {gguf.name}: {reason}")
    logger.info("converted %s in %.1f s", gguf.name, time.monotonic() - started)


def _memoize_gguf_parsing() -> None:
    """Parse the file once and build gguf's tensor-name map once, in this (child) process.

    NOTE: transformers' GGUF loading parses the whole file's metadata (a 49k-token vocabulary
    read item by item) in each of the tokenizer's, the config's and the weights'
    from_pretrained, and builds gguf's tensor-name map once per module while it maps the
    weights (397 times for SmolLM2): the conversion took ~37 s here, ~21 s without the
    repeats, to the same bytes. Both are pure functions of their arguments, and transformers
    imports both from the `gguf` module inside the functions that call them, so replacing
    them there reaches every caller.
    """
    import gguf

    gguf.GGUFReader = functools.cache(gguf.GGUFReader)  # type: ignore[misc,assignment]
    gguf.get_tensor_name_map = functools.cache(gguf.get_tensor_name_map)


def _convert(gguf: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _memoize_gguf_parsing()

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # NOTE: the weights are dequantized on load; without this, save_pretrained would record
    # the GGUF quantizer and readers would look for a quantized checkpoint.
    # NOTE: the ignore: transformers sets `hf_quantizer` in from_pretrained without declaring it
    # on PreTrainedModel, so mypy falls back to torch's Module.__setattr__ (Tensor | Module).
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _patch_for_older_readers(out_dir: Path) -> None:
    """Add what transformers 5 moved elsewhere, so transformers 4 and plain readers work."""
    config_path = out_dir / "config.json"
    config = _read_json(config_path)
    rope = config.get("rope_parameters")
    if "rope_theta" not in config and isinstance(rope, dict) and "rope_theta" in rope:
        config["rope_theta"] = rope["rope_theta"]
        _write_json(config_path, config)

    tokenizer_config_path = out_dir / "tokenizer_config.json"
    tokenizer_config = _read_json(tokenizer_config_path)
    template = out_dir / "chat_template.jinja"
    if "chat_template" not in tokenizer_config and template.is_file():
        tokenizer_config["chat_template"] = template.read_text()
    # NOTE: "TokenizersBackend" exists only in transformers 5; both versions load the same
    # tokenizer.json as PreTrainedTokenizerFast.
    if tokenizer_config.get("tokenizer_class") == "TokenizersBackend":
        tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast"
    for session_only in ("is_local", "local_files_only"):
        tokenizer_config.pop(session_only, None)
    _write_json(tokenizer_config_path, tokenizer_config)


def _read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    """Child-process entry: convert, check, patch; the last stderr line says what failed."""
    gguf, out_dir = Path(argv[0]), Path(argv[1])
    try:
        _convert(gguf, out_dir)
    # NOTE: transformers and gguf raise many unrelated types on a bad file (ValueError,
    # KeyError, struct.error, ...); all of them mean "this GGUF cannot be converted".
    except Exception as exc:  # noqa: BLE001
        first_line = (str(exc).strip().splitlines() or [""])[0]
        print(f"{type(exc).__name__}: {first_line}", file=sys.stderr)
        return 1
    missing = [name for name in REQUIRED_FILES if not (out_dir / name).is_file()]
    if missing:
        print(f"no {', '.join(missing)} was written", file=sys.stderr)
        return 1
    _patch_for_older_readers(out_dir)
    # NOTE: safetensors writes model.safetensors 0600; the store's files are world-readable
    # like the rest of a hub download (engines in containers may run as another user).
    for path in out_dir.iterdir():
        path.chmod(0o644)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
