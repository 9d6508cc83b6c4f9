"""`gomgr start`: resolve the model → readiness and runtime → run → /health → router → register."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import secrets
import socket
import threading
from collections.abc import Callable

from manager.lifecycle.errors import EngineFailed, StartBlocked
from manager.lifecycle.gpus import gpu_pins
from manager.lifecycle.health_wait import never, wait_until_healthy
from manager.lifecycle.planning import check_before_download, plan_start
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.replicas import ReplicaShare, cpu_env, replica_share
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start_request import Started, StartRequest
from manager.models.progress import Progress
from manager.models.pull import is_local, resolve_model
from manager.readiness.gpu import NvmlProbe
from manager.runtimes.base import ENGINE_HOST, EngineSpec, RuntimeStartError
from manager.runtimes.registry import get_runtime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore, StateConflict


def start_engine(
    request: StartRequest, paths: StatePaths, progress: Progress, announce: Callable[[str], None],
    cancelled: Callable[[], bool] = never, *, booting: threading.Event | None = None,
) -> Started:
    """Run the engine and register it; `cancelled` (the engine API's client went away) ends
    the health wait with StartCancelled, and everything begun is undone.

    `booting`: the start runs while its supervisor boots (manager/supervisor/boot_start.py),
    which reconciled the records itself and imports its router once the engine runs (this
    sets the event then): the engine is registered once that router answers, rather than a
    router started for it.
    """
    router = RouterLink.from_paths(paths)
    if booting is None:
        reconcile(paths, router)
    if not is_local(request.repo):
        check_before_download(
            request.repo, request.runtime, request.port, gpus=request.gpus,
            variant=request.variant,
        )
    model = resolve_model(request.repo, progress=progress)
    share = _share(request)
    plan = plan_start(
        model.name, model.model_path, request.runtime, request.port, request.served_name,
        gpus=share.gpus, variant=request.variant, kv_tokens=request.kv_tokens,
    )
    if plan.engine_line:
        announce(plan.engine_line)
    announce(f"runtime: {plan.runtime} ({plan.reason})")
    runtime = get_runtime(plan.runtime, paths)
    spec = runtime.place(EngineSpec(
        id=_new_id(plan.served_name), repo=model.name, model_dir=model.model_path,
        served_name=plan.served_name, port=request.port or _free_port(), aliases=request.aliases,
        engine_args=plan.engine_args, env=(*plan.env, *share.env), container=plan.container,
    ))
    records = RecordStore(paths)
    progress.step(f"Starting engine {spec.id} on {spec.base_url}")
    # NOTE (issue 30): the router starts while the engine loads, not once it is healthy, so a
    # start that also brings the router up costs the longer of the two, not their sum.
    if booting is None:
        router_up = router.ensure_in_background()
    else:
        router_up = router.wait_in_background(request.timeout_s)
    try:
        handle = runtime.start(spec)
    except RuntimeStartError as exc:
        raise StartBlocked(exc.message, exc.fix) from exc
    finally:
        if booting is not None:
            booting.set()
    registered = False
    try:
        record = records.get(spec.id) or EngineRecord(handle, EngineState.STARTING)
        record = dataclasses.replace(record, labels=dict(request.labels), variant=request.variant)
        records.save(record)
        try:
            wait_until_healthy(runtime, handle, request.timeout_s, cancelled)
        except EngineFailed:
            # NOTE: the record says so while the start cleans up after it (its log stays).
            with contextlib.suppress(StateConflict):
                record = records.set_state(record, EngineState.FAILED)
            raise
        router_up.result()
        router.register(record)
        registered = True
        try:
            record = records.set_state(record, EngineState.READY)
        except StateConflict as exc:
            raise EngineFailed(f"engine {spec.id} was stopped while it started: {exc}") from exc
    except BaseException:
        # NOTE: BaseException, so Ctrl-C during the wait also leaves nothing running.
        if registered:
            router.deregister(spec.id)
        runtime.stop(handle)
        records.remove(spec.id, keep_log=True)
        raise
    return Started(record, router.url, plan.reason)


def _share(request: StartRequest) -> ReplicaShare:
    if request.cpus:
        return ReplicaShare(request.gpus, cpu_env(request.cpus))
    if request.replicas == 1:
        return ReplicaShare(request.gpus, ())
    asks_nvml = not gpu_pins(request.gpus) and request.gpus != "none"
    seen = len(NvmlProbe().snapshot().gpus) if asks_nvml else 0
    return replica_share(request.gpus, request.replica, request.replicas, seen)


def _new_id(served_name: str) -> str:
    """e.g. 'smollm2-135m-instruct-3f9a1c': the name's last part, slugged, plus a random suffix."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", served_name.rsplit("/", 1)[-1].lower()).strip("-.")[:40]
    return f"{slug or 'engine'}-{secrets.token_hex(3)}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((ENGINE_HOST, 0))
        return int(sock.getsockname()[1])
