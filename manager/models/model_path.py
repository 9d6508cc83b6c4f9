"""What an engine is given as `--model-path`: a model directory, or one GGUF file.

A GGUF file carries its config, tokenizer and chat template in its metadata, so it is served
as it is. Where a directory must be mounted (a container), a GGUF file's own directory is.
"""

from __future__ import annotations

from pathlib import Path

from manager.gguf.tags import GGUF_SUFFIX

CONFIG_FILE = "config.json"
# NOTE: what `gomgr start` and `models pull` take for a path, not a repo id.
PATH_PREFIXES = ("/", "./", "../", "~")


def is_gguf_file(path: Path) -> bool:
    return path.name.lower().endswith(GGUF_SUFFIX)


def model_path_in(directory: Path) -> Path:
    """The model path of a store directory: its one GGUF file where it holds no config.json
    (a tagged model, `org/name:Q4_K_M`), else the directory itself."""
    if (directory / CONFIG_FILE).is_file() or not directory.is_dir():
        return directory
    ggufs = [p for p in directory.glob("*") if is_gguf_file(p) and p.is_file()]
    return ggufs[0] if len(ggufs) == 1 else directory


def mount_dir(model_path: Path) -> Path:
    """The directory a container mounts to reach `model_path`."""
    return model_path.parent if is_gguf_file(model_path) else model_path


def path_inside(model_path: Path, mounted_at: str) -> str:
    """`model_path` as the engine sees it where mount_dir(model_path) is at `mounted_at`."""
    return f"{mounted_at}/{model_path.name}" if is_gguf_file(model_path) else mounted_at
