"""An isolated manager for tests: its own state dir, config dir, router port and token file,
and the session's model store, driven through the real `gomgr` console script."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from manager.lifecycle.router_link import SUPERVISOR_MODULE
from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from router.daemon import RouterDaemon
from tests.support.engine_process import free_port

GOMGR = Path(sys.executable).parent / "gomgr"


LIVE_STATES = ("ready", "starting")


@dataclass(frozen=True)
class Env:
    vars: dict[str, str]
    state: StatePaths
    router_port: int

    @classmethod
    def isolated(cls, root: Path, store: Path) -> Env:
        """Everything under `root`; `store` holds the session's SmolLM2, so a start pulls nothing."""
        port = free_port()
        variables = {
            **os.environ,
            "GOMGR_STATE_DIR": str(root / "state"),
            "GOMGR_CONFIG_DIR": str(root / "config"),
            "GOMGR_ROUTER_PORT": str(port),
            "GOMGR_ROUTER_TOKEN_FILE": str(root / "router.token"),
            "GOMGR_MODELS_DIR": str(store),
        }
        return cls(variables, StatePaths(root / "state"), port)

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def gomgr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GOMGR), *args], capture_output=True, text=True, env=self.vars, timeout=600,
            check=False,
        )  # fmt: skip

    def start(self, *args: str) -> dict[str, Any]:
        """`gomgr start ARGS --json`, asserted to succeed; the record, plus its stderr."""
        result = self.gomgr("start", *args, "--json")
        assert result.returncode == 0, result.stderr
        return dict(json.loads(result.stdout)) | {"stderr": result.stderr}

    def ps(self) -> list[dict[str, Any]]:
        result = self.gomgr("ps", "--json")
        assert result.returncode == 0, result.stderr
        return list(json.loads(result.stdout))

    def listed_models(self) -> dict[str, dict[str, Any]]:
        """`gomgr models list --json`'s rows, by repo."""
        result = self.gomgr("models", "list", "--json")
        assert result.returncode == 0, result.stderr
        return {row["repo"]: row for row in json.loads(result.stdout)}

    def listed_state_cell(self, repo: str) -> str:
        """The STATE column of `repo`'s row in the `gomgr models list` table."""
        result = self.gomgr("models", "list")
        assert result.returncode == 0, result.stderr
        [line] = [s for s in map(str.strip, result.stdout.splitlines()) if s.startswith(repo)]
        return line.split()[1]

    def daemon(self) -> RouterDaemon:
        token_file = Path(self.vars["GOMGR_ROUTER_TOKEN_FILE"])
        # NOTE: the background router as gomgr runs it: the supervisor, with its engine API.
        return RouterDaemon(
            self.state.router_dir, "127.0.0.1", self.router_port, token_file, module=SUPERVISOR_MODULE
        )

    def routed_models(self) -> list[str]:
        """The served names the router has a ready or starting backend for, as /v1/models
        listed them before models on demand (it now lists the whole store, loaded or not)."""
        token = Path(self.vars["GOMGR_ROUTER_TOKEN_FILE"]).read_text().strip()
        reply = httpx.get(
            f"{self.router_url}/admin/backends",
            headers={"Authorization": f"Bearer {token}"},
            timeout=5,
        )
        reply.raise_for_status()
        routed = [b["model"] for b in reply.json()["backends"] if b["state"] in LIVE_STATES]
        return list(dict.fromkeys(routed))

    def end_everything(self) -> None:
        """Kill, by pid, every engine process the records name, and stop the background router."""
        for record in RecordStore(self.state).all():
            if record.handle.runtime != "process":
                continue
            try:
                os.killpg(record.handle.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.daemon().stop()
