"""Which GGUF file, if any, a ``--model-path`` names.

A path ending in ``.gguf`` is that file; a directory holding exactly one ``*.gguf`` and no
``config.json`` is that file too. A directory with ``config.json`` is a Hugging Face
(safetensors) model directory, whatever else it holds.
"""

from __future__ import annotations

from pathlib import Path

from engine.core.errors import UnsupportedModelError


def gguf_file(model_path: str | Path) -> Path | None:
    """The GGUF file ``model_path`` names, or None for a Hugging Face model directory."""
    path = Path(model_path)
    if path.suffix == ".gguf" and not path.is_dir():
        if not path.is_file():
            raise UnsupportedModelError(f"{path} does not exist")
        return path
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(path.glob("*.gguf"))
    if len(found) > 1:
        names = ", ".join(f.name for f in found)
        raise UnsupportedModelError(f"{path} holds several GGUF files ({names}); name one with --model-path")
    return found[0] if found else None
