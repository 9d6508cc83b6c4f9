"""Node of the radix cache and the result of a prefix match."""

from __future__ import annotations

from dataclasses import dataclass

import torch


class TreeNode:
    """One edge of the radix tree: a run of tokens and the KV slots that hold them.

    ``key[i]`` is a token id and ``value[i]`` the KV slot holding that token's K/V, given
    the tokens on the path from the root before it. Children are keyed by the first token
    of their ``key``.

    NOTE: ``lock_ref`` counts the locks held on this node or any descendant; a node with
    ``lock_ref > 0`` is never evicted. ``parent`` is None for the root and for a node that
    has been evicted or dropped by ``reset`` (a detached node must not be locked again).
    """

    __slots__ = ("children", "key", "last_access_time", "lock_ref", "node_id", "parent", "value")

    def __init__(
        self,
        node_id: int,
        key: tuple[int, ...],
        value: torch.Tensor,
        parent: TreeNode | None,
        last_access_time: int,
        lock_ref: int = 0,
    ) -> None:
        self.node_id = node_id
        self.key = key
        self.value = value
        self.children: dict[int, TreeNode] = {}
        self.parent = parent
        self.lock_ref = lock_ref
        self.last_access_time = last_access_time

    def __repr__(self) -> str:
        return (
            f"TreeNode(id={self.node_id}, key={list(self.key)}, value={self.value.tolist()}, "
            f"lock_ref={self.lock_ref}, t={self.last_access_time})"
        )


@dataclass(frozen=True)
class MatchResult:
    """What ``RadixCache.match_prefix`` found.

    ``indices`` are the KV slots of the matched prefix (int64, possibly empty), in token
    order; ``last_node`` is the node where the match ends (the root when nothing matched).
    Lock ``last_node`` to keep those slots from being evicted while they are in use.
    """

    indices: torch.Tensor
    last_node: TreeNode
