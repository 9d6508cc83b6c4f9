"""Checks shared by the CLI tests of the model store: one error line, nothing left behind."""

from __future__ import annotations

from pathlib import Path


def assert_one_error_line(stdout: str, stderr: str) -> str:
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


def store_leftovers(store: Path) -> list[str]:
    """Model dirs (non-hidden) and work dirs (.tmp-*): a failed pull must leave neither."""
    if not store.exists():
        return []
    return sorted(
        p.name for p in store.iterdir() if not p.name.startswith(".") or p.name.startswith(".tmp-")
    )
