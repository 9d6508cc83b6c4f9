"""Bad launcher flags, and a taken port, fail before anything loads: non-zero exit and exactly
one stderr line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CASES = {
    "unknown-flag": (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    "port-0": (["--port", "0"], "--port must be in 1..65535, got 0"),
    "both-pool-sizes": (
        ["--max-total-tokens", "100", "--mem-fraction-static", "0.5"],
        "give --max-total-tokens or --mem-fraction-static, not both",
    ),
}


def test_flag_errors(smollm2_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    cases = {
        name: (["--model-path", str(smollm2_dir), *flags], needle)
        for name, (flags, needle) in CASES.items()
    }
    cases["missing-model-path"] = (
        ["--model-path", str(missing)],
        f"--model-path {missing} is neither a model directory nor a .gguf file",
    )
    # NOTE: a port another server listens on is refused before anything loads (issue 29):
    # one line, so neither child was started (each logs as it loads).
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        cases["taken-port"] = (
            ["--model-path", str(smollm2_dir), "--port", str(port)],
            f"cannot listen on 127.0.0.1:{port}: Address already in use",
        )
        _check_each_fails(cases)


def _check_each_fails(cases: dict[str, tuple[list[str], str]]) -> None:
    # NOTE: started together, as each spends its time importing, not failing.
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "engine.launch_server", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (argv, _) in cases.items()
    }
    for name, proc in procs.items():
        try:
            _, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{name}: the launcher did not exit")
        assert proc.returncode != 0, name
        lines = stderr.splitlines()
        assert len(lines) == 1, (name, stderr)
        assert lines[0] == f"engine.launch_server: error: {cases[name][1]}", name
