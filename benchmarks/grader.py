"""Grader extraction speed: a 50-page PDF and a 20-sheet workbook, plus a full snapshot diff.

Baselines run in the same process: pypdf page text (PDF) and openpyxl in its default
(non-read-only) mode (workbook), the straightforward ways to read these files.

    .venv/bin/python benchmarks/grader.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader import ExtractOptions, Snapshot, diff_snapshots, extract  # noqa: E402

WORDS = [
    "revenue",
    "margin",
    "procurement",
    "savings",
    "plant",
    "contract",
    "consent",
    "escrow",
    "valuation",
    "forecast",
]


def make_pdf(pages: int = 50) -> bytes:
    import pymupdf

    document = pymupdf.open()
    for number in range(pages):
        page = document.new_page()
        lines = [
            f"Page {number + 1} line {i}: " + " ".join(WORDS[(i + j) % 10] for j in range(10))
            for i in range(45)
        ]
        page.insert_textbox(page.rect + (50, 50, -50, -50), "\n".join(lines), fontsize=9)
    data = document.tobytes()
    document.close()
    return data


def make_workbook(sheets: int = 20, rows: int = 200, columns: int = 10) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for index in range(sheets):
        sheet = workbook.create_sheet(f"Sheet {index + 1}")
        sheet.append([f"Column {c}" for c in range(columns)])
        for row in range(rows):
            sheet.append([row * c + index for c in range(columns - 1)] + [f"=SUM(A{row + 2}:I{row + 2})"])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def baseline_pdf(data: bytes) -> int:
    from pypdf import PdfReader

    return sum(len(page.extract_text() or "") for page in PdfReader(io.BytesIO(data)).pages)


def baseline_workbook(data: bytes) -> int:
    from openpyxl import load_workbook

    total = 0
    for data_only in (False, True):
        workbook = load_workbook(io.BytesIO(data), data_only=data_only)
        for sheet in workbook.worksheets:
            for row in sheet.iter_rows(values_only=True):
                total += sum(len(str(v)) for v in row if v is not None)
    return total


def timed(function, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def snapshot(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            archive.addfile(info, io.BytesIO(members[name]))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    pdf, workbook = make_pdf(), make_workbook()
    no_recalc = ExtractOptions(recalculate=False)
    rows: list[tuple[str, float, float | None]] = []
    rows.append(
        (
            "50-page PDF, text per page",
            timed(lambda: extract("r.pdf", pdf), repeat),
            timed(lambda: baseline_pdf(pdf), repeat),
        )
    )
    rows.append(
        (
            "20-sheet workbook (4,000 formulas), values+formulas",
            timed(lambda: extract("m.xlsx", workbook, no_recalc), repeat),
            timed(lambda: baseline_workbook(workbook), repeat),
        )
    )
    from atoll.formats.libreoffice import with_computed_values

    start = time.perf_counter()
    with_computed_values(workbook)
    rows.append(
        (
            "  + LibreOffice recalculation of uncached formulas (once, memoised)",
            time.perf_counter() - start,
            None,
        )
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        world = {f"filesystem/docs/file_{i}.txt": f"note {i}".encode() * 50 for i in range(500)}
        before = snapshot(
            folder / "b.tar.gz", {**world, "filesystem/r.pdf": pdf, "filesystem/m.xlsx": workbook}
        )
        edited = dict(world)
        edited["filesystem/docs/file_7.txt"] = world["filesystem/docs/file_7.txt"].replace(
            b"note 7", b"NOTE 7"
        )
        after = snapshot(
            folder / "a.tar.gz",
            {**edited, "filesystem/r.pdf": make_pdf(51), "filesystem/m.xlsx": make_workbook(21)},
        )
        changes = diff_snapshots(Snapshot(before), Snapshot(after), no_recalc).changes
        assert any(c.path.endswith("file_7.txt") for c in changes.files), "same-size edit must be seen"
        rows.append(
            (
                "snapshot diff, 502 files, 3 changed (incl. same-size edit), extraction incl.",
                timed(lambda: diff_snapshots(Snapshot(before), Snapshot(after), no_recalc), repeat),
                None,
            )
        )
    print(f"{'measurement':<78} {'atoll s':>9} {'baseline s':>11} {'ratio':>7}")
    for name, ours, baseline in rows:
        ratio = f"{baseline / ours:.1f}x" if baseline else "-"
        base = f"{baseline:.3f}" if baseline else "-"
        print(f"{name:<78} {ours:>9.3f} {base:>11} {ratio:>7}")


if __name__ == "__main__":
    main()
