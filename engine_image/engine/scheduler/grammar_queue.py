"""Requests whose grammar is still compiling wait here, so a compile never stalls a step."""

from __future__ import annotations

import logging
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

from engine.constrained import CompiledGrammar, GrammarCache, InvalidGrammar
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import RequestError
from engine.scheduler.request import Req

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Compiling:
    reqs: list[Req]  # the n samples of one prompt share one grammar
    future: Future[CompiledGrammar]


class GrammarQueue:
    """SGLang's grammar queue: groups leave it, each request with its own matcher, once compiled."""

    def __init__(self, cache: GrammarCache) -> None:
        self.cache = cache
        self._compiling: list[_Compiling] = []

    def add(self, reqs: list[Req]) -> None:
        key = reqs[0].params.grammar
        assert key is not None, "only requests with a grammar wait for a compile"
        self._compiling.append(_Compiling(reqs, self.cache.get(key)))

    def pop_done(self, wait_s: float) -> tuple[list[list[Req]], list[RequestError]]:
        """Groups whose grammar compiled (matchers attached), and the refusals of the
        requests whose grammar failed.

        Waits up to ``wait_s`` for a first compile to finish when none has yet.
        """
        if wait_s > 0 and self._compiling and not any(c.future.done() for c in self._compiling):
            wait([c.future for c in self._compiling], timeout=wait_s, return_when=FIRST_COMPLETED)
        ready: list[list[Req]] = []
        failed: list[RequestError] = []
        still: list[_Compiling] = []
        for entry in self._compiling:
            if not entry.future.done():
                still.append(entry)
                continue
            err = entry.future.exception()
            if err is None:
                compiled = entry.future.result()
                for req in entry.reqs:
                    req.grammar = self.cache.backend.matcher(compiled)
                ready.append(entry.reqs)
                continue
            if not isinstance(err, InvalidGrammar):
                logger.error("compiling %s failed", entry.reqs[0].params.grammar, exc_info=err)
            failed += [_refused(req, str(err)) for req in entry.reqs]
        self._compiling = still
        return ready, failed

    def remove(self, rid: str) -> bool:
        for entry in self._compiling:
            for req in entry.reqs:
                if req.rid == rid:
                    entry.reqs.remove(req)
                    if not entry.reqs:
                        self._compiling.remove(entry)
                    return True
        return False

    def reqs(self) -> list[Req]:
        return [req for entry in self._compiling for req in entry.reqs]

    def __len__(self) -> int:
        return len(self._compiling)


def _refused(req: Req, message: str) -> RequestError:
    """Ends ``req`` as an "abort" (what the offline Engine reports) and builds its refusal."""
    req.finish_reason = FinishReason("abort", message=message)
    return RequestError(req.rid, message, req.worker)
