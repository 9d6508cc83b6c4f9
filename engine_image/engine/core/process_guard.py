"""Ties child processes to the HTTP server's life: no child outlives it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Called first thing in a child: the kernel kills it when its parent dies, even by SIGKILL.

    `parent` is the pid that started the child, where the caller knows it; else the parent
    at the time of the call.

    NOTE: PR_SET_PDEATHSIG fires when the parent *thread* exits; the server spawns children
    from its main thread, which lives as long as the process.
    """
    parent = os.getppid() if parent is None else parent
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent may have died before prctl took effect.
    if os.getppid() != parent:
        os._exit(1)


def ignore_interrupts() -> None:
    """Children leave Ctrl-C to the server, which stops them in order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
