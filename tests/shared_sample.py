"""The sample benchmark (seed 0) for tests: generated once per test process, copied per user.

Generation is deterministic and does not depend on the output path (tests/sample/test_layout.py
proves both), so a copy is byte-for-byte what ``generate_sample_benchmark(target)`` would write,
at a fraction of the cost (the generator runs ~2 s of CPU; a dozen modules used to run it).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from atoll_sample import generate_sample_benchmark


@functools.cache
def generated_sample() -> Path:
    """The one generated copy of this process; removed at exit. Treat it as read-only."""
    scratch = Path(tempfile.mkdtemp(prefix="atoll-sample-test-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return generate_sample_benchmark(scratch / "bench", seed=0)


def fresh_sample_benchmark(target: str | Path) -> Path:
    """A private copy of the sample benchmark at ``target`` (which may exist, empty); returns it."""
    shutil.copytree(generated_sample(), target, dirs_exist_ok=True)
    return Path(target)
