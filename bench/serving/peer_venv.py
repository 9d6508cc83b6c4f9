"""Peers live in their own virtual environments under bench/, installed from PyPI on first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
INSTALLED = ".installed"


class PeerUnavailable(RuntimeError):
    """A peer that cannot be installed or prepared here; the message says exactly why."""


def ensure_venv(
    name: str,
    specs: tuple[str, ...],
    remove: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Path:
    """bench/.venv-<name> with `specs` pip-installed (under `env`) and then `remove`
    uninstalled, once; its bin directory."""
    venv = BENCH / f".venv-{name}"
    marker = venv / INSTALLED
    if marker.exists() and marker.read_text() == "\n".join(specs):
        return venv / "bin"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # NOTE: keeps the venv out of git whatever the repository's .gitignore says.
    (venv / ".gitignore").write_text("*\n")
    print(f"  installing {' '.join(specs)} into {venv} (first use; minutes)", flush=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", *specs],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "WARNING: Location" not in line]
        raise PeerUnavailable(f"pip install {' '.join(specs)} failed: " + " | ".join(errors[-6:]))
    if remove:
        subprocess.run(
            [str(venv / "bin" / "pip"), "uninstall", "-q", "-y", *remove],
            check=True,
            capture_output=True,
        )
    marker.write_text("\n".join(specs))
    return venv / "bin"
