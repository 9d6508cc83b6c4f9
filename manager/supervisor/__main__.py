"""`python -m manager.supervisor [router flags]`: what `gomgr router start` runs in the background."""

from __future__ import annotations

from manager.supervisor.boot import boot
from router.__main__ import parse_args


def main() -> None:
    config, log_level = parse_args()
    booted = boot(config)
    if booted.start is not None:
        # NOTE (issue 30): the web stack imports only once the handed-over start's engine
        # runs: imported meanwhile, on this thread, it would hold the GIL from the planning.
        booted.start.wait_spawned()
    from manager.supervisor.front_door import serve_supervised

    serve_supervised(booted, log_level)


if __name__ == "__main__":
    main()
