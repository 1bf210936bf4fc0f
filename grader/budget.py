"""Character budgets for what the judge reads: truncation, fair shares, compact listings.

Shared by the change log (grader/diff.py) and the evidence selection (grader/evidence.py), so
both cut, share and summarise the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Set as AbstractSet

_WORD = re.compile(r"[a-z0-9][a-z0-9_.\-]{2,}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "are",
        "was",
        "were",
        "has",
        "have",
        "not",
        "all",
        "any",
        "its",
        "into",
        "per",
    ]
)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was shown."""
    if len(text) <= limit:
        return text
    marker = f"\n[... truncated: {limit} of {len(text)} characters shown]"
    return text[: max(0, limit - len(marker))] + marker


def fair_shares(lengths: list[int], budget: int) -> list[int]:
    """Split ``budget`` so small items keep everything and large ones share the rest equally."""
    shares = [0] * len(lengths)
    remaining = list(range(len(lengths)))
    left = max(budget, 0)
    while remaining:
        share = left // len(remaining)
        small = [i for i in remaining if lengths[i] <= share]
        if not small:
            for i in remaining:
                shares[i] = share
            break
        for i in small:
            shares[i] = lengths[i]
            left -= lengths[i]
        remaining = [i for i in remaining if i not in small]
    return shares


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n`` for a newline).

    A file name is the agent's to choose: one holding a newline must not forge a line of
    the change log ("file deleted: …") or of a listing."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def counted(count: int, kind: str) -> str:
    """``3 created files`` from (3, ``created file``); ``1 deleted file``."""
    return f"{count} {kind}{'' if count == 1 else 's'}"


def size(lines: list[str]) -> int:
    """Characters of ``lines`` joined one per line."""
    return sum(len(line) + 1 for line in lines)


def criterion_words(criterion: str) -> set[str]:
    """The words of a criterion that say what it is about (lower case, stop words left out)."""
    return {word for word in _WORD.findall(criterion.lower()) if word not in _STOP}


def _folder(path: str | None) -> str:
    return printable(path.rsplit("/", 1)[0] + "/") if path and "/" in path else ""


def named_within(
    items: list[tuple[str, str | None, str]], limit: int, words: AbstractSet[str] = frozenset()
) -> list[str]:
    """A listing of many changes in about ``limit`` characters that names as many as fit and
    counts the rest per kind and folder (``2990 more deleted files in /Contracts/``), none
    left out.

    ``items`` are ``(kind, path, line)``; an item is named by its ``line``. Named first: items
    whose path holds one of ``words`` (the criterion's), then items of the smallest folders,
    so a deletion that matters cannot hide among thousands elsewhere or be out-sorted by
    names chosen to come first. When even the counts do not fit, they are all there is."""
    keys = [(kind, _folder(path)) for kind, path, _line in items]
    remaining: Counter[tuple[str, str]] = Counter(keys)
    group_size = dict(remaining)

    def hits(path: str | None) -> int:
        lowered = (path or "").lower()
        return sum(word in lowered for word in words)

    def count_line(key: tuple[str, str], count: int, some_named: bool) -> str:
        kind, folder = key
        return counted(count, f"more {kind}" if some_named else kind) + (f" in {folder}" if folder else "")

    order = sorted(range(len(items)), key=lambda i: (-hits(items[i][1]), group_size[keys[i]], i))
    used = size([count_line(key, count, False) for key, count in remaining.items()])
    named: set[int] = set()
    for index in order:
        key, line = keys[index], items[index][2]
        before = len(count_line(key, remaining[key], remaining[key] < group_size[key])) + 1
        after = len(count_line(key, remaining[key] - 1, True)) + 1 if remaining[key] > 1 else 0
        if used + len(line) + 1 - before + after > limit:
            continue
        named.add(index)
        remaining[key] -= 1
        used += len(line) + 1 - before + after
    lines = [items[index][2] for index in order if index in named]
    lines += [
        count_line(key, count, count < group_size[key]) for key, count in remaining.items() if count > 0
    ]
    return lines
