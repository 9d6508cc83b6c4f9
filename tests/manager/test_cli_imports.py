"""Commands that need no engine, container or dashboard import none of their heavy libraries.

Each case runs the real `gomgr` entry point in a fresh interpreter with a fresh state
directory and reports, at exit, which of torch, transformers, docker and textual were loaded.
Start-up time itself is measured by bench/cli_startup.py, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engine_process import free_port

HEAVY = ("torch", "transformers", "docker", "textual")
PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: print('HEAVY=' + json.dumps(sorted(\n"
    f"    m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr))\n"
    "from manager.cli import app\n"
    "sys.argv = ['gomgr', *sys.argv[1:]]\n"
    "app()\n"
)


def heavy_modules(args: list[str], tmp_path: Path) -> list[str]:
    env = {
        **os.environ,
        "GOMGR_STATE_DIR": str(tmp_path / "state"),
        "GOMGR_ROUTER_PORT": str(free_port()),  # NOTE: no router answers there
        # NOTE: no Docker daemon either (as on this machine): with one, `ps` does load the SDK
        # to adopt containers of ours that lost their records.
        "DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}",
    }
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    # NOTE: `router status` exits 1 when no router answers; a crash would show a traceback.
    assert "Traceback" not in done.stderr, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("HEAVY="))
    return list(json.loads(line.removeprefix("HEAVY=")))


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["ps"],
        ["ps", "--json"],
        ["start", "--help"],
        ["models", "--help"],
        ["image", "--help"],
        ["doctor", "--help"],
        ["router", "status"],
    ],
    ids=" ".join,
)
def test_light_commands_import_no_heavy_library(args: list[str], tmp_path: Path) -> None:
    assert heavy_modules(args, tmp_path) == []


def test_source_choice_mirrors_the_pull_sources() -> None:
    from manager.cli.models import SourceChoice
    from manager.models.pull import Source

    assert [c.value for c in SourceChoice] == [s.value for s in Source]
