"""How long a start waits for the engine's /health by default.

A module of its own, importing nothing: the CLI's `--timeout` defaults read it, and `gomgr
--help` should load none of the start's modules.
"""

DEFAULT_START_TIMEOUT_S = 600.0
