"""`python -m tests.support.provision`: the one-time installs of the last tests, ahead of time.

CI starts this in the background before `make test` (see .ci/run): the CPU engine image
(tests/docker), Open WebUI's venv and Debian's chromium (tests/e2e_chat_ui) then install
while the rest of the suite runs, and the tests that need them run last (tests/conftest.py)
and find them ready. Each installer takes a lock, so a fixture that gets there first just
waits; a failure here is only printed: the fixture tries again and reports it properly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tests.docker.engine_image import build_cpu_engine_image
from tests.e2e_chat_ui.provision import chromium, open_webui_venv


def _timed(name: str, install: Callable[[], object]) -> str:
    began = time.monotonic()
    try:
        install()
    except Exception as exc:  # noqa: BLE001 - reported, then left to the test fixture
        return f"{name}: failed after {time.monotonic() - began:.0f} s: {exc}"
    return f"{name}: ready after {time.monotonic() - began:.0f} s"


def _engine_image() -> None:
    result = build_cpu_engine_image()
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "")


def main() -> None:
    installers: dict[str, Callable[[], object]] = {
        "engine image": _engine_image,
        "chromium": chromium,
        "open-webui venv": open_webui_venv,
    }
    with ThreadPoolExecutor(len(installers)) as pool:
        for line in pool.map(lambda item: _timed(*item), installers.items()):
            print(line, flush=True)


if __name__ == "__main__":
    main()
