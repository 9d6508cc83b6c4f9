"""Where manifests live: the built-ins shipped as the `manifests` package, and the user's."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

CONFIG_DIR_ENV = "GOMGR_CONFIG_DIR"


def builtin_dir() -> Path:
    """The directory of the built-in `*.yaml` files (the top-level `manifests` package)."""
    # NOTE: the wheel installs them as package data and the editable install maps the
    # package to the repo's manifests/, so both are a real directory on disk.
    return Path(str(files("manifests")))


def config_dir() -> Path:
    """${GOMGR_CONFIG_DIR:-${XDG_CONFIG_HOME:-~/.config}/gomgr}."""
    if override := os.environ.get(CONFIG_DIR_ENV):
        return Path(override).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "gomgr"


def user_dir() -> Path:
    """The directory of the user's override files ("engine variants")."""
    return config_dir() / "manifests"
