"""`python -m manager.supervisor [router flags]`: what `gomgr router start` runs in the background."""

from __future__ import annotations

from manager.supervisor.front_door import serve_supervised
from router.__main__ import parse_args


def main() -> None:
    config, log_level = parse_args()
    serve_supervised(config, log_level)


if __name__ == "__main__":
    main()
