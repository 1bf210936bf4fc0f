"""What the suite's type check (tests/atoll/test_types.py) costs: mypy's CPU seconds from a
cold cache, with the repository's configuration, beside a fixed pure-Python loop timed in the
same process (benchmarks/machine.py), so that runs on machines of different speeds can be
compared (the ratio).

The suite does not time mypy: a timed test fails on a slow or busy machine (this one ran the
same check in 31 CPU-s one day and 47 the next), and speed targets live here
(docs/performance.md, "The type check").

    .venv/bin/python benchmarks/typecheck.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import loop_cpu_s  # noqa: E402


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _mypy_cpu_s() -> float:
    with tempfile.TemporaryDirectory() as cache:
        before = _children_cpu_s()
        found = subprocess.run(
            [sys.executable, "-m", "mypy", "--cache-dir", cache, "--no-error-summary"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        spent = _children_cpu_s() - before
    if found.returncode != 0:
        raise SystemExit(f"mypy found type errors:\n{found.stdout}{found.stderr}")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    loops, checks = [], []
    for _ in range(args.repeat):
        loops.append(loop_cpu_s())
        checks.append(_mypy_cpu_s())
    ratios = [check / loop for check, loop in zip(checks, loops, strict=True)]
    print(
        f"mypy, cold cache: {min(checks):.1f}–{max(checks):.1f} CPU-s (median {statistics.median(checks):.1f})"
    )
    print(f"calibration loop: {min(loops):.2f}–{max(loops):.2f} CPU-s")
    print(f"ratio mypy / loop: {min(ratios):.0f}–{max(ratios):.0f}")


if __name__ == "__main__":
    main()
