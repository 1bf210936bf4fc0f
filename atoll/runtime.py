"""Process-level tuning for long-running atoll services.

A service imports a large, long-lived heap (FastAPI, FastMCP, pydantic, the office libraries).
CPython's full ("generation 2") collection walks all of it: in the environment that was a
140 ms pause every few hundred tool calls, the whole of its p99 latency. Freezing the heap once
startup is done moves those objects out of the collector's reach; what requests allocate is
still collected as usual.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect once, then exempt every object alive now from later cyclic collections.

    Call it when startup (imports, caches built at start) is over; calling it again later
    freezes what has been added since. Objects frozen here are still freed by reference
    counting; only cycles among them would outlive their use, which long-lived startup
    objects do not form in meaningful numbers.
    """
    gc.collect()
    gc.freeze()
