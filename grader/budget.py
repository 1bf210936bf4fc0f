"""Character budgets for what the judge reads: truncation, fair shares, compact listings.

Shared by the change log (grader/diff.py) and the evidence selection (grader/evidence.py), so
both cut, share and summarise the same way.
"""

from __future__ import annotations

from collections import Counter


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


def by_folder(items: list[tuple[str, str | None]]) -> list[str]:
    """The most compact account of many changes, none left out: ``(kind, path)`` pairs counted
    per kind and folder (``312 deleted files in /Contracts/``), or per kind without a path."""
    counts: Counter[tuple[str, str]] = Counter()
    for kind, path in items:
        folder = path.rsplit("/", 1)[0] + "/" if path and "/" in path else ""
        counts[(kind, printable(folder))] += 1
    return [
        counted(count, kind) + (f" in {folder}" if folder else "") for (kind, folder), count in counts.items()
    ]
