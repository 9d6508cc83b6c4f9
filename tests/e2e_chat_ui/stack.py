"""gomgr's side of the chat-UI tests: the router with the supervisor (`gomgr serve` with an
Ollama port, or `gomgr router start`), SmolLM2 in its store, started or not.

Everything is isolated (state dir, config dir, router port, token file) the way a user's
own `gomgr` would run, with the session's model store so nothing is downloaded again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from tests.e2e_chat_ui.processes import Served, launch
from tests.support.engine_process import free_port

GOMGR = Path(sys.executable).parent / "gomgr"
SMOLLM2_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
ROUTER_START_S = 60.0
# NOTE: a second served name for the same weights, so stopping it leaves the list non-empty:
# Open WebUI 0.12.4 keeps showing its last list when an upstream's becomes empty.
SECOND_MODEL = "smollm2-second"


@dataclass
class ChatStack:
    vars: dict[str, str]
    state: StatePaths
    router_port: int
    ollama_port: int
    router: Served | None = None
    background: bool = False  # `gomgr router start` runs the router, `router stop` ends it
    engines: dict[str, str] = field(default_factory=dict)  # served name -> engine id

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    @property
    def ollama_url(self) -> str:
        return f"http://127.0.0.1:{self.ollama_port}"

    def gomgr(self, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GOMGR), *args], capture_output=True, text=True, env=self.vars,
            timeout=timeout_s, check=False,
        )  # fmt: skip

    def serve_router(self, log_path: Path) -> None:
        """`gomgr serve --ollama-port` (the router with the supervisor, which `gomgr start`
        asks to start engines) in the foreground of a child, as a user runs it."""
        command = [
            str(GOMGR), "serve", "--port", str(self.router_port),
            "--ollama-port", str(self.ollama_port),
        ]  # fmt: skip
        self.router = launch(command, self.vars, log_path)
        self.router.wait_ready(f"{self.ollama_url}/api/version", ROUTER_START_S)

    def start_background_router(self) -> None:
        """`gomgr router start`: the supervisor, which loads a store model on its first request."""
        result = self.gomgr("router", "start")
        assert result.returncode == 0, result.stderr
        self.background = True

    @property
    def model(self) -> str:
        """The first model started."""
        return next(iter(self.engines))

    def start_model(self, *options: str) -> str:
        """`gomgr start` SmolLM2 on the process runtime with `options`; its served name."""
        result = self.gomgr("start", SMOLLM2_REPO, "--runtime", "process", "--json", *options)
        assert result.returncode == 0, result.stderr
        record = json.loads(result.stdout)
        self.engines[str(record["served_name"])] = str(record["id"])
        return str(record["served_name"])

    def stop_model(self, served_name: str) -> None:
        result = self.gomgr("stop", self.engines.pop(served_name))
        assert result.returncode == 0, result.stderr

    def routed_models(self) -> list[str]:
        reply = httpx.get(f"{self.router_url}/v1/models", timeout=10)
        reply.raise_for_status()
        return [str(card["id"]) for card in reply.json()["data"]]

    def close(self) -> None:
        """`gomgr router stop` for a background router (it ends what it loaded); then end, by
        pid, every engine this state dir still records, then a foreground router."""
        if self.background:
            self.gomgr("router", "stop")
        for record in RecordStore(self.state).all():
            try:
                os.killpg(record.handle.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.router is not None:
            self.router.stop()


def isolated_stack(root: Path, models_dir: Path) -> ChatStack:
    variables = {
        **os.environ,
        "GOMGR_STATE_DIR": str(root / "state"),
        "GOMGR_CONFIG_DIR": str(root / "config"),
        "GOMGR_ROUTER_PORT": str(port := free_port()),
        "GOMGR_ROUTER_TOKEN_FILE": str(root / "router.token"),
        "GOMGR_MODELS_DIR": str(models_dir),
    }
    return ChatStack(variables, StatePaths(root / "state"), port, free_port())
