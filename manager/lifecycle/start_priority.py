"""The CPU goes to the engine that starts, before the manager's own work that waits on it.

NOTE (issue 30): an engine's start is CPU-bound (three processes importing torch, the weights'
load, the warm-up). On a desktop with two cores, the work the manager does meanwhile (the
CLI's imports and progress while it follows a start, a booting supervisor's web stack once
its engine is spawned: ~0.9 CPU-s on a cold `gomgr start`) slowed that start by about half of
what it took. None of that work can finish before the engine is ready, so it runs niced: on an
idle core as fast as before, on a busy one behind the engine.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

# NOTE: CFS weighs nice 10 at ~1/10 of nice 0: behind the engine, never starved.
WAITING_WORK_NICENESS = 10


def lower_this_process() -> None:
    """The whole process niced (a CLI that follows a start and then exits); its children
    started from now on inherit it."""
    try:
        os.nice(WAITING_WORK_NICENESS)
    except OSError:  # NOTE: a platform without nice(2): the start is only slower
        pass


def import_niced(module: str) -> None:
    """`module` imported on a thread of its own, niced; returns once it is imported.

    NOTE: Linux sets a nice value per thread (setpriority with the thread's id), and it ends
    with the thread: the caller's priority is untouched, and so are the threads the process
    starts later. An unprivileged process could not take a niced priority back. Elsewhere
    `module` is imported on the caller's thread as it is.
    """
    if not sys.platform.startswith("linux"):
        importlib.import_module(module)
        return
    failure: list[BaseException] = []

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WAITING_WORK_NICENESS)
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"import {module}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
