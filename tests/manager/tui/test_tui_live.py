"""The real dashboard against the real background router (the supervisor) and real SmolLM2
engines it loads on the dashboard's keys (process runtime).

Isolated like tests/manager/lifecycle: a tmp $GOMGR_STATE_DIR, token file and config dir, a
free $GOMGR_ROUTER_PORT; the store that holds the session's SmolLM2. A user manifest override
turns on the engine's --enable-metrics, so tokens/s comes from its /metrics. Teardown ends,
by pid, whatever the records and router.json name.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from textual.pilot import Pilot

from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from manager.tui.app import DashboardApp
from manager.tui.log_pane import LogPane
from manager.tui.metrics import sample_server_info
from manager.tui.picker import StartPicker
from manager.tui.sources import Sources
from router.daemon import RouterDaemon
from tests.conftest import SMOLLM2_REPO
from tests.support.engine_process import free_port

pytestmark = pytest.mark.slow

SIZE = (140, 40)
START_TIMEOUT_S = 240.0
# NOTE: start and stop run in worker threads; a UI loop blocked by them would stall for the
# whole engine start (many seconds), far beyond this.
MAX_UI_STALL_S = 3.0


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Iterator[StatePaths]:
    root = tmp_path_factory.mktemp("tui")
    (root / "config" / "manifests").mkdir(parents=True)
    (root / "config" / "manifests" / "metrics.yaml").write_text(
        "overrides: smollm2\nengine_args: [--enable-metrics]\n"
    )
    paths = StatePaths(root / "state")
    port = free_port()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOMGR_STATE_DIR", str(paths.root))
        env.setenv("GOMGR_ROUTER_PORT", str(port))
        env.setenv("GOMGR_ROUTER_TOKEN_FILE", str(root / "router.token"))
        env.setenv("GOMGR_CONFIG_DIR", str(root / "config"))
        env.setenv("GOMGR_MODELS_DIR", str(smollm2_dir.parents[1]))
        try:
            yield paths
        finally:
            for record in RecordStore(paths).all():
                try:
                    os.killpg(record.handle.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            RouterDaemon(paths.router_dir, "127.0.0.1", port, root / "router.token").stop()


class Watch:
    """Pauses the pilot until a condition holds, recording the longest UI stall on the way."""

    def __init__(self, pilot: Pilot[Any]) -> None:
        self.pilot = pilot
        self.app: DashboardApp = pilot.app  # type: ignore[assignment]
        self.longest_stall_s = 0.0
        self.states_seen: list[str] = []

    async def until(
        self, what: str, condition: Callable[[], bool], timeout_s: float = START_TIMEOUT_S
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}: rows {self.app.rows}, failure {self.app.failure}"
                )
            began = time.monotonic()
            await self.pilot.pause(0.1)
            self.longest_stall_s = max(self.longest_stall_s, time.monotonic() - began - 0.1)
            for row in self.app.rows:
                if not self.states_seen or self.states_seen[-1] != row.state:
                    self.states_seen.append(row.state)


async def _chat(router_url: str, model: str) -> None:
    # NOTE: 160 tokens (~6 s on 2 cores) outlast several 1 s metrics ticks: 24 tokens took
    # ~1 s once the CPU kernels landed, and a tick could miss the request in flight.
    async with httpx.AsyncClient(timeout=120) as client:
        reply = await client.post(
            f"{router_url}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": "Count from 1 to 50."}],
                "max_tokens": 160,
                "temperature": 0,
                "ignore_eos": True,
            },
        )
        assert reply.status_code == 200, reply.text


async def _scenario(paths: StatePaths) -> None:
    app = DashboardApp(Sources.live())
    async with app.run_test(size=SIZE) as pilot:
        watch = Watch(pilot)
        await watch.until("the first router view", lambda: app.router.url != "", 30)
        assert not app.router.up  # NOTE: no router yet: the first load starts it

        # The catalog: the store's SmolLM2, not loaded; s loads it through the router.
        await watch.until("the catalog", lambda: len(app.rows) == 1, 30)
        model = app.rows[0]
        assert (model.model, model.state, model.loaded) == (SMOLLM2_REPO, "unloaded", False)
        await pilot.press("s")
        assert not isinstance(app.screen, StartPicker)

        def state_of_only_row(state: str) -> Callable[[], bool]:
            return lambda: len(app.rows) == 1 and app.rows[0].state == state

        await watch.until("the engine to be ready", state_of_only_row("ready"))
        assert "starting" in watch.states_seen, watch.states_seen
        assert watch.longest_stall_s < MAX_UI_STALL_S, watch.longest_stall_s
        row = app.rows[0]
        assert (row.model, row.served_name, row.runtime) == (SMOLLM2_REPO, model.served_name, "process")
        # NOTE: the supervisor loaded it (the TUI wrote no record): it unloads it when idle.
        [record] = RecordStore(paths).all()
        assert record.labels.get("gomgr.on_demand") == "1"
        await watch.until("its expiry", lambda: (app.rows[0].expires or "").startswith("in "), 30)

        # The router's event stream told the dashboard; the log pane follows the engine.
        await watch.until("the router's event", lambda: row.id in app.router.backends, 30)
        assert app.router.backends[row.id].state == "ready"
        log = app.query_one(LogPane)
        assert log.engine_id == row.id and len(log.lines) > 0

        # Load shows up: requests in flight while a chat runs, then tokens/s.
        chat = asyncio.create_task(_chat(app.router.url, row.served_name))
        await watch.until("a request in flight", lambda: (app.rows[0].inflight or 0) >= 1, 60)
        await chat
        await watch.until("tokens/s", lambda: max(app.rows[0].rates, default=0.0) > 0, 30)
        async with httpx.AsyncClient() as client:
            assert (await sample_server_info(client, f"http://127.0.0.1:{row.port}")).inflight == 0

        # With an engine selected, s opens the picker: each model's manifest and fit estimate.
        await pilot.press("s")
        assert isinstance(app.screen, StartPicker)
        picker = app.screen
        await watch.until(
            "the picker's details", lambda: picker.details_of(SMOLLM2_REPO) is not None, 60
        )
        details = picker.details_of(SMOLLM2_REPO)
        assert details is not None and details.manifest is not None
        assert details.manifest.name == "smollm2" and details.startable()
        await pilot.press("escape")
        assert not isinstance(app.screen, StartPicker)

        # Restart: the router unloads the model and loads it again, a new engine.
        await pilot.press("r")
        await watch.until(
            "the reloaded engine",
            lambda: (
                len(app.rows) == 1 and app.rows[0].id != row.id and app.rows[0].state == "ready"
            ),
        )
        pid = RecordStore(paths).all()[0].handle.pid

        # Stop: the router unloads it; the row is the catalog's again, the process is gone.
        await pilot.press("x")
        await watch.until("the model to be unloaded", lambda: app.rows == (model,), 60)
        await watch.until("the route to go", lambda: not app.router.backends, 30)
        assert app.failure is None
        assert RecordStore(paths).all() == []
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert watch.longest_stall_s < MAX_UI_STALL_S, watch.longest_stall_s


def test_load_from_the_catalog_reload_and_unload(state: StatePaths) -> None:
    asyncio.run(_scenario(state))
