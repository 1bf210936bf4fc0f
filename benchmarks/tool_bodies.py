"""Tool bodies: the CPU one file tool spends beneath the root, without the MCP machinery.

    .venv/bin/python benchmarks/tool_bodies.py [--calls 2000] [--rounds 7]
    .venv/bin/python benchmarks/tool_bodies.py --tree /path/to/other/checkout [--tree ...]

Each operation is called in-process, straight on its tool function (no client, no
serialisation), in batches interleaved with a floor measured in the same process: what
the same work costs with plain ``os`` calls on host path strings and no containment
(``os.listdir`` + ``lstat`` per entry; ``open`` + ``read``). The figure is CPU time
(``time.process_time``) per call, the median over ``--rounds`` batches of ``--calls``.

- ``list_files``: ``filesystem.list_files(path="/Reports")``, a folder with one file
  (what ``benchmarks/environment.py --only cpu`` calls);
- ``read_text_file``: ``filesystem.read_text_file`` of a 200-byte file;
- ``resolve+read``: what a spreadsheet or document tool does with its ``file_path``:
  ``at(...).require("file")``, then open, ``fstat`` and read through the descriptor.

With ``--tree`` (repeatable) the same measurement runs in subprocesses, one per tree and
round, alternating between the trees (``PYTHONPATH`` set to each), and prints each tree's
median and the ratio to the first tree; this checkout is always the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# --tree runs this file on another checkout's code: PYTHONPATH then says which code.
if not os.environ.get("PYTHONPATH") and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OPERATIONS = ("list_files", "read_text_file", "resolve+read")


def _world(workdir: Path) -> Path:
    fs_root = workdir / "filesystem"
    (fs_root / "Reports" / "Q3").mkdir(parents=True)
    (fs_root / "Reports" / "summary.txt").write_text("quarterly summary\n" * 11)
    (fs_root / "Reports" / "Q3" / "book.xlsx").write_bytes(b"PK\x03\x04" + b"\x00" * 4000)
    return fs_root


def _cases(fs_root: Path) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """operation -> (the tool body, its floor with plain os calls on host paths)."""
    from mcp_servers._core import ServerContext
    from mcp_servers.filesystem.browse import list_files
    from mcp_servers.filesystem.reading import read_text_file

    ctx = ServerContext.create(fs_root, fs_root.parent / ".apps_data")
    reports = str(fs_root / "Reports")
    summary = str(fs_root / "Reports" / "summary.txt")
    book = str(fs_root / "Reports" / "Q3" / "book.xlsx")

    def list_floor() -> object:
        return [(name, os.lstat(os.path.join(reports, name))) for name in os.listdir(reports)]

    def read_floor(name: str = summary) -> bytes:
        with open(name, "rb") as handle:
            os.fstat(handle.fileno())
            return handle.read()

    def resolve_read() -> bytes:
        path = ctx.files.at("/Reports/Q3/book.xlsx", argument="file_path", allow_root=False).require("file")
        with path.open() as handle:
            os.fstat(handle.fileno())
            return handle.read()

    assert list_files(ctx, path="/Reports").total == 2
    assert read_text_file(ctx, file_path="/Reports/summary.txt").size == len(read_floor())
    assert resolve_read() == read_floor(book)
    return {
        "list_files": (lambda: list_files(ctx, path="/Reports"), list_floor),
        "read_text_file": (lambda: read_text_file(ctx, file_path="/Reports/summary.txt"), read_floor),
        "resolve+read": (resolve_read, lambda: read_floor(book)),
    }


def _cpu_us(function: Callable[[], object], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        function()
    return (time.process_time() - start) * 1e6 / calls


def measure(calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """operation -> {"body": us, "floor": us} (medians over rounds, interleaved)."""
    with tempfile.TemporaryDirectory(prefix="atoll-bench-bodies-") as workdir:
        cases = _cases(_world(Path(workdir)))
        for body, floor in cases.values():  # warm up
            _cpu_us(body, 200)
            _cpu_us(floor, 200)
        samples: dict[str, dict[str, list[float]]] = {op: {"body": [], "floor": []} for op in cases}
        for _ in range(rounds):
            for op, (body, floor) in cases.items():
                samples[op]["floor"].append(_cpu_us(floor, calls))
                samples[op]["body"].append(_cpu_us(body, calls))
        return {op: {k: statistics.median(v) for k, v in kinds.items()} for op, kinds in samples.items()}


def _load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def _print_one(label: str, figures: dict[str, dict[str, float]]) -> None:
    print(f"{label}  (load {_load()})")
    print(f"  {'operation':<16} {'body us':>9} {'floor us':>9} {'body/floor':>11}")
    for op in OPERATIONS:
        body, floor = figures[op]["body"], figures[op]["floor"]
        print(f"  {op:<16} {body:9.1f} {floor:9.1f} {body / floor:10.1f}x")


def compare(trees: list[str], calls: int, rounds: int) -> None:
    """Each tree in its own subprocesses, alternating round by round."""
    per_tree: dict[str, list[dict[str, dict[str, float]]]] = {tree: [] for tree in trees}
    for _ in range(rounds):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": tree}
            script = str(Path(tree) / "benchmarks" / "tool_bodies.py")
            if not Path(script).exists():  # a tree from before this script: run ours on its code
                script = __file__
            output = subprocess.run(
                [sys.executable, script, "--json", "--calls", str(calls), "--rounds", "3"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                cwd=tree,
            ).stdout
            per_tree[tree].append(json.loads(output))
    print(f"{rounds} alternating rounds of 3 x {calls} calls per tree; load {_load()}")
    print(f"  {'operation':<16} {'tree':<34} {'body us':>8} {'floor us':>9} {'x floor':>8} {'vs first':>9}")
    for op in OPERATIONS:
        first = None
        for tree, runs in per_tree.items():
            body = statistics.median(run[op]["body"] for run in runs)
            floor = statistics.median(run[op]["floor"] for run in runs)
            first = first or body
            print(
                f"  {op:<16} {tree[-34:]:<34} {body:8.1f} {floor:9.1f} {body / floor:7.1f}x {body / first:8.2f}x"
            )
    print("  (median CPU per call; floor: the same work with plain os calls, same process;")
    print("   vs first: the tree's body CPU over the first tree's, this checkout)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per batch")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved batches (or tree rounds)")
    parser.add_argument("--tree", action="append", default=[], help="another checkout to compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tree:
        compare([str(ROOT), *(str(Path(tree).resolve()) for tree in args.tree)], args.calls, args.rounds)
        return 0
    figures = measure(args.calls, args.rounds)
    if args.json:
        print(json.dumps(figures))
    else:
        _print_one(f"tool bodies, CPU per call ({ROOT})", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
