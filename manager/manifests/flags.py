"""The engine command-line flags an effective manifest implies."""

from __future__ import annotations

from pathlib import Path

from manager.manifests.effective import EffectiveManifest

# NOTE: vLLM spells some parsers differently; its Qwen 2.5 tool format is "hermes".
_VLLM_TOOL_CALL_PARSERS = {
    "qwen25": "hermes",
    "hermes": "hermes",
    "llama3": "llama3_json",
    "mistral": "mistral",
    "pythonic": "pythonic",
}
_VLLM_REASONING_PARSERS = {"qwen3": "qwen3", "deepseek-r1": "deepseek_r1"}
# NOTE: SGLang's (and gomgr's engine's) --tp-size and both engines' --tensor-parallel-size.
_TP_FLAGS = ("--tp-size", "--tensor-parallel-size")


def to_engine_flags(effective: EffectiveManifest, model_dir: Path | str) -> list[str]:
    """Flags for the engine at `model_dir` (as the engine sees it, e.g. inside a container).

    "gomgr" and "sglang" take SGLang's names (`python -m engine.launch_server` and
    `python3 -m sglang.launch_server`); "vllm" takes vLLM's api_server names. Host and port
    are the runtime's to add. `--trust-remote-code` always: a manifest chose the model.
    """
    if effective.engine == "vllm":
        return _vllm_flags(effective, str(model_dir))
    flags = [
        "--model-path", str(model_dir), "--served-model-name", effective.served_name,
        "--trust-remote-code",
    ]
    if effective.context_length is not None:
        flags += ["--context-length", str(effective.context_length)]
    if effective.tool_call_parser is not None:
        flags += ["--tool-call-parser", effective.tool_call_parser]
    if effective.reasoning_parser is not None:
        flags += ["--reasoning-parser", effective.reasoning_parser]
    return flags + list(effective.engine_args)


def _vllm_flags(effective: EffectiveManifest, model_dir: str) -> list[str]:
    flags = ["--model", model_dir, "--served-model-name", effective.served_name, "--trust-remote-code"]
    if effective.context_length is not None:
        flags += ["--max-model-len", str(effective.context_length)]
    if effective.tool_call_parser is not None:
        parser = _VLLM_TOOL_CALL_PARSERS[effective.tool_call_parser]
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    if effective.reasoning_parser is not None:
        flags += ["--reasoning-parser", _VLLM_REASONING_PARSERS[effective.reasoning_parser]]
    return flags + list(effective.engine_args)


def tensor_parallel_size(engine_args: tuple[str, ...]) -> int:
    """The GPUs an engine shards its model over, from a manifest's engine_args (1: none given).

    NOTE: a value that is no positive integer counts as 1 here; the engine refuses it at start.
    """
    size = "1"
    for i, arg in enumerate(engine_args):
        name, _, value = arg.partition("=")
        if name in _TP_FLAGS:
            size = value if value else (engine_args[i + 1] if i + 1 < len(engine_args) else "1")
    return int(size) if size.isdigit() and int(size) > 0 else 1
