"""`gomgr start`'s early part (manager/cli/early_start.py): argv read into the very StartBody
the typer command sends, and only where typer would accept it; what it does not read begins
nothing, and typer answers as for any command.

That an early start serves is proven by the `gomgr start`s of the lifecycle and supervisor
tests (a cold one boots the supervisor with the start handed over; a warm one posts it).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from manager.cli.early_start import start_body
from manager.lifecycle.start_request import StartRequest
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.supervisor.engine_messages import StartBody
from router.daemon import RouterDaemon
from tests.support.gomgr_env import Env


def _body(repo: str, **fields: object) -> StartBody:
    request = StartRequest(
        repo, str(fields.get("runtime", "auto")), fields.get("port"),  # type: ignore[arg-type]
        fields.get("served_name"), float(fields.get("timeout_s", DEFAULT_START_TIMEOUT_S)),  # type: ignore[arg-type]
        str(fields.get("gpus", "auto")),
    )  # fmt: skip
    return StartBody.of(request)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["start", "acme/m"], _body("acme/m")),
        (["start", "acme/m", "--runtime", "process", "--json"], _body("acme/m", runtime="process")),
        (["start", "--runtime=docker", "acme/m:Q4_K_M"], _body("acme/m:Q4_K_M", runtime="docker")),
        (
            ["start", "acme/m", "--port", "8123", "--served-model-name", "chat", "--timeout", "30.5"],
            _body("acme/m", port=8123, served_name="chat", timeout_s=30.5),
        ),
        (["start", "acme/m", "--gpus", "1, 0"], _body("acme/m", gpus="1,0")),
        (["start", "/models/m"], _body("/models/m")),
        (["start", "~/m"], _body(str(Path.home() / "m"))),
        (["start", "./m"], _body(str(Path.cwd() / "m"))),
    ],
)
def test_a_plain_start_is_read_into_the_commands_start_body(argv: list[str], expected: StartBody) -> None:
    body = start_body(argv)
    assert body is not None
    assert StartBody.model_validate_json(body) == expected
    assert json.loads(body) == json.loads(expected.model_dump_json())


@pytest.mark.parametrize(
    "argv",
    [
        ["ps"],
        ["start"],
        ["start", "--help"],
        ["start", "a", "b"],
        ["start", "--", "a"],
        ["start", "a", "--runtime", "nope"],
        ["start", "a", "--runtime"],
        ["start", "a", "--port", "0"],
        ["start", "a", "--port", "http"],
        ["start", "a", "--port", "70000"],
        ["start", "a", "--timeout", "0"],
        ["start", "a", "--timeout", "-1"],
        ["start", "a", "--timeout", "nan"],
        ["start", "a", "--gpus", "0,0"],
        ["start", "a", "--json", "--json"],
        ["start", "a", "--port", "1", "--port", "2"],
        ["start", "a", "--replicas", "2"],
        ["start", "a", "--keep-alive", "10m"],
        ["start", "a", "-v"],
    ],
    ids=" ".join,
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert start_body(argv) is None


def test_a_cold_start_that_typer_refuses_launches_nothing(tmp_path: Path) -> None:
    env = Env.isolated(tmp_path, tmp_path / "models")
    result = env.gomgr("start", "acme/m", "--runtime", "bogus")
    assert result.returncode == 2, result.stderr
    assert "Invalid value" in result.stderr
    assert not env.daemon().log_path.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", env.router_port), timeout=1).close()


def test_a_start_posted_to_a_router_without_the_engine_api_is_one_line(tmp_path: Path) -> None:
    env = Env.isolated(tmp_path, tmp_path / "models")
    daemon = env.daemon()
    bare = RouterDaemon(daemon.run_dir, daemon.host, daemon.port, daemon.token_file)
    bare.start()  # NOTE: the bare router (python -m router): it answers, with no engine API
    try:
        result = env.gomgr("start", "acme/m", "--runtime", "process")
    finally:
        bare.stop()
    assert result.returncode == 5, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "not gomgr's supervisor" in line
