"""What `s`, `x` and `r` do, as clients of the supervisor (the background router), so it stays
the one writer of engine records: a store model loads through the router's catalog; any other
start, every stop and the restart of an engine started by hand go through its engine API.

Run in the dashboard's worker threads; each raises LifecycleError with one readable line.
"""

from __future__ import annotations

from collections.abc import Callable

from manager.lifecycle.start_request import StartRequest
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.models.progress import Progress
from manager.state.records import EngineRecord
from manager.supervisor.client import load_model
from manager.supervisor.engine_client import EngineClient
from manager.tui.feed import CatalogModel
from manager.tui.rows import on_demand

Announce = Callable[[str, str], None]  # (served name, router URL): the model is ready there


def start(
    client: EngineClient, repo: str, model: CatalogModel | None, progress: Progress,
    ready: Announce, say: Callable[[str], None],
) -> None:  # fmt: skip
    """A store model (`model`) loads on demand; a model not in the store yet is started as
    `gomgr start` starts it (pulled first, then pinned)."""
    if model is not None:
        load(client, model.served_name, progress)
        ready(model.served_name, client.link.url)
        return
    request = StartRequest(repo, "auto", None, None, DEFAULT_START_TIMEOUT_S)
    started = client.start(request, progress, say)
    ready(started.record.handle.spec.served_name, started.router_url)


def load(client: EngineClient, served_name: str, progress: Progress) -> None:
    """Start the background router if none runs, then ask it to load `served_name`; returns
    once the model is loaded."""
    if not client.link.is_up():
        progress.step("starting the router")
        client.link.ensure()
    progress.step("the router starts its engine")
    load_model(client.link.url, served_name, DEFAULT_START_TIMEOUT_S)


def restart(
    client: EngineClient, record: EngineRecord, progress: Progress, ready: Announce,
    say: Callable[[str], None],
) -> None:  # fmt: skip
    """One the supervisor loaded is unloaded and loaded again (a new engine); one started by
    hand restarts as `gomgr restart` does, on its port."""
    name = record.handle.spec.served_name
    if on_demand(record):
        progress.step("the router stops its engine")
        client.stop(record.id)
        load(client, name, progress)
        ready(name, client.link.url)
        return
    started = client.restart(record.id, progress, say, DEFAULT_START_TIMEOUT_S)
    ready(started.record.handle.spec.served_name, started.router_url)
