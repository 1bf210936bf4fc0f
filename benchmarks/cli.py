"""CLI answers: help and argument errors (issue 19: each <= 0.5 s).

Each case runs ``atoll ARGS`` as a user does, in a fresh process, ``--runs`` times; the script
prints the best and median wall time and the child's CPU (user + system, from rusage) beside
the target, and the interpreter's own floor (``python -c pass``, same runs, same minutes) as
the baseline every command pays. The wrong ``--task-id`` case writes the sample benchmark
first (it must be refused before any runner, model client or gateway is imported).

    .venv/bin/python benchmarks/cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ATOLL = str(Path(sys.executable).parent / "atoll")
TARGET_S = 0.5


def timed(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, the child's CPU seconds and its exit code for one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="runs per case (best and median printed)")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        benchmark = Path(tmp) / "bench"
        subprocess.run([ATOLL, "bench", "sample", str(benchmark)], check=True, capture_output=True)
        cases: dict[str, tuple[list[str], int]] = {
            "python -c pass (floor, baseline)": ([sys.executable, "-c", "pass"], 0),
            "atoll --help": ([ATOLL, "--help"], 0),
            "atoll run --help": ([ATOLL, "run", "--help"], 0),
            "atoll agent run --help": ([ATOLL, "agent", "run", "--help"], 0),
            "atoll run (missing experiment)": ([ATOLL, "run"], 2),
            "atoll agent run --task-id WRONG": (
                [
                    ATOLL,
                    "agent",
                    "run",
                    "--output",
                    str(Path(tmp) / "t.json"),
                    "--gateway-url",
                    "http://127.0.0.1:9/mcp",
                    "--model",
                    "openai/m",
                    "--benchmark",
                    str(benchmark),
                    "--task-id",
                    "no-such-task",
                ],
                2,
            ),  # fmt: skip
        }
        results: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
        for _ in range(args.runs):  # rounds: a slow minute costs one run of each case
            for label, (argv, expected) in cases.items():
                wall, cpu, code = timed(argv)
                if code != expected:
                    raise SystemExit(f"{label}: exit {code}, expected {expected}")
                results[label].append((wall, cpu))
    print(f"# CLI answers (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each)")
    floor = min(wall for wall, _ in results["python -c pass (floor, baseline)"])
    worst = 0.0
    for label, values in results.items():
        walls = sorted(wall for wall, _ in values)
        cpus = sorted(cpu for _, cpu in values)
        line = (
            f"  {label:36} wall best {walls[0]:5.2f} s  median {statistics.median(walls):5.2f} s"
            f"   CPU best {cpus[0]:5.2f} s  median {statistics.median(cpus):5.2f} s"
        )
        if not label.startswith("python"):
            worst = max(worst, statistics.median(walls))
            line += (
                f"   {statistics.median(walls) / TARGET_S:.2f}x of 0.5 s, {walls[0] / floor:.1f}x the floor"
            )
        print(line)
    print(
        f"  target (issue 19): help and argument errors <= 0.5 s: slowest median {worst:.2f} s"
        f" ({worst / TARGET_S:.2f}x) -> {'met' if worst <= TARGET_S else 'NOT met'}"
    )
    print(f"\n(load average at end: {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
