"""Starts the server's children (scheduler, detokenizer, extra tokenizer workers), waits
until they are ready, watches them."""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from engine.core.process_guard import die_with_parent, ignore_interrupts
from engine.core.startup_collection import uncollected_start_up
from engine.ipc.startup import ChildReady, StartupFailed, StartupReport

logger = logging.getLogger(__name__)

_STOP_GRACE_S = 5.0


class ChildStartError(RuntimeError):
    """A child failed to start; the message is one line for the operator."""


@dataclass(frozen=True)
class EntryPoint:
    """A child's entry function, named rather than imported.

    NOTE: the server spawns its children before it imports anything heavy, so their imports
    (torch, the model code) and its own (transformers, the web stack) run side by side; a
    function object would make the server import the child's module first, only to pickle
    its name.
    """

    module: str
    function: str


def _run_child(server_pid: int, entry: EntryPoint, *args: Any) -> None:
    """What a spawned child runs: the guards first, then the entry's imports (seconds; without
    the cyclic collector, engine/core/startup_collection.py), so a server killed or
    interrupted meanwhile takes the child with it as at any other time.

    NOTE: the server's pid travels with the child: one killed before the child got here has
    already left it to another parent, which the guard would take for its own.
    """
    die_with_parent(server_pid)
    ignore_interrupts()
    with uncollected_start_up():
        module = importlib.import_module(entry.module)
    getattr(module, entry.function)(*args)


@dataclass
class Child:
    name: str
    process: BaseProcess
    ready_reader: Connection


class Supervisor:
    """Owns the server's child processes: none outlives the server, none dies unnoticed."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.children: list[Child] = []
        self._reported: set[str] = set()
        self._stopping = threading.Event()

    def spawn(self, name: str, entry: EntryPoint, *args: Any) -> None:
        reader, writer = self._context.Pipe(duplex=False)
        process = self._context.Process(target=_run_child, args=(os.getpid(), entry, *args, writer), name=name, daemon=True)
        process.start()
        writer.close()
        self.children.append(Child(name, process, reader))

    def wait_ready(self, timeout_s: float) -> dict[str, ChildReady]:
        """The ready report of each child spawned since the last call; raises ChildStartError
        if one fails or dies first."""
        infos: dict[str, ChildReady] = {}
        waiting = [child for child in self.children if child.name not in self._reported]
        deadline = time.monotonic() + timeout_s
        while len(infos) < len(waiting):
            for child in waiting:
                if child.name in infos:
                    continue
                if child.ready_reader.poll(0.05):
                    try:
                        info: StartupReport = child.ready_reader.recv()
                    except EOFError:
                        info = StartupFailed("exited during start-up")
                    if isinstance(info, StartupFailed):
                        raise ChildStartError(f"{child.name} failed to start: {info.message}")
                    infos[child.name] = info
                    self._reported.add(child.name)
                elif not child.process.is_alive():
                    raise ChildStartError(f"{child.name} exited during start-up (exit code {child.process.exitcode})")
            if time.monotonic() > deadline:
                raise ChildStartError(f"children not ready after {timeout_s:.0f} s")
        return infos

    def watch(self) -> None:
        """In a thread: if any child dies while serving, stop the rest and exit non-zero."""

        def loop() -> None:
            while not self._stopping.is_set():
                for child in self.children:
                    if not child.process.is_alive() and not self._stopping.is_set():
                        logger.error(
                            "%s process died (exit code %s); shutting the server down",
                            child.name,
                            child.process.exitcode,
                        )
                        self.stop()
                        os._exit(1)
                time.sleep(0.2)

        threading.Thread(target=loop, name="child-watchdog", daemon=True).start()

    def stop(self) -> None:
        """Terminates every child, then kills what is left after a grace period."""
        self._stopping.set()
        for child in self.children:
            if child.process.is_alive():
                child.process.terminate()
        deadline = time.monotonic() + _STOP_GRACE_S
        for child in self.children:
            child.process.join(max(0.0, deadline - time.monotonic()))
            if child.process.is_alive():
                child.process.kill()
                child.process.join(1.0)
