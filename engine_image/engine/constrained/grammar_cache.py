"""Compiles grammars on worker threads, once per (kind, text), with an LRU bound."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from engine.constrained.base import CompiledGrammar, GrammarBackend, GrammarKey

DEFAULT_CACHE_SIZE = 256
COMPILE_THREADS = 2


class GrammarCache:
    """``get(key)`` returns a future of the compiled grammar; identical keys share one compile.

    The scheduler never waits on a compile: it keeps requests aside until their future is
    done (SGLang's grammar queue). A failed compile is cached too, so a repeated bad grammar
    fails at once; its future raises InvalidGrammar.
    """

    def __init__(self, backend: GrammarBackend, max_entries: int = DEFAULT_CACHE_SIZE) -> None:
        self.backend = backend
        self.max_entries = max_entries
        self._entries: OrderedDict[GrammarKey, Future[CompiledGrammar]] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(COMPILE_THREADS, thread_name_prefix="grammar-compile")

    def get(self, key: GrammarKey) -> Future[CompiledGrammar]:
        with self._lock:
            future = self._entries.get(key)
            if future is not None:
                self._entries.move_to_end(key)
                return future
            future = self._pool.submit(self.backend.compile, key)
            self._entries[key] = future
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return future

    def __len__(self) -> int:
        return len(self._entries)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
