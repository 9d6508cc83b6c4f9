"""Keys that need no engine process: `l` maximises the log, `d` shows the doctor's report,
`x` and `r` on a store model that is not loaded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.widgets import Static

from manager.tui.activity import ActivityLine
from manager.tui.doctor_screen import DoctorScreen
from manager.tui.feed import CatalogModel
from manager.tui.log_pane import LogPane

MakeDashboard = Callable[..., Any]  # the `dashboard` fixture of conftest.py


def test_l_toggles_the_log_and_d_shows_the_readiness_report(dashboard: MakeDashboard) -> None:
    async def scenario() -> None:
        app = dashboard(engines=1, blocked=True)
        async with app.run_test(size=(130, 34)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.press("l")
            assert app.screen.maximized is app.query_one(LogPane)
            await pilot.press("l")
            assert app.screen.maximized is None

            await pilot.press("d")
            assert isinstance(app.screen, DoctorScreen)
            await app.workers.wait_for_complete()
            await pilot.pause()
            shown = str(app.screen.query_one("#report", Static).content)
            assert "gomgr doctor" in shown and "disk-space-low" in shown
            assert "blocked" in shown and "1. Remove models you no longer use" in shown
            await pilot.press("escape")
            assert not isinstance(app.screen, DoctorScreen)

    asyncio.run(scenario())


def test_x_and_r_on_a_model_that_is_not_loaded_say_so(dashboard: MakeDashboard) -> None:
    async def scenario() -> None:
        app = dashboard(catalog=(CatalogModel("org/tiny", "tiny", "unloaded"),))
        async with app.run_test(size=(130, 34)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert [(row.served_name, row.loaded) for row in app.rows] == [("tiny", False)]
            await pilot.press("x")
            await pilot.press("r")
            said = [n.message for n in app._notifications]
            assert said == ["tiny is not loaded: s loads it"] * 2
            assert not app.query_one(ActivityLine).busy

    asyncio.run(scenario())
