"""Where the manager keeps its state: `${GOMGR_STATE_DIR:-${XDG_STATE_HOME:-~/.local/state}/gomgr}`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STATE_DIR_ENV = "GOMGR_STATE_DIR"
ROUTER_PORT_ENV = "GOMGR_ROUTER_PORT"
ROUTER_TOKEN_ENV = "GOMGR_ROUTER_TOKEN_FILE"
DEFAULT_ROUTER_HOST = "127.0.0.1"
DEFAULT_ROUTER_PORT = 8000


@dataclass(frozen=True)
class StatePaths:
    """The layout under one state root.

    <root>/engines/<id>.json   one engine's record (see records.py)
    <root>/engines/<id>.pid    its process id (process runtime)
    <root>/engines/<id>.log    its stdout and stderr (kept after a crash, removed on stop)
    <root>/router/             the background router: router.json, router.log
    <root>/router.token        the router's admin token (unless $GOMGR_ROUTER_TOKEN_FILE)
    """

    root: Path

    @classmethod
    def from_env(cls) -> StatePaths:
        if explicit := os.environ.get(STATE_DIR_ENV):
            return cls(Path(explicit).expanduser())
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return cls(Path(base).expanduser() / "gomgr")

    @property
    def engines_dir(self) -> Path:
        return self.root / "engines"

    @property
    def router_dir(self) -> Path:
        return self.root / "router"

    @property
    def router_token_file(self) -> Path:
        # NOTE: with neither variable set this equals the router's own default, so a router
        # started by hand (`gomgr router serve`) and the manager agree on the token.
        if env := os.environ.get(ROUTER_TOKEN_ENV):
            return Path(env).expanduser()
        return self.root / "router.token"

    def ensure(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path


def router_port() -> int:
    """The router's port: $GOMGR_ROUTER_PORT, else 8000."""
    value = os.environ.get(ROUTER_PORT_ENV)
    if not value:
        return DEFAULT_ROUTER_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ValueError(f"{ROUTER_PORT_ENV}={value!r} is not a port number")
    return int(value)
