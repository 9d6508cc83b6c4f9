"""Stateful property test: the radix cache against a dict model, with a real allocator.

The machine plays a scheduler: it inserts sequences, matches, runs "requests" (match, lock,
allocate the rest, later insert and unlock, or abort), takes bare locks and evicts. The
model ``ref`` maps every cached prefix (a token tuple) to the KV slot of its last token.
"""

from collections import Counter
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.memory import DUMMY_SLOT, RadixCache, TokenAllocator, TreeNode

POOL_SIZE = 40
MAX_IN_FLIGHT = 4

keys = st.lists(st.integers(min_value=0, max_value=3), max_size=12)


@dataclass(frozen=True)
class Request:
    key: tuple[int, ...]
    prefix: torch.Tensor  # tree-owned slots from match_prefix
    own: torch.Tensor  # slots the request allocated for key[len(prefix):]
    last_node: TreeNode


@dataclass(frozen=True)
class Lock:
    key: tuple[int, ...]  # the matched tokens
    slots: torch.Tensor
    node: TreeNode


class RadixCacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alloc = TokenAllocator(POOL_SIZE, debug=True)
        self.cache = RadixCache(self.alloc)
        self.ref: dict[tuple[int, ...], int] = {}
        self.requests: list[Request] = []
        self.locks: list[Lock] = []

    # ------------------------------------------------------------------ model helpers

    def cached_len(self, key: tuple[int, ...]) -> int:
        n = 0
        while n < len(key) and key[: n + 1] in self.ref:
            n += 1
        return n

    def ref_slots(self, key: tuple[int, ...], n: int) -> list[int]:
        return [self.ref[key[: i + 1]] for i in range(n)]

    def record_insert(self, key: tuple[int, ...], value: torch.Tensor, n: int) -> None:
        for i in range(n, len(key)):
            self.ref[key[: i + 1]] = int(value[i])

    def tree_map(self) -> dict[tuple[int, ...], int]:
        out: dict[tuple[int, ...], int] = {}
        stack: list[tuple[TreeNode, tuple[int, ...]]] = [(self.cache.root, ())]
        while stack:
            node, path = stack.pop()
            for i, (token, slot) in enumerate(zip(node.key, node.value.tolist(), strict=True)):
                out[path + node.key[: i + 1]] = slot
                assert token == node.key[i]
            stack.extend((c, path + node.key) for c in node.children.values())
        return out

    def assert_path_most_recent(self, key: tuple[int, ...]) -> None:
        """The nodes spelling ``key`` (a cached prefix) were touched last, all at once."""
        newest = max(n.last_access_time for n in [self.cache.root, *self.nodes()])
        node, pos = self.cache.root, 0
        assert node.last_access_time == newest
        while pos < len(key):
            node = node.children[key[pos]]
            assert node.last_access_time == newest
            pos += len(node.key)

    def evict(self, num_tokens: int) -> int:
        nodes_before = self.nodes()
        before = set(self.tree_map().values())
        evictable = self.cache.evictable_size()
        available = self.alloc.available_size()
        freed = self.cache.evict(num_tokens)
        removed = before - set(self.tree_map().values())
        assert freed == len(removed) == self.alloc.available_size() - available
        assert freed >= min(num_tokens, evictable)
        assert self.cache.evictable_size() == evictable - freed
        self.ref = {k: s for k, s in self.ref.items() if s not in removed}
        # LRU: nothing evicted was touched more recently than an evictable leaf that stays.
        evicted = [n.last_access_time for n in nodes_before if n.parent is None]
        kept = [n.last_access_time for n in self.nodes() if not n.children and n.lock_ref == 0]
        assert not kept or max(evicted, default=-1) <= min(kept)
        return freed

    def alloc_or_evict(self, n: int) -> torch.Tensor | None:
        slots = self.alloc.alloc(n)
        if slots is None:
            self.evict(n - self.alloc.available_size())
            slots = self.alloc.alloc(n)
        return slots

    def held_nodes(self) -> list[TreeNode]:
        return [r.last_node for r in self.requests] + [lock.node for lock in self.locks]

    # ------------------------------------------------------------------ rules

    @rule(key=keys)
    def insert_fresh(self, key: list[int]) -> None:
        k = tuple(key)
        value = self.alloc_or_evict(len(k))
        if value is None:
            return
        expected = self.cached_len(k)
        n = self.cache.insert(k, value)
        assert n == expected
        self.record_insert(k, value, n)
        self.assert_path_most_recent(k)
        self.alloc.free(value[:n])  # we allocated all of value: free what the tree had

    @rule(key=keys)
    def match(self, key: list[int]) -> None:
        k = tuple(key)
        m = self.cache.match_prefix(k)
        n = self.cached_len(k)
        assert m.indices.dtype == torch.int64
        assert m.indices.tolist() == self.ref_slots(k, n)
        path: tuple[int, ...] = ()
        node = m.last_node
        while node is not self.cache.root:
            assert node.parent is not None
            path = node.key + path
            node = node.parent
        assert path == k[:n]
        self.assert_path_most_recent(path)

    @precondition(lambda self: len(self.requests) < MAX_IN_FLIGHT)
    @rule(key=keys)
    def start_request(self, key: list[int]) -> None:
        k = tuple(key)
        m = self.cache.match_prefix(k)
        delta = self.cache.inc_lock_ref(m.last_node)
        assert delta <= 0
        own = self.alloc_or_evict(len(k) - m.indices.numel())
        if own is None:
            assert self.cache.dec_lock_ref(m.last_node) == -delta
            return
        self.requests.append(Request(k, m.indices, own, m.last_node))

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def finish_request(self, data: st.DataObject) -> None:
        req = self.requests.pop(data.draw(st.integers(0, len(self.requests) - 1)))
        p = req.prefix.numel()
        value = torch.cat((req.prefix, req.own))
        expected = self.cached_len(req.key)
        n = self.cache.insert(req.key, value)
        assert n == expected >= p
        self.record_insert(req.key, value, n)
        self.alloc.free(value[p:n])  # only our own slots for tokens the tree already had
        assert self.cache.dec_lock_ref(req.last_node) >= 0

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def abort_request(self, data: st.DataObject) -> None:
        req = self.requests.pop(data.draw(st.integers(0, len(self.requests) - 1)))
        self.alloc.free(req.own)
        self.cache.dec_lock_ref(req.last_node)

    @rule(key=keys)
    def lock(self, key: list[int]) -> None:
        k = tuple(key)
        m = self.cache.match_prefix(k)
        self.cache.inc_lock_ref(m.last_node)
        self.locks.append(Lock(k[: m.indices.numel()], m.indices, m.last_node))

    @precondition(lambda self: self.locks)
    @rule(data=st.data())
    def unlock(self, data: st.DataObject) -> None:
        lock = self.locks.pop(data.draw(st.integers(0, len(self.locks) - 1)))
        self.cache.dec_lock_ref(lock.node)

    @rule(num_tokens=st.integers(min_value=0, max_value=POOL_SIZE))
    def evict_tokens(self, num_tokens: int) -> None:
        self.evict(num_tokens)

    @precondition(lambda self: not self.requests and not self.locks)
    @rule()
    def reset(self) -> None:
        self.cache.reset()
        self.ref.clear()
        assert self.alloc.available_size() == self.alloc.size

    # ------------------------------------------------------------------ invariants

    @invariant()
    def sizes_agree(self) -> None:
        nodes = self.nodes()
        total = sum(n.value.numel() for n in nodes)
        protected = sum(n.value.numel() for n in nodes if n.lock_ref > 0)
        in_flight = sum(r.own.numel() for r in self.requests)
        used = self.alloc.size - self.alloc.available_size()
        assert self.cache.evictable_size() + self.cache.protected_size() == self.cache.total_size()
        assert self.cache.total_size() == total == used - in_flight, self.cache.pretty_print()
        assert self.cache.protected_size() == protected

    @invariant()
    def nodes_well_formed(self) -> None:
        for node in self.nodes():
            assert len(node.key) == node.value.numel() > 0
            assert node.value.dtype == torch.int64
            assert node.parent is not None and node.parent.children[node.key[0]] is node
            assert node.parent.last_access_time >= node.last_access_time

    @invariant()
    def lock_refs_count_held_locks(self) -> None:
        expected: Counter[int] = Counter()
        for node in self.held_nodes():
            while node is not self.cache.root:
                assert node.parent is not None, "a locked node left the tree"
                expected[id(node)] += 1
                node = node.parent
        for node in self.nodes():
            assert node.lock_ref == expected[id(node)]

    @invariant()
    def tree_matches_model(self) -> None:
        tree = self.tree_map()
        assert tree == self.ref
        all_slots = [s for n in self.nodes() for s in n.value.tolist()]
        assert len(all_slots) == len(set(all_slots)), "a slot appears twice in the tree"
        assert DUMMY_SLOT not in all_slots
        own = {s for r in self.requests for s in r.own.tolist()}
        assert own.isdisjoint(all_slots)

    @invariant()
    def locked_slots_survive(self) -> None:
        for req in self.requests:
            p = req.prefix.numel()
            assert self.ref_slots(req.key, p) == req.prefix.tolist()
        for lock in self.locks:
            assert self.ref_slots(lock.key, len(lock.key)) == lock.slots.tolist()

    def nodes(self) -> list[TreeNode]:
        out: list[TreeNode] = []
        stack = list(self.cache.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out


RadixCacheMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRadixCacheProperties = RadixCacheMachine.TestCase
