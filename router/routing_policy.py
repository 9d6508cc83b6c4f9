"""Which of a model's ready replicas takes a request: least-in-flight, or cache-aware.

`cache_aware` (the default; sgl-router's policy is the reference): while the replicas' loads
are balanced, the request goes to the replica whose approximate radix tree (router/prefix_tree.py)
holds the longest prefix of its prompt, when that prefix is at least `cache_threshold` of
the prompt; otherwise, or when the loads are unbalanced, to the least loaded replica (the one
holding the least text on a tie, as it has the most cache room). Loads are the router's
requests in flight per backend. Loads count as unbalanced when the busiest replica has more
than `balance_abs` requests more than the idlest AND more than `balance_rel` times as many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from router.backend import Backend
from router.prefix_tree import PrefixTree
from router.routing_text import routing_text

InFlight = Callable[[str], int]


class RoutingPolicyName(StrEnum):
    CACHE_AWARE = "cache_aware"
    LEAST_IN_FLIGHT = "least_in_flight"


class RoutingPolicy(Protocol):
    def choose(
        self, ready: Sequence[Backend], inflight: InFlight, payload: dict[str, Any] | None
    ) -> Backend:
        """One of `ready` (never empty) for the request whose body is `payload`."""
        ...

    def forget(self, backend_id: str) -> None:
        """The backend is gone, or restarted with an empty cache."""
        ...


class LeastInFlight:
    """The ready backend with the fewest requests in flight (the first registered on a tie)."""

    def choose(
        self, ready: Sequence[Backend], inflight: InFlight, payload: dict[str, Any] | None
    ) -> Backend:
        return min(ready, key=lambda b: inflight(b.id))

    def forget(self, backend_id: str) -> None:
        return None


@dataclass(frozen=True)
class CacheAwareSettings:
    cache_threshold: float = 0.5  # NOTE: sgl-router's default
    # NOTE: sgl-router counts 32 (absolute) and 1.0001 (relative) for GPU batches of
    # hundreds; gomgr's replicas are often CPU engines or small GPUs that run a few requests
    # at once, where 8 requests more than a peer is already a queue.
    balance_abs: int = 8
    balance_rel: float = 1.5
    # NOTE: ~16 MiB of str per replica at worst (1 byte per ASCII character, plus nodes).
    max_chars_per_tenant: int = 1 << 24


class CacheAware:
    def __init__(self, settings: CacheAwareSettings | None = None) -> None:
        self.settings = settings or CacheAwareSettings()
        self.tree = PrefixTree(self.settings.max_chars_per_tenant)

    def choose(
        self, ready: Sequence[Backend], inflight: InFlight, payload: dict[str, Any] | None
    ) -> Backend:
        if len(ready) == 1:
            # NOTE: a model with one replica (the usual local case) costs no tree work; once a
            # second replica appears, conversations already running look new, once.
            return ready[0]
        text = routing_text(payload) if payload else ""
        chosen = self._choose(ready, {b.id: inflight(b.id) for b in ready}, text)
        if text:
            self.tree.insert(text, chosen.id)
        return chosen

    def forget(self, backend_id: str) -> None:
        self.tree.remove_tenant(backend_id)

    def _choose(self, ready: Sequence[Backend], loads: dict[str, int], text: str) -> Backend:
        least = min(ready, key=lambda b: (loads[b.id], self.tree.chars(b.id)))
        if not text or self._unbalanced(loads):
            return least
        found = self.tree.match(text, loads)
        if found.tenant is None or found.matched_chars < self.settings.cache_threshold * len(text):
            return least
        return next(b for b in ready if b.id == found.tenant)

    def _unbalanced(self, loads: dict[str, int]) -> bool:
        low, high = min(loads.values()), max(loads.values())
        return high - low > self.settings.balance_abs and high > low * self.settings.balance_rel


def make_policy(name: RoutingPolicyName) -> RoutingPolicy:
    if name is RoutingPolicyName.CACHE_AWARE:
        return CacheAware()
    return LeastInFlight()
