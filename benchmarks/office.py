"""Spreadsheet write latency with formula recalculation: warm LibreOffice vs a cold start per write.

    .venv/bin/python benchmarks/office.py [--sheets 10] [--rows 300] [--runs 20] [--cold-runs 3]

Builds a workbook of --sheets sheets, each with --rows data rows and two formula
columns plus cross-sheet totals (10 x 300 -> 6,030 formulas, the reference system's
benchmark size), then times ``add_content_text`` (a value change, so every formula is
recomputed) through a real MCP client session (in memory) against our server:

- warm: the server's long-lived soffice driven over UNO (p50/p90 over --runs writes);
- cold: the same server with ``recalc=cold`` (a fresh ``soffice --convert-to`` per write,
  what a per-call conversion costs; the baseline, run in the same process);
- formatting-only: ``set_column_width``, which carries cached values over (no LibreOffice);
- start: how long the warm soffice + UNO worker takes to come up once.

Every write is checked: the dependent totals must read back with the new value.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REFERENCE_SET_CELL_S = 2.2  # Archipelago, same workbook size (shared/reference/archipelago_baseline.md)


def build_workbook(path: Path, sheets: int, rows: int) -> int:
    """The benchmark workbook; returns its number of formulas."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    formulas = 0
    for index in range(sheets):
        ws = workbook.create_sheet(f"S{index}")
        ws.append(["id", "price", "qty", "label", "amount", "share"])
        for r in range(2, rows + 2):
            ws.append(
                [r, r * 1.5, r % 7, f"item {r}", f"=B{r}*C{r}", f"=IF($E${rows + 2}=0,0,E{r}/$E${rows + 2})"]
            )
            formulas += 2
        ws[f"E{rows + 2}"] = f"=SUM(E2:E{rows + 1})"
        ws["H1"] = f"=S{index - 1}!H1+E{rows + 2}" if index else f"=E{rows + 2}"
        formulas += 2
    workbook.save(path)
    return formulas


class Session:
    """A synchronous MCP client session (in memory) on a spreadsheets server."""

    def __init__(self, fs_root: Path, options: dict[str, Any]) -> None:
        from fastmcp import Client

        from mcp_servers import create_server

        server = create_server(
            "spreadsheets", fs_root=fs_root, apps_data_root=fs_root.parent / "apps", options=options
        )
        self.loop = asyncio.new_event_loop()
        self.client = Client(server)
        self.loop.run_until_complete(self.client.__aenter__())

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.loop.run_until_complete(self.client.call_tool(tool, arguments, raise_on_error=False))
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content[0].text}")
        return result.structured_content

    def close(self) -> None:
        self.loop.run_until_complete(self.client.__aexit__(None, None, None))
        self.loop.close()


def timed_writes(session: Session, runs: int, start_value: int) -> tuple[list[float], list[float]]:
    """(total seconds, LibreOffice seconds) of ``runs`` value writes, each verified."""
    totals, engine = [], []
    for i in range(runs):
        value = start_value + i
        began = time.perf_counter()
        result = session.call(
            "add_content_text", {"file_path": "/bench.xlsx", "tab_index": 0, "cell": "C2", "value": value}
        )
        totals.append(time.perf_counter() - began)
        recalculation = result["recalculation"]
        if recalculation["status"] != "computed":
            raise RuntimeError(f"recalculation did not run: {recalculation}")
        engine.append(recalculation["seconds"])
        amount = session.call("read_tab", {"file_path": "/bench.xlsx", "tab_index": 0, "cell_range": "E2"})[
            "rows"
        ][0][0]
        if amount != 3 * value:  # B2 = 3.0
            raise RuntimeError(f"E2 read back {amount!r}, expected {3 * value}")
    return totals, engine


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sheets", type=int, default=10)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=3)
    args = parser.parse_args()

    from atoll.formats.libreoffice import LibreOffice, shared_engine

    with tempfile.TemporaryDirectory(prefix="atoll-bench-office-") as temp:
        fs_root = Path(temp) / "filesystem"
        fs_root.mkdir()
        formulas = build_workbook(fs_root / "bench.xlsx", args.sheets, args.rows)
        print(
            f"workbook: {args.sheets} sheets, {formulas} formulas, {(fs_root / 'bench.xlsx').stat().st_size // 1024} KiB"
        )

        probe = LibreOffice(mode="warm")
        began = time.perf_counter()
        probe.start()
        start_s = time.perf_counter() - began
        probe.close()

        engine = shared_engine()
        engine.start()
        warm = Session(fs_root, {})
        warm.call(
            "add_content_text", {"file_path": "/bench.xlsx", "tab_index": 0, "cell": "C2", "value": 1}
        )  # first load
        warm_totals, warm_engine = timed_writes(warm, args.runs, 10)
        began = time.perf_counter()
        fmt = [
            warm.call(
                "edit_spreadsheet",
                {
                    "file_path": "/bench.xlsx",
                    "operations": [
                        {"type": "set_column_width", "sheet": "S0", "column": "D", "width": 12 + i}
                    ],
                },
            )
            for i in range(5)
        ]
        format_s = (time.perf_counter() - began) / len(fmt)
        assert all(r["recalculation"]["status"] == "carried_over" for r in fmt)
        warm.close()

        cold = Session(fs_root, {"recalc": "cold"})
        cold_totals, cold_engine = timed_writes(cold, args.cold_runs, 1000)
        cold.close()

    warm_p50, cold_p50 = statistics.median(warm_totals), statistics.median(cold_totals)
    print()
    print(
        f"{'write (set one input cell, all formulas recomputed)':<56}{'p50 s':>8}{'p90 s':>8}{'LibreOffice p50 s':>19}"
    )
    print(
        f"{'warm soffice over UNO (' + str(args.runs) + ' writes)':<56}{warm_p50:>8.3f}{percentile(warm_totals, 0.9):>8.3f}{statistics.median(warm_engine):>19.3f}"
    )
    print(
        f"{'cold soffice --convert-to per write (' + str(args.cold_runs) + ' writes)':<56}{cold_p50:>8.3f}{percentile(cold_totals, 0.9):>8.3f}{statistics.median(cold_engine):>19.3f}"
    )
    print(f"{'formatting-only edit (cached values carried over)':<56}{format_s:>8.3f}{'':>8}{0:>19.3f}")
    print(f"{'warm soffice + UNO worker start (once per process)':<56}{start_s:>8.3f}")
    print()
    print(
        f"warm vs cold: {cold_p50 / warm_p50:.1f}x faster; vs reference set_cell {REFERENCE_SET_CELL_S} s: {REFERENCE_SET_CELL_S / warm_p50:.1f}x"
    )
    print(f"target p50 <= 1.5 s: {'met' if warm_p50 <= 1.5 else 'NOT met'} ({warm_p50:.3f} s)")


if __name__ == "__main__":
    main()
