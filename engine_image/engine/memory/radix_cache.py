"""Prefix cache of KV slots keyed by token ids (a radix tree, page size 1)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import torch

from engine.memory.token_allocator import TokenAllocator
from engine.memory.tree_node import MatchResult, TreeNode


class RadixCache:
    """Shares the KV slots of common token prefixes between requests.

    Ownership: every slot stored in the tree belongs to the tree. It goes back to the
    allocator only through ``evict`` or ``reset``; a slot that is not in the tree belongs to
    whoever allocated it.

    Caller protocol (as SGLang's scheduler), for a request with tokens ``key``:

    1. ``m = match_prefix(key)``; ``inc_lock_ref(m.last_node)``; ``p = len(m.indices)``.
       The request reuses ``m.indices`` (tree-owned) and allocates slots for ``key[p:]``.
    2. When done: ``n = insert(key, value)`` with ``value = cat(m.indices, own_slots)``.
       The tree now owns every slot of ``value`` it stored. ``value[p:n]`` are the request's
       own slots for tokens the tree already held (another request cached them meanwhile):
       the caller frees exactly those, ``allocator.free(value[p:n])``. ``value[n:]`` now
       belong to the tree, ``value[:p]`` always did. Then ``dec_lock_ref(m.last_node)``.

    A caller that matched nothing (``p = 0``) frees ``value[:n]``. The rule is always: free
    the part of ``value[:n]`` that the caller itself allocated.

    NOTE: with ``disable=True`` the tree stays empty: ``match_prefix`` matches nothing,
    ``insert`` stores nothing and returns ``len(key)``, so the same protocol frees all of
    the request's own slots; locking and eviction do nothing.

    LRU uses a logical clock (one tick per ``match_prefix``/``insert``), not wall time, so
    eviction order is deterministic.
    """

    def __init__(self, allocator: TokenAllocator, disable: bool = False) -> None:
        self.allocator = allocator
        self.disable = disable
        self._clock = itertools.count()
        self._node_ids = itertools.count()
        self._evictable_size = 0
        self._protected_size = 0
        self.root = self._new_root()

    # ----------------------------------------------------------------- queries

    def evictable_size(self) -> int:
        """Tokens held by unlocked nodes (``lock_ref == 0``)."""
        return self._evictable_size

    def protected_size(self) -> int:
        """Tokens held by locked nodes (``lock_ref > 0``)."""
        return self._protected_size

    def total_size(self) -> int:
        """All tokens (= KV slots) the tree holds."""
        return self._evictable_size + self._protected_size

    def match_prefix(self, key: Sequence[int]) -> MatchResult:
        """Longest cached prefix of ``key``: its KV slots and the node where it ends.

        NOTE: when the match ends inside a node, that node is split so that ``last_node``
        ends exactly at the match; locking it then protects the matched tokens only.
        """
        if self.disable:
            return MatchResult(indices=self._empty(), last_node=self.root)
        key = tuple(key)
        now = next(self._clock)
        node = self.root
        node.last_access_time = now
        matched: list[torch.Tensor] = []
        pos = 0
        while pos < len(key) and (child := node.children.get(key[pos])) is not None:
            n = _common_prefix_len(child.key, key, pos)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access_time = now
            matched.append(child.value)
            pos += n
            node = child
        indices = torch.cat(matched) if matched else self._empty()
        return MatchResult(indices=indices, last_node=node)

    # ----------------------------------------------------------------- updates

    def insert(self, key: Sequence[int], value: torch.Tensor) -> int:
        """Cache ``value[i]`` as the KV slot of ``key[i]``; return how many leading tokens
        of ``key`` were already cached (their slots in the tree are kept, ``value``'s are
        not stored). See the class docstring for which slots the caller then frees.

        NOTE: the stored part of ``value`` is cloned, so passing a view of
        ``ReqToTokenPool.req_to_token`` is safe even after that row is reused.
        """
        key = tuple(key)
        if value.dim() != 1 or value.numel() != len(key):
            raise ValueError(f"value must be 1-D with len(key)={len(key)} slots, got {value.shape}")
        if self.disable:
            return len(key)
        now = next(self._clock)
        node = self.root
        node.last_access_time = now
        pos = 0
        while pos < len(key):
            child = node.children.get(key[pos])
            if child is None:
                leaf = TreeNode(next(self._node_ids), key[pos:], value[pos:].clone(), node, now)
                node.children[key[pos]] = leaf
                self._evictable_size += len(leaf.key)
                return pos
            n = _common_prefix_len(child.key, key, pos)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access_time = now
            pos += n
            node = child
        return pos

    def inc_lock_ref(self, node: TreeNode) -> int:
        """Lock the path root→``node`` against eviction.

        Returns the change of ``evictable_size()`` (<= 0): minus the tokens of the nodes
        that went from unlocked to locked.
        """
        if self.disable:
            return 0
        if node.parent is None and node is not self.root:
            raise ValueError(f"cannot lock a node that is no longer in the tree: {node!r}")
        delta = 0
        while node is not self.root:
            assert node.parent is not None
            if node.lock_ref == 0:
                self._evictable_size -= len(node.key)
                self._protected_size += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            node = node.parent
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Undo one ``inc_lock_ref(node)``.

        Returns the change of ``evictable_size()`` (>= 0): the tokens of the nodes that
        went from locked to unlocked.
        """
        if self.disable:
            return 0
        if node is not self.root and node.lock_ref <= 0:
            raise ValueError(f"dec_lock_ref without a matching inc_lock_ref: {node!r}")
        delta = 0
        while node is not self.root:
            assert node.parent is not None
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._evictable_size += len(node.key)
                self._protected_size -= len(node.key)
                delta += len(node.key)
            node = node.parent
        return delta

    def evict(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` slots from least recently used unlocked leaves, or
        all evictable ones if there are fewer. Returns the number of slots freed.

        NOTE: a leaf is evicted whole, so this may free more than ``num_tokens``. Evicting
        a leaf can turn its parent into an evictable leaf, which then competes by its own
        access time.
        """
        if self.disable or num_tokens <= 0:
            return 0
        heap = [(n.last_access_time, n.node_id, n) for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        freed: list[torch.Tensor] = []
        num_freed = 0
        while num_freed < num_tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[0]]
            leaf.parent = None
            self._evictable_size -= len(leaf.key)
            freed.append(leaf.value)
            num_freed += len(leaf.key)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access_time, parent.node_id, parent))
        if freed:
            self.allocator.free(torch.cat(freed))
        return num_freed

    def reset(self) -> None:
        """Drop every node and give all of the tree's slots back to the allocator.

        NOTE: locks are dropped too, so reset only when no request holds a match (e.g. on
        flush or between tests). Nodes from before the reset are detached and must not be
        locked or unlocked afterwards.
        """
        values: list[torch.Tensor] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            values.append(node.value)
            stack.extend(node.children.values())
            node.parent = None
        if values:
            self.allocator.free(torch.cat(values))
        self._evictable_size = 0
        self._protected_size = 0
        self.root = self._new_root()

    def pretty_print(self) -> str:
        """The tree, one node per line, indented by depth (for debugging and test messages)."""
        lines: list[str] = []
        stack: list[tuple[TreeNode, int]] = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            lines.append("  " * depth + repr(node))
            stack.extend((c, depth + 1) for c in reversed(node.children.values()))
        return "\n".join(lines)

    # ----------------------------------------------------------------- internals

    def _new_root(self) -> TreeNode:
        # NOTE: the root holds no tokens and keeps lock_ref 1, so it is never a candidate
        # for eviction and the lock walks stop at it.
        return TreeNode(next(self._node_ids), (), self._empty(), None, next(self._clock), 1)

    def _empty(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.int64, device=self.allocator.device)

    def _split(self, child: TreeNode, n: int) -> TreeNode:
        """Cut ``child`` after its first ``n`` tokens; return the new upper node.

        NOTE: ``child`` keeps its identity as the lower part, so a ``last_node`` a caller
        holds still ends at the same token. The upper part inherits ``lock_ref`` (every lock
        on ``child`` also covers it), so the evictable/protected sizes are unchanged.
        """
        parent = child.parent
        assert parent is not None and 0 < n < len(child.key)
        upper = TreeNode(
            next(self._node_ids),
            child.key[:n],
            child.value[:n],
            parent,
            child.last_access_time,
            child.lock_ref,
        )
        upper.children[child.key[n]] = child
        parent.children[child.key[0]] = upper
        child.key = child.key[n:]
        child.value = child.value[n:]
        child.parent = upper
        return upper

    def _leaves(self) -> list[TreeNode]:
        leaves: list[TreeNode] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                leaves.append(node)
        return leaves


def _common_prefix_len(node_key: tuple[int, ...], key: tuple[int, ...], start: int) -> int:
    """Length of the common prefix of ``node_key`` and ``key[start:]``."""
    limit = min(len(node_key), len(key) - start)
    i = 0
    while i < limit and node_key[i] == key[start + i]:
        i += 1
    return i
