"""`python -m router [--host H] [--port P] ...`: the router in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from router.config import DEFAULT_HOST, DEFAULT_PORT, MAX_BODY_BYTES, RouterConfig
from router.routing_policy import RoutingPolicyName


def parse_args(argv: list[str] | None = None) -> tuple[RouterConfig, str]:
    parser = argparse.ArgumentParser(prog="python -m router", description=__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--ollama-port", type=int, default=None, help="also listen here (e.g. 11434)")
    parser.add_argument("--admin-token-file", type=Path, default=None)
    parser.add_argument("--api-key", action="append", default=[], help="a client key (repeatable)")
    parser.add_argument("--cors-origin", action="append", default=[], help="an allowed origin, or *")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES)
    parser.add_argument("--health-interval", type=float, default=0.5, help="seconds between probes")
    parser.add_argument(
        "--loading-progress", action="store_true",
        help="streamed chats waiting for their model to load get progress as reasoning_content",
    )
    parser.add_argument(
        "--backends", type=Path, default=None,
        help="a YAML file of backends to register at start-up and keep while unreachable",
    )
    parser.add_argument(
        "--routing-policy", type=RoutingPolicyName, choices=list(RoutingPolicyName),
        default=RoutingPolicyName.CACHE_AWARE, help="how a model's replicas share its requests",
    )
    parser.add_argument("--tls-certfile", type=Path, default=None, help="PEM certificate: serve HTTPS")
    parser.add_argument("--tls-keyfile", type=Path, default=None, help="PEM private key of --tls-certfile")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    config = RouterConfig(
        host=args.host, port=args.port, ollama_port=args.ollama_port, admin_token_file=args.admin_token_file,
        api_keys=tuple(args.api_key), cors_origins=tuple(args.cors_origin),
        max_body_bytes=args.max_body_bytes, health_interval_s=args.health_interval,
        loading_progress=args.loading_progress, backends_file=args.backends,
        routing_policy=args.routing_policy, tls_certfile=args.tls_certfile,
        tls_keyfile=args.tls_keyfile,
    )
    return config, args.log_level


def main() -> None:
    # NOTE: imported here: the supervisor parses these flags (manager/supervisor/__main__.py)
    # and starts an engine before it imports the web stack.
    from router.app import serve

    config, log_level = parse_args()
    serve(config, log_level)


if __name__ == "__main__":
    main()
