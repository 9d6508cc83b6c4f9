"""Router settings, and the admin token file (created 0600 on first use)."""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from router.routing_policy import RoutingPolicyName

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_BODY_BYTES = 32 * 1024 * 1024
TOKEN_ENV = "GOMGR_ROUTER_TOKEN_FILE"


@dataclass(frozen=True)
class RouterConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    ollama_port: int | None = None  # a second listener, e.g. 11434 for clients that assume Ollama
    admin_token_file: Path | None = None  # None: $GOMGR_ROUTER_TOKEN_FILE, else the XDG default
    api_keys: tuple[str, ...] = ()  # empty: clients need no key
    cors_origins: tuple[str, ...] = ()  # empty: no CORS headers
    max_body_bytes: int = MAX_BODY_BYTES
    health_interval_s: float = 0.5
    health_timeout_s: float = 2.0
    connect_timeout_s: float = 5.0
    # NOTE (issue 23): with a loader, requests held while their model loads: per model at
    # most this many (429 beyond), streamed ones kept alive by an SSE comment this often.
    max_held_per_model: int = 64
    loading_comment_s: float = 2.0
    # NOTE: streamed chats held while loading get `reasoning_content` progress chunks instead
    # of the comments, which chat UIs that show reasoning display (llama-swap's sendLoadingState).
    loading_progress: bool = False
    backends_file: Path | None = None  # backends registered at start-up and kept (pinned)
    # NOTE (issue 27): how a model's replicas share its requests (router/routing_policy.py).
    routing_policy: RoutingPolicyName = RoutingPolicyName.CACHE_AWARE
    # NOTE: both or neither: the front door then speaks HTTPS only (PEM files).
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None

    def exposure_problem(self) -> str | None:
        """Why the front door may not listen as configured; None when it may.

        Beyond loopback the router is reachable by others, so it needs client keys and TLS,
        or every prompt and key crosses the network in clear to anyone who asks.
        """
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            return "give both --tls-certfile and --tls-keyfile, or neither"
        for path in (self.tls_certfile, self.tls_keyfile):
            if path is not None and not path.is_file():
                return f"TLS file {path} does not exist"
        if _is_loopback(self.host):
            return None
        if not self.api_keys or self.tls_certfile is None:
            return (
                f"refusing to listen on {self.host} without an API key and TLS: add --api-key "
                "and --tls-certfile/--tls-keyfile, or listen on 127.0.0.1"
            )
        return None

    def token_path(self) -> Path:
        if self.admin_token_file is not None:
            return self.admin_token_file
        if env := os.environ.get(TOKEN_ENV):
            return Path(env)
        state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(state) / "gomgr" / "router.token"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # NOTE: a host name other than localhost may resolve to anything


def load_or_create_token(path: Path) -> str:
    """The admin token in `path`; a new random one is written (mode 0600) if the file is absent.

    NOTE: O_EXCL: a token already handed out is never overwritten; an existing file that
    others can read is refused rather than trusted.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise PermissionError(f"{path} is readable by others (mode {mode:o}); chmod 600 it")
        token = path.read_text().strip()
        if not token:
            raise ValueError(f"{path} is empty; delete it to get a new token")
        return token
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token
