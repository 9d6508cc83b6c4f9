"""The engine's shape as issue #24 left it: API surfaces that stand alone, files of one concept.

- A surface package under ``engine/server/`` (``openai``, ``anthropic``, ``ollama``) imports no
  other surface's package: what several surfaces share lives in ``server/generation/`` (the
  generation service) and ``server/chat/`` (templating, tool calls, output parsing).
- No engine module passes 350 lines: past that it holds two concepts.
"""

from __future__ import annotations

from pathlib import Path

from tests.engine.test_import_layers import ENGINE_DIR, _imported_modules

SERVER_DIR = ENGINE_DIR / "server"
SURFACES = ("openai", "anthropic", "ollama")
MAX_LINES = 350


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_surface_imports_another_surface() -> None:
    crossings = []
    for surface in SURFACES:
        others = tuple(f"engine.server.{other}" for other in SURFACES if other != surface)
        for path in sorted((SERVER_DIR / surface).rglob("*.py")):
            imported = set(_imported_modules(path, _module_name(path)))
            crossings += [
                f"{_module_name(path)} → {name}"
                for name in sorted(imported)
                if name.startswith(others) and name.count(".") >= 2
            ]
    assert not crossings, "surfaces import one another: " + ", ".join(crossings)


def test_no_engine_module_passes_350_lines() -> None:
    long = {
        str(path.relative_to(ENGINE_DIR)): lines
        for path in sorted(ENGINE_DIR.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"engine modules over {MAX_LINES} lines: {long}"
