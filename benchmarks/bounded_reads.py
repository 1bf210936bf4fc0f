"""What the reading bounds cost ordinary files: warm tool calls and grader extraction.

    .venv/bin/python benchmarks/bounded_reads.py [--tree OTHER_CHECKOUT] [--rounds 5] [--calls 10]

Builds ordinary files (a 300-paragraph docx with a table, a 20-slide deck, a 500 x 5
workbook, a 50-page PDF) and measures CPU per call (``time.process_time``, this process;
median of ``--rounds`` batches of ``--calls``): the documents, presentations, spreadsheets
and pdfs tools' warm reads through a real FastMCP client (in memory), and the grader's
``extract`` of each file. With ``--tree`` each round runs in a subprocess per tree,
alternating (``PYTHONPATH`` set to the tree), and the ratio to this checkout is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/grader.py would shadow the grader package; with --tree, PYTHONPATH says whose
# code a round measures.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
if "PYTHONPATH" not in os.environ and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOOLS = [
    ("documents", "read_document_content", {"file_path": "/memo.docx"}),
    ("presentations", "read_slides", {"file_path": "/deck.pptx"}),
    ("spreadsheets", "read_tab", {"file_path": "/book.xlsx", "cell_range": "A1:E50"}),
    ("pdfs", "read_pdf_pages", {"file_path": "/report.pdf", "pages": "1-10"}),
]


def build(folder: Path) -> None:
    """The ordinary files, written into ``folder``."""
    import docx
    import pymupdf
    from openpyxl import Workbook
    from pptx import Presentation

    document = docx.Document()
    for index in range(300):
        document.add_paragraph(f"Paragraph {index}: revenue grew in the quarter, costs held steady.")
    table = document.add_table(rows=20, cols=4)
    for row in table.rows:
        for cell in row.cells:
            cell.text = "value"
    document.save(folder / "memo.docx")
    deck = Presentation()
    for index in range(20):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {index}"
        slide.placeholders[1].text_frame.text = "A point\nAnother point"
    deck.save(folder / "deck.pptx")
    workbook = Workbook()
    for row in range(500):
        workbook.active.append([row, row * 1.5, f"item {row}", row % 7, row * 2])
    workbook.save(folder / "book.xlsx")
    pdf = pymupdf.open()
    for index in range(50):
        pdf.new_page().insert_text((72, 72), f"Page {index}: the quarter in numbers.", fontsize=12)
    pdf.save(folder / "report.pdf")


def measure(rounds: int, calls: int) -> dict[str, list[float]]:
    """CPU ms per call for each operation, one value per round."""
    from fastmcp import Client

    from grader.extract import extract
    from mcp_servers import create_server

    base = Path(tempfile.mkdtemp(prefix="bounded-reads-"))
    (base / "fs").mkdir()
    (base / "apps").mkdir()
    build(base / "fs")
    results: dict[str, list[float]] = {}

    async def tools() -> None:
        for server_name, tool, arguments in TOOLS:
            server = create_server(server_name, fs_root=base / "fs", apps_data_root=base / "apps")
            async with Client(server) as client:
                for _ in range(3):  # warm: imports, caches
                    await client.call_tool(tool, arguments, raise_on_error=False)
                for _ in range(rounds):
                    began = time.process_time()
                    for _ in range(calls):
                        result = await client.call_tool(tool, arguments, raise_on_error=False)
                        assert not result.is_error, result.content[0].text
                    results.setdefault(f"{server_name} {tool}", []).append(
                        (time.process_time() - began) * 1000 / calls
                    )

    asyncio.run(tools())
    for name in ("memo.docx", "deck.pptx", "book.xlsx", "report.pdf"):
        data = (base / "fs" / name).read_bytes()
        extract(f"/{name}", data)
        for _ in range(rounds):
            began = time.process_time()
            for _ in range(calls):
                assert extract(f"/{name}", data).error is None
            results.setdefault(f"grader extract {name}", []).append(
                (time.process_time() - began) * 1000 / calls
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", help="another checkout to compare with (runs this script on its code)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print the raw figures (used by --tree)")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.rounds, args.calls)))
        return
    trees = [str(ROOT), *([str(Path(args.tree).resolve())] if args.tree else [])]
    per_tree: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
    for _ in range(args.rounds):
        for tree in trees:
            command = [sys.executable, __file__, "--json", "--rounds", "1", "--calls", str(args.calls)]
            env = {**os.environ, "PYTHONPATH": tree}
            output = subprocess.run(
                command, env=env, cwd=tree, capture_output=True, text=True, check=True
            ).stdout
            for name, values in json.loads(output.strip().splitlines()[-1]).items():
                per_tree[tree].setdefault(name, []).extend(values)
    print(
        f"CPU ms per call, median of {args.rounds} rounds x {args.calls} calls; load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| operation | " + " | ".join(Path(t).name for t in trees) + (" | vs other |" if args.tree else " |")
    )
    print("|---|" + "---|" * (len(trees) + (1 if args.tree else 0)))
    for name in per_tree[trees[0]]:
        medians = [statistics.median(per_tree[tree][name]) for tree in trees]
        ratio = f" | {medians[0] / medians[1]:.2f}x" if args.tree else ""
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + ratio + " |")


if __name__ == "__main__":
    main()
