"""Parsed once per content (atoll.content_cache): the same bytes under the same name are
built once; anything else that decides the value is part of its name; the bounds hold."""

from __future__ import annotations

import threading

import pytest

from atoll.content_cache import ContentCache


def _counting(cache: ContentCache[list[str]]):
    built: list[bytes] = []

    def get(data: bytes, name: object = "x") -> list[str]:
        def build() -> list[str]:
            built.append(data)
            return data.decode().split()

        return cache.get(data, name, build)

    return get, built


def test_the_same_bytes_under_the_same_name_are_built_once():
    cache: ContentCache[list[str]] = ContentCache(max_entries=8)
    get, built = _counting(cache)
    first = get(b"a b c")
    assert get(bytearray(b"a b c")) is first  # by content, whatever holds the bytes
    assert get(b"a b c", name="other") == first and len(built) == 2  # the name is part of the key
    assert get(b"a b d") == ["a", "b", "d"] and len(built) == 3
    assert (cache.hits, cache.misses) == (1, 3)


def test_the_least_recently_used_go_first_past_the_count():
    cache: ContentCache[list[str]] = ContentCache(max_entries=2)
    get, built = _counting(cache)
    get(b"one")
    get(b"two")
    get(b"one")  # used again: "two" is now the oldest
    get(b"three")
    assert len(cache) == 2
    get(b"one")
    assert built.count(b"one") == 1
    get(b"two")
    assert built.count(b"two") == 2


def test_the_weight_is_bounded_and_a_heavy_value_is_never_kept():
    cache: ContentCache[list[str]] = ContentCache(max_entries=100, max_weight=8, weigh=len)
    get, built = _counting(cache)
    get(b"a b c")  # weight 3: more than a quarter of 8, built and not kept
    get(b"a b c")
    assert built.count(b"a b c") == 2 and len(cache) == 0
    for word in (b"p q", b"r s", b"t u", b"v w", b"x y"):  # 2 each: 10 > 8, the oldest goes
        get(word)
    assert len(cache) == 4
    get(b"p q")
    assert built.count(b"p q") == 2


def test_a_value_refused_or_a_build_that_raises_is_not_kept():
    cache: ContentCache[list[str]] = ContentCache(max_entries=8, keep=lambda words: "bad" not in words)
    get, built = _counting(cache)
    get(b"bad input")
    get(b"bad input")
    assert built.count(b"bad input") == 2

    def broken() -> list[str]:
        raise ValueError("not a calendar")

    for _ in range(2):
        with pytest.raises(ValueError, match="not a calendar"):
            cache.get(b"broken", None, broken)
    assert len(cache) == 0


def test_weight_and_its_bound_go_together():
    with pytest.raises(ValueError, match="together"):
        ContentCache(max_entries=1, max_weight=10)


def test_threads_share_one_cache_without_losing_count():
    cache: ContentCache[list[str]] = ContentCache(max_entries=4)
    get, _ = _counting(cache)
    contents = [f"content {n}".encode() for n in range(8)]

    def work() -> None:
        for _ in range(200):
            for data in contents:
                assert get(data) == data.decode().split()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 4 and cache.hits + cache.misses == 4 * 200 * 8


def test_threads_missing_the_same_content_at_once_share_one_build():
    cache: ContentCache[str] = ContentCache(max_entries=4)
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []

    def build() -> str:
        builds.append(1)
        started.set()
        assert release.wait(10)
        return "built"

    results: list[str] = []
    first = threading.Thread(target=lambda: results.append(cache.get(b"slow", None, build)))
    first.start()
    assert started.wait(10)
    waiters = [
        threading.Thread(target=lambda: results.append(cache.get(b"slow", None, build))) for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    other = cache.get(b"another content", None, lambda: "not held up")  # a slow build holds up no other
    release.set()
    for thread in [first, *waiters]:
        thread.join(10)
    assert other == "not held up"
    assert results == ["built"] * 4 and len(builds) == 1
