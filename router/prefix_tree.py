"""An approximate radix tree of the prompts the router sent to each backend (its tenants).

It mirrors, roughly, what each replica's radix cache holds: a prompt sent to a backend is
inserted under that backend; the longest prefix of a new prompt that the tree holds for a
backend says how much of it that backend probably has cached (sgl-router's `cache_aware`
tree is the reference). Text is compared by characters, not tokens: the router has no
tokenizer, and a shared character prefix is a shared token prefix but for the last token.

Memory is bounded per tenant: past `max_chars_per_tenant` characters, the tenant's least
recently used leaves are dropped until it holds `EVICT_TO` of that, so eviction runs rarely
and costs one walk of the tenant's part of the tree.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection
from dataclasses import dataclass, field

# NOTE: evicting down to a fraction of the bound, not just under it, makes the walk that
# finds the leaves happen once per many inserts rather than on every one past the bound.
EVICT_TO = 0.8


@dataclass(eq=False)
class _Node:
    text: str  # the edge from the parent: never empty but at the root
    parent: _Node | None
    children: dict[str, _Node] = field(default_factory=dict)  # by the edge's first character
    tenants: dict[str, int] = field(default_factory=dict)  # tenant -> last access (a tick)


@dataclass(frozen=True)
class PrefixMatch:
    tenant: str | None  # the candidate holding the longest prefix; None when none holds any
    matched_chars: int


class PrefixTree:
    def __init__(self, max_chars_per_tenant: int) -> None:
        self._root = _Node("", None)
        self._max_chars = max_chars_per_tenant
        self._chars: dict[str, int] = {}
        self._clock = itertools.count(1)

    def chars(self, tenant: str) -> int:
        """The characters the tree holds for `tenant`."""
        return self._chars.get(tenant, 0)

    def insert(self, text: str, tenant: str) -> None:
        """Record that `text` was sent to `tenant`; evicts the tenant's oldest text past the bound."""
        now = next(self._clock)
        node = self._root
        node.tenants[tenant] = now
        rest = text
        while rest:
            child = node.children.get(rest[0])
            if child is None:
                child = _Node(rest, node)
                node.children[rest[0]] = child
            else:
                common = _common_length(child.text, rest)
                if common < len(child.text):
                    child = self._split(child, common)
            if tenant not in child.tenants:
                self._chars[tenant] = self._chars.get(tenant, 0) + len(child.text)
            child.tenants[tenant] = now
            rest = rest[len(child.text) :]
            node = child
        if self._chars.get(tenant, 0) > self._max_chars:
            self._evict(tenant, int(self._max_chars * EVICT_TO))

    def match(self, text: str, tenants: Collection[str]) -> PrefixMatch:
        """The longest prefix of `text` that the tree holds for one of `tenants`, and whose.

        Of several candidates holding the same prefix, the one that used it last wins.
        """
        wanted = set(tenants)
        best = PrefixMatch(None, 0)
        node = self._root
        matched = 0
        rest = text
        while rest:
            child = node.children.get(rest[0])
            if child is None:
                break
            common = _common_length(child.text, rest)
            holders = wanted.intersection(child.tenants)
            if not holders:
                break
            tenant = max(holders, key=child.tenants.__getitem__)
            best = PrefixMatch(tenant, matched + common)
            if common < len(child.text):
                break
            matched += common
            rest = rest[common:]
            node = child
        return best

    def remove_tenant(self, tenant: str) -> None:
        """Forget everything sent to `tenant` (its backend is gone or restarted empty)."""
        if self._chars.pop(tenant, None) is None:
            return
        stack = [self._root]
        while stack:
            node = stack.pop()
            node.tenants.pop(tenant, None)
            for key, child in list(node.children.items()):
                if tenant in child.tenants:
                    stack.append(child)
                    if len(child.tenants) == 1:
                        del node.children[key]  # NOTE: held for `tenant` only: all of it goes

    def _split(self, child: _Node, at: int) -> _Node:
        """Cut `child`'s edge after `at` characters; the new upper node is returned."""
        assert child.parent is not None
        upper = _Node(child.text[:at], child.parent, tenants=dict(child.tenants))
        child.parent.children[upper.text[0]] = upper
        child.text = child.text[at:]
        child.parent = upper
        upper.children[child.text[0]] = child
        # NOTE: each tenant of the old edge now holds two nodes of the same total length.
        return upper

    def _evict(self, tenant: str, target: int) -> None:
        """Drop `tenant` from its least recently used leaves until it holds `target` characters."""
        leaves: list[tuple[int, int, _Node]] = []
        order = itertools.count()
        stack = [self._root]
        while stack:
            node = stack.pop()
            below = [c for c in node.children.values() if tenant in c.tenants]
            if not below and node is not self._root:
                leaves.append((node.tenants[tenant], next(order), node))
            stack.extend(below)
        heapq.heapify(leaves)
        while leaves and self._chars[tenant] > target:
            _, _, node = heapq.heappop(leaves)
            parent = node.parent
            assert parent is not None
            del node.tenants[tenant]
            self._chars[tenant] -= len(node.text)
            if not node.tenants:
                del parent.children[node.text[0]]
            if parent is not self._root and not any(
                tenant in c.tenants for c in parent.children.values()
            ):
                heapq.heappush(leaves, (parent.tenants[tenant], next(order), parent))


def _common_length(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    low, high = 0, limit  # NOTE: bisection on slices: C-speed compares, not a Python char loop
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
