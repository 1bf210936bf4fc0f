"""How fast this machine runs CPython, for comparing CPU figures measured on different
machines of one kind (their speed differs from day to day: a shared 2-vCPU machine gave 0.29
and 0.54 CPU-s per trial for the same code, docs/performance.md "Paper scale")."""

from __future__ import annotations

import time


def loop_cpu_s() -> float:
    """CPU seconds of ten million additions in CPython (best of three)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        total = 0
        for number in range(10_000_000):
            total += number
        best = min(best, time.process_time() - started)
    return best
