"""The knowledge base's text caches: bounded by weight, least recently used out first."""

from __future__ import annotations

from mcp_analysis.corpus import _LRU


def test_the_least_recently_used_entry_leaves_first_when_the_weight_is_over() -> None:
    cache = _LRU(10)
    cache.put("a", "aaaa", 4)
    cache.put("b", "b", 5)
    assert cache.get("a") == "aaaa"  # a is now the most recent
    cache.put("c", "ccc", 3)  # 12 > 10: b goes, not a
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("aaaa", None, "ccc")
    assert cache.currsize == 7


def test_an_entry_heavier_than_the_cache_is_not_kept_and_drops_nothing() -> None:
    cache = _LRU(10)
    cache.put("a", "aaaa", 4)
    cache.put("huge", "x", 11)
    assert (cache.get("huge"), cache.get("a")) == (None, "aaaa")


def test_putting_a_key_again_replaces_its_weight() -> None:
    cache = _LRU(10)
    cache.put("a", "first", 8)
    cache.put("a", "second", 2)
    cache.put("b", "b", 8)
    assert (cache.get("a"), cache.get("b"), cache.currsize) == ("second", "b", 10)
