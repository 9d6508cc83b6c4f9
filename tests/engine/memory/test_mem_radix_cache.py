import pytest
import torch

from engine.memory import RadixCache, TokenAllocator


def make_cache(size: int = 64, disable: bool = False) -> tuple[RadixCache, TokenAllocator]:
    alloc = TokenAllocator(size, debug=True)
    return RadixCache(alloc, disable=disable), alloc


def slots(alloc: TokenAllocator, n: int) -> torch.Tensor:
    out = alloc.alloc(n)
    assert out is not None
    return out


def put(cache: RadixCache, alloc: TokenAllocator, key: list[int]) -> int:
    """Insert ``key`` with freshly allocated slots, freeing the duplicates as the API says."""
    value = slots(alloc, len(key))
    n = cache.insert(key, value)
    alloc.free(value[:n])
    return n


def used(alloc: TokenAllocator) -> int:
    return alloc.size - alloc.available_size()


def test_empty_tree_matches_nothing() -> None:
    cache, _ = make_cache()
    m = cache.match_prefix([1, 2, 3])
    assert m.indices.numel() == 0 and m.indices.dtype == torch.int64
    assert m.last_node is cache.root
    assert cache.match_prefix([]).last_node is cache.root


def test_insert_then_match_full_and_partial() -> None:
    cache, alloc = make_cache()
    v = slots(alloc, 4)
    assert cache.insert([1, 2, 3, 4], v) == 0
    assert cache.total_size() == 4 == cache.evictable_size()
    assert cache.match_prefix([1, 2, 3, 4, 5]).indices.tolist() == v.tolist()
    m = cache.match_prefix([1, 2, 9])
    assert m.indices.tolist() == v[:2].tolist()
    # The match ended inside the node, so it was split at the match boundary.
    assert m.last_node.key == (1, 2)
    assert list(m.last_node.children) == [3]
    assert m.last_node.children[3].key == (3, 4)
    assert cache.total_size() == 4


def test_insert_returns_already_cached_prefix_and_caller_frees_duplicates() -> None:
    cache, alloc = make_cache()
    cache.insert([1, 2, 3], slots(alloc, 3))
    v = slots(alloc, 5)
    n = cache.insert([1, 2, 7, 8, 9], v)
    assert n == 2
    alloc.free(v[:n])  # the caller allocated all of v, so it frees the duplicate part
    assert cache.total_size() == 6 == used(alloc)
    assert cache.match_prefix([1, 2, 7, 8, 9]).indices[2:].tolist() == v[2:].tolist()
    # Inserting a key that is fully cached stores nothing.
    w = slots(alloc, 2)
    assert cache.insert([1, 2], w) == 2
    alloc.free(w)
    assert cache.total_size() == used(alloc) == 6


def test_request_protocol_frees_only_own_duplicates() -> None:
    cache, alloc = make_cache()
    cache.insert([1, 2], slots(alloc, 2))
    m = cache.match_prefix([1, 2, 3, 4])
    cache.inc_lock_ref(m.last_node)
    p = m.indices.numel()
    value = torch.cat((m.indices, slots(alloc, 2)))
    # Another request caches token 3 meanwhile.
    cache.insert([1, 2, 3], torch.cat((m.indices, slots(alloc, 1))))
    n = cache.insert([1, 2, 3, 4], value)
    assert (p, n) == (2, 3)
    alloc.free(value[p:n])
    cache.dec_lock_ref(m.last_node)
    assert cache.total_size() == used(alloc) == 4


def test_insert_value_is_cloned() -> None:
    cache, alloc = make_cache()
    v = slots(alloc, 3).clone()
    expected = v.tolist()
    cache.insert([5, 6, 7], v)
    v.fill_(0)
    assert cache.match_prefix([5, 6, 7]).indices.tolist() == expected


def test_insert_rejects_length_mismatch() -> None:
    cache, alloc = make_cache()
    with pytest.raises(ValueError):
        cache.insert([1, 2], slots(alloc, 3))


def test_lock_moves_sizes_and_prevents_eviction() -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    assert put(cache, alloc, [1, 2, 4, 5]) == 2
    m = cache.match_prefix([1, 2, 3])
    assert cache.inc_lock_ref(m.last_node) == -3  # [1,2] and [3]
    assert (cache.evictable_size(), cache.protected_size()) == (2, 3)
    assert cache.inc_lock_ref(m.last_node) == 0
    assert cache.evict(100) == 2  # only [4,5]
    assert cache.match_prefix([1, 2, 3]).indices.numel() == 3
    assert cache.dec_lock_ref(m.last_node) == 0
    assert cache.dec_lock_ref(m.last_node) == 3
    with pytest.raises(ValueError):
        cache.dec_lock_ref(m.last_node)
    assert cache.evict(100) == 3
    assert cache.total_size() == used(alloc) == 0


def test_split_of_locked_node_keeps_lock_on_both_parts() -> None:
    cache, alloc = make_cache()
    cache.insert([1, 2, 3, 4], slots(alloc, 4))
    m = cache.match_prefix([1, 2, 3, 4])
    cache.inc_lock_ref(m.last_node)
    upper = cache.match_prefix([1, 2]).last_node
    assert upper.lock_ref == 1 and m.last_node.lock_ref == 1
    assert cache.protected_size() == 4
    assert cache.dec_lock_ref(m.last_node) == 4
    assert cache.evictable_size() == 4


def test_evict_is_lru_by_logical_clock() -> None:
    cache, alloc = make_cache()
    a, b, c = slots(alloc, 2), slots(alloc, 2), slots(alloc, 2)
    cache.insert([1, 1], a)
    cache.insert([2, 2], b)
    cache.insert([3, 3], c)
    cache.match_prefix([1, 1])  # [2,2] is now the least recently used
    assert cache.evict(1) == 2
    assert cache.match_prefix([2, 2]).indices.numel() == 0
    assert cache.match_prefix([1, 1]).indices.numel() == 2
    assert cache.evict(1) == 2  # [3,3]: touched before the two matches above
    assert cache.match_prefix([3, 3]).indices.numel() == 0
    assert sorted(alloc.alloc(alloc.available_size()).tolist()[-4:]) == sorted(
        b.tolist() + c.tolist()
    )


def test_evict_cascades_to_parent_that_becomes_leaf() -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4])
    assert cache.evict(4) == 4  # both leaves [3], [4], then [1,2]
    assert cache.total_size() == used(alloc) == 0
    assert not cache.root.children


def test_evict_on_everything_locked_frees_nothing() -> None:
    cache, alloc = make_cache()
    cache.insert([1, 2], slots(alloc, 2))
    cache.inc_lock_ref(cache.match_prefix([1, 2]).last_node)
    assert cache.evict(10) == 0
    assert cache.evict(0) == 0


def test_reset_returns_all_slots_and_detaches_nodes() -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 5])
    node = cache.match_prefix([1, 5]).last_node
    cache.inc_lock_ref(node)
    cache.reset()
    assert alloc.available_size() == alloc.size
    assert cache.total_size() == cache.evictable_size() == cache.protected_size() == 0
    assert cache.match_prefix([1, 2, 3]).indices.numel() == 0
    with pytest.raises(ValueError):
        cache.inc_lock_ref(node)


def test_disabled_cache_stores_nothing_and_caller_frees_everything() -> None:
    cache, alloc = make_cache(disable=True)
    v = slots(alloc, 3)
    m = cache.match_prefix([1, 2, 3])
    assert m.indices.numel() == 0 and m.last_node is cache.root
    assert cache.inc_lock_ref(m.last_node) == 0
    n = cache.insert([1, 2, 3], v)
    assert n == 3
    alloc.free(v[m.indices.numel() : n])
    assert cache.dec_lock_ref(m.last_node) == 0
    assert used(alloc) == cache.total_size() == 0
    assert cache.evict(10) == 0
    assert cache.match_prefix([1, 2, 3]).indices.numel() == 0


def test_pretty_print_lists_nodes() -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2])
    put(cache, alloc, [1, 3])
    text = cache.pretty_print()
    assert len(text.splitlines()) == 4  # root, [1], [2], [3]
    assert "key=[1]" in text
