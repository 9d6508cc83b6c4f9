"""The cache-aware policy and its prefix tree, on their own: matching, balance, eviction."""

from __future__ import annotations

from router.backend import Backend, BackendState
from router.prefix_tree import PrefixTree
from router.registry import Registry
from router.routing_policy import CacheAware, CacheAwareSettings, LeastInFlight
from router.routing_text import routing_text

A, B, C = (Backend(id=i, model="m", base_url=f"http://{i}", state=BackendState.READY) for i in "abc")


def chat(*turns: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": t} for t in turns]}


def test_tree_matches_the_longest_prefix_per_tenant() -> None:
    tree = PrefixTree(max_chars_per_tenant=1000)
    tree.insert("hello world", "a")
    tree.insert("hello there", "b")
    tree.insert("help", "c")
    assert tree.match("hello world, again", ["a", "b", "c"]).tenant == "a"
    assert tree.match("hello world, again", ["a", "b", "c"]).matched_chars == len("hello world")
    assert tree.match("hello there!", ["a", "b"]).tenant == "b"
    # NOTE: "hello " is held by a and b; c holds "hel" only; with only c asked, that is its match
    found = tree.match("hello world", ["c"])
    assert (found.tenant, found.matched_chars) == ("c", 3)
    assert tree.match("goodbye", ["a", "b", "c"]).tenant is None
    assert tree.chars("a") == len("hello world")
    assert tree.chars("c") == len("help")


def test_tree_prefers_the_tenant_that_used_a_shared_prefix_last() -> None:
    tree = PrefixTree(max_chars_per_tenant=1000)
    tree.insert("shared system prompt", "a")
    tree.insert("shared system prompt", "b")
    assert tree.match("shared system prompt + question", ["a", "b"]).tenant == "b"
    tree.insert("shared system prompt", "a")
    assert tree.match("shared system prompt + question", ["a", "b"]).tenant == "a"


def test_tree_evicts_the_least_recently_used_text_past_its_bound() -> None:
    tree = PrefixTree(max_chars_per_tenant=100)
    for i in range(10):
        tree.insert(f"{i:02d}" + "x" * 18, "a")  # NOTE: 20 distinct characters each
        tree.insert(f"{i:02d}" + "y" * 18, "b")
    assert tree.chars("a") <= 100
    assert tree.match("09" + "x" * 18, ["a"]).matched_chars == 20  # the newest is kept
    # NOTE: the oldest went; its "0" is still held, as the start of "09..."
    assert tree.match("00" + "x" * 18, ["a"]).matched_chars == 1
    tree.remove_tenant("a")
    assert tree.chars("a") == 0
    assert tree.match("09" + "x" * 18, ["a"]).tenant is None
    assert tree.match("09" + "y" * 18, ["a", "b"]).tenant == "b"


def test_cache_aware_keeps_a_conversation_on_its_replica() -> None:
    policy = CacheAware()
    idle = {"a": 0, "b": 0, "c": 0}
    first = policy.choose([A, B, C], idle.__getitem__, chat("long shared system prompt " * 4))
    again = chat("long shared system prompt " * 4, "and a follow-up")
    assert policy.choose([A, B, C], idle.__getitem__, again) is first
    # NOTE: a prompt with nothing in common goes to the least loaded; on a tie, the one
    # holding the least text, so new conversations spread over the replicas.
    other = policy.choose([A, B, C], idle.__getitem__, chat("something else entirely"))
    assert other is not first


def test_cache_aware_falls_back_to_the_least_loaded_when_unbalanced_or_short() -> None:
    policy = CacheAware(CacheAwareSettings(cache_threshold=0.5, balance_abs=4, balance_rel=1.5))
    prompt = chat("x" * 200)
    loads = {"a": 0, "b": 1, "c": 1}
    assert policy.choose([A, B, C], loads.__getitem__, prompt) is A
    # NOTE: balanced (a difference of 3 is within 4): the cached replica keeps it
    loads = {"a": 3, "b": 0, "c": 1}
    assert policy.choose([A, B, C], loads.__getitem__, chat("x" * 200 + "more")) is A
    loads = {"a": 9, "b": 0, "c": 1}  # NOTE: 9 - 0 > 4 and 9 > 1.5 x 0: unbalanced
    assert policy.choose([A, B, C], loads.__getitem__, chat("x" * 200 + "again")) is B
    # NOTE: balanced, but the match (the "user:" label) is under half of the prompt
    loads = {"a": 0, "b": 1, "c": 1}
    assert policy.choose([A, B, C], loads.__getitem__, chat("y" * 200)) is A
    loads = {"a": 2, "b": 1, "c": 0}
    assert policy.choose([A, B, C], loads.__getitem__, chat("z" * 200)) is C


def test_registry_forgets_a_removed_replica_and_avoids_failed_ones() -> None:
    policy = CacheAware()
    registry = Registry(policy)
    for backend in (A, B):
        registry.register(backend)
    prompt = chat("the same long prompt " * 5)
    first = registry.pick("m", payload=prompt)
    assert registry.pick("m", payload=prompt) is first
    assert registry.pick("m", payload=prompt, avoid=frozenset({first.id})) is not first
    registry.remove(first.id, "test")
    assert policy.tree.chars(first.id) == 0
    # NOTE: every replica failed: the one left is still tried rather than none
    (left,) = registry.backends()
    assert registry.pick("m", payload=prompt, avoid=frozenset({left.id})) is left


def test_least_in_flight_ignores_the_prompt() -> None:
    loads = {"a": 2, "b": 1, "c": 1}
    assert LeastInFlight().choose([A, B, C], loads.__getitem__, chat("anything")) is B


def test_routing_text_keeps_a_growing_conversation_as_a_prefix() -> None:
    one = routing_text({"model": "m", "system": "sys", "messages": [{"role": "user", "content": "q1"}]})
    two = routing_text(
        {
            "model": "m",
            "system": "sys",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "q1"}]},
                {"role": "assistant", "content": "a1"},
            ],
        }
    )
    assert two.startswith(one)
    assert routing_text({"model": "m", "prompt": "abc"}) == "abc"
    assert routing_text({"model": "m"}) == ""
