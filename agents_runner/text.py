"""Text helpers: truncation that states what it cut, and key-value extraction for summaries."""

from __future__ import annotations

import re


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut ``text`` to about ``max_chars``, keeping the head and the tail.

    The marker names the omitted span in characters, so the model knows what it did not see
    and can ask for it (e.g. with a narrower read).  Returns ``(text, truncated)``."""
    if len(text) <= max_chars:
        return text, False
    head = int(max_chars * 0.7)
    tail = max(0, max_chars - head)
    omitted_from, omitted_to = head, len(text) - tail
    marker = (
        f"\n[... truncated: characters {omitted_from}-{omitted_to} of {len(text)} omitted "
        f"({omitted_to - omitted_from} characters); request a narrower range to see them ...]\n"
    )
    return text[:head] + marker + (text[len(text) - tail :] if tail else ""), True


_KEY_VALUE_PATTERNS = [
    re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),  # e-mail addresses
    re.compile(r"(?<![\w/])/(?:[\w .()-]+/)*[\w .()-]+\.\w{2,5}\b"),  # file paths
    re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?\s?(?:[kmb]n?|million|billion)?", re.IGNORECASE),  # money
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),  # ISO dates
    re.compile(r"\b\d[\d,]*\.\d+%?|\b\d{1,3}(?:,\d{3})+\b|\b\d+%"),  # decimals, grouped numbers, percents
    re.compile(r"\b(?:id|ID|Id)[:= ]\s*[\w-]{3,}"),  # identifiers
]


def key_values(text: str, limit: int = 40) -> list[str]:
    """Distinct addresses, paths, amounts, dates, numbers and ids found in ``text`` (in order)."""
    found: list[str] = []
    seen: set[str] = set()
    for pattern in _KEY_VALUE_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).strip()
            if value and value not in seen:
                seen.add(value)
                found.append(value)
                if len(found) >= limit:
                    return found
    return found


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
