"""`gomgr serve` (and `gomgr router serve`): the router and the supervisor in the foreground;
store models load on demand, and `gomgr start / stop` run through it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from router.routing_policy import RoutingPolicyName


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the OpenAI, Anthropic and Ollama routes.")] = 8000,
    ollama_port: Annotated[
        int | None, typer.Option(help="Also listen here, e.g. 11434 for Ollama clients.")
    ] = None,
    api_key: Annotated[
        list[str] | None, typer.Option(help="A client API key (repeatable); none: no key needed.")
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="An allowed CORS origin, or * (repeatable).")
    ] = None,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(help="Admin token file (0600; created if absent). Default: "
                     "$GOMGR_ROUTER_TOKEN_FILE, else ${XDG_STATE_HOME:-~/.local/state}/gomgr/router.token."),
    ] = None,
    routing_policy: Annotated[
        RoutingPolicyName,
        typer.Option(help="How a model's replicas share requests: by cached prefix, or by load."),
    ] = RoutingPolicyName.CACHE_AWARE,
) -> None:
    """Serve every model in the store until Ctrl-C: each loads on its first request and unloads
    after $GOMGR_KEEP_ALIVE (default 5m) idle; $GOMGR_MAX_LOADED_MODELS caps how many are loaded."""
    # NOTE: imported here so other commands do not pay for FastAPI, uvicorn and the manifests.
    from manager.supervisor.boot import boot
    from manager.supervisor.front_door import serve_supervised
    from router.config import RouterConfig

    serve_supervised(boot(RouterConfig(
        host=host, port=port, ollama_port=ollama_port, admin_token_file=admin_token_file,
        api_keys=tuple(api_key or ()), cors_origins=tuple(cors_origin or ()),
        routing_policy=routing_policy,
    )))
