"""KV-cache memory: slot allocation, KV buffers, request→slot table, prefix cache.

Knows nothing of models or requests beyond token ids and slot indices.
"""

from engine.memory.budget import available_memory_bytes, memory_budget_bytes
from engine.memory.kv_pool import KVPool
from engine.memory.radix_cache import RadixCache
from engine.memory.req_to_token import ReqToTokenPool
from engine.memory.token_allocator import DUMMY_SLOT, TokenAllocator
from engine.memory.tree_node import MatchResult, TreeNode

__all__ = [
    "DUMMY_SLOT",
    "KVPool",
    "MatchResult",
    "RadixCache",
    "ReqToTokenPool",
    "TokenAllocator",
    "TreeNode",
    "available_memory_bytes",
    "memory_budget_bytes",
]
