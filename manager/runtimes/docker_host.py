"""Where the Docker daemon is: $DOCKER_HOST, else the current `docker context`, else the
default socket; and whether it is remote (tcp:// or ssh://), so engines are reached there.

Kept apart from runtimes/docker.py so that a command can tell "no daemon can be there"
without importing the SDK (about 0.1 s of start-up); `docker_client` imports it on use.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from docker import DockerClient

# NOTE: the docker SDK's own default when DOCKER_HOST is unset and no context is chosen.
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
UNIX_SCHEME = "unix://"
REMOTE_SCHEMES = ("tcp", "ssh", "http", "https")
# NOTE: the host name engines on a remote daemon are reached at, where it is not the one in
# DOCKER_HOST (NAT, an ssh alias, a tunnel); `gomgr start --engine-host` sets it too.
ENGINE_HOST_ENV = "GOMGR_ENGINE_HOST"
DEFAULT_CONTEXT = "default"


@dataclass(frozen=True)
class DockerContext:
    """A `docker context` other than "default": its name and daemon address."""

    name: str
    host: str


def current_context() -> DockerContext | None:
    """The context the docker CLI would use ($DOCKER_CONTEXT, else config.json's
    currentContext) where it is not "default"; None where $DOCKER_HOST overrides contexts."""
    if os.environ.get("DOCKER_HOST"):
        return None
    config_dir = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    name = os.environ.get("DOCKER_CONTEXT") or _config_context(config_dir / "config.json")
    if not name or name == DEFAULT_CONTEXT:
        return None
    # NOTE: the CLI's layout: contexts/meta/<sha256 of the name>/meta.json.
    meta = config_dir / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest() / "meta.json"
    try:
        host = json.loads(meta.read_text())["Endpoints"]["docker"]["Host"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return DockerContext(name, str(host))


def _config_context(config: Path) -> str | None:
    try:
        return str(json.loads(config.read_text()).get("currentContext") or "") or None
    except (OSError, ValueError, AttributeError):
        return None


def docker_host() -> str:
    context = current_context()
    return os.environ.get("DOCKER_HOST") or (context.host if context else DEFAULT_DOCKER_HOST)


def daemon_socket_missing() -> bool:
    """True when the daemon address is a unix socket that does not exist (no daemon there)."""
    host = docker_host()
    return host.startswith(UNIX_SCHEME) and not Path(host.removeprefix(UNIX_SCHEME)).exists()


def remote_engine_host() -> str | None:
    """The host engines of a remote daemon are reached at: $GOMGR_ENGINE_HOST, else the host
    of a tcp:// or ssh:// daemon address; None for a local daemon (a unix socket)."""
    address = urlsplit(docker_host())
    if address.scheme not in REMOTE_SCHEMES:
        return None
    return os.environ.get(ENGINE_HOST_ENV) or address.hostname or None


def docker_client(timeout: int) -> DockerClient:
    """A client of the daemon `docker_host` names, as the docker CLI would reach it: TLS from
    $DOCKER_TLS_VERIFY/$DOCKER_CERT_PATH or the context's, ssh:// through the `ssh` command
    (so ~/.ssh/config applies)."""
    import docker
    from docker.constants import MINIMUM_DOCKER_API_VERSION
    from docker.context import ContextAPI
    from docker.errors import APIError, DockerException
    from requests import RequestException

    host = docker_host()
    ssh = host.startswith("ssh://")
    context = current_context()
    found = ContextAPI.get_context(context.name) if context is not None else None
    tls = (found.TLSConfig if found is not None else None) or False

    def client(version: str | None) -> DockerClient:
        if context is None:
            made = docker.from_env(timeout=timeout, use_ssh_client=ssh, version=version)
        else:
            made = docker.DockerClient(
                base_url=host, tls=tls, timeout=timeout, use_ssh_client=ssh, version=version
            )
        # NOTE: requests lets $REQUESTS_CA_BUNDLE/$CURL_CA_BUNDLE override a session's own CA
        # (psf/requests#3829), which would verify the daemon against the system's CAs rather
        # than DOCKER_CERT_PATH's; so a TCP daemon's client reads no settings from the
        # environment beyond what the SDK took (no proxy either: the CLI's daemon link is direct).
        made.api.trust_env = False
        return made

    if not host.startswith("tcp://"):
        return client(None)
    # NOTE: the SDK negotiates the API version in its constructor, before trust_env can be set:
    # asked first with the oldest version every daemon accepts.
    probe = client(MINIMUM_DOCKER_API_VERSION)
    try:
        version = str(probe.version(api_version=False)["ApiVersion"])
    except (APIError, RequestException) as exc:
        raise DockerException(f"Error while fetching server API version: {exc}") from exc
    finally:
        probe.close()
    return client(version)
