"""Spreadsheets and pdfs servers on the sample worlds: every file reads in both modes, the
reference solutions' steps replay and leave the cell values their checks expect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openpyxl import load_workbook

from tests.mcp_servers.test_documents_sample import extract_world
from tests.mcp_servers.test_spreadsheets_support import mode_session
from tests.shared_sample import fresh_sample_benchmark

pytestmark = pytest.mark.slow

MODES = ("individual", "consolidated")


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    return fresh_sample_benchmark(tmp_path_factory.mktemp("sample") / "bench")


def _worlds(benchmark: Path, tmp_path: Path):
    for world_zip in sorted((benchmark / "world_files_zipped").glob("*.zip")):
        yield extract_world(benchmark, world_zip.stem, tmp_path / world_zip.stem)


def _task_world(benchmark: Path, task: dict, tmp_path: Path):
    """The task's world with its overlay (task_files/<task_id>/filesystem) copied over it."""
    import shutil

    world = extract_world(benchmark, task["world_id"], tmp_path / task["task_id"])
    overlay = benchmark / "task_files" / task["task_id"] / "filesystem"
    if overlay.is_dir():
        shutil.copytree(overlay, world.fs_root, dirs_exist_ok=True)
    return world


def _virtual(world, path: Path) -> str:
    return "/" + path.relative_to(world.fs_root).as_posix()


@pytest.mark.parametrize("mode", MODES)
def test_every_sample_workbook_and_csv_reads(benchmark, tmp_path, mode):
    workbooks = csvs = 0
    for world in _worlds(benchmark, tmp_path):
        with mode_session("spreadsheets", world, mode) as sheets:
            for path in sorted(world.fs_root.rglob("*.xlsx")):
                before = path.read_bytes()
                tabs = sheets.ok("list_tabs_in_spreadsheet", {"file_path": _virtual(world, path)})["tabs"]
                expected = load_workbook(path, data_only=True)
                assert [t["name"] for t in tabs] == expected.sheetnames
                for tab in tabs:
                    read = sheets.ok(
                        "read_tab", {"file_path": _virtual(world, path), "tab_index": tab["index"]}
                    )
                    flat = [v for row in read["rows"] for v in row]
                    assert not any(isinstance(v, str) and v.startswith("#NOT_COMPUTED") for v in flat), path
                    ws = expected.worksheets[tab["index"]]
                    for row in ws.iter_rows(max_row=min(ws.max_row, 40)):
                        for cell in row:
                            if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                                shown = read["rows"][cell.row - 1][cell.column - 1]
                                assert shown == pytest.approx(cell.value), (
                                    path.name,
                                    tab["name"],
                                    cell.coordinate,
                                )
                assert path.read_bytes() == before  # reads never write
                workbooks += 1
            for path in sorted(world.fs_root.rglob("*.csv")):
                data = sheets.ok("read_csv", {"file_path": _virtual(world, path)})
                assert data["headers"] and data["total_rows"] >= len(data["rows"]) > 0
                csvs += 1
    assert workbooks >= 5 and csvs >= 5


@pytest.mark.parametrize("mode", MODES)
def test_reference_solutions_leave_the_checked_cell_values(benchmark, tmp_path, mode):
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    checked = 0
    for task in tasks:
        steps = [s for s in task["reference_solution"]["steps"] if s["tool"].startswith("spreadsheets_")]
        if not steps:
            continue
        world = _task_world(benchmark, task, tmp_path)
        with mode_session("spreadsheets", world, mode) as sheets:
            for step in steps:
                sheets.ok(step["tool"].removeprefix("spreadsheets_"), step["arguments"])
        for criterion in task["rubric"]:
            check = criterion.get("check") or {}
            if check.get("kind") != "cell_value":
                continue
            # What a grader reads: the cached value stored in the file.
            value = load_workbook(world.fs_root / check["path"].lstrip("/"), data_only=True)[check["sheet"]][
                check["cell"]
            ].value
            if isinstance(check["value"], int | float):
                assert value == pytest.approx(check["value"], abs=check.get("tolerance") or 1e-9), (
                    task["task_id"],
                    check,
                )
            else:
                assert str(value) == str(check["value"]), (task["task_id"], check)
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("mode", MODES)
def test_every_sample_pdf_reads_and_searches(benchmark, tmp_path, mode):
    import pymupdf

    read = 0
    for world in _worlds(benchmark, tmp_path):
        with mode_session("pdfs", world, mode) as pdfs:
            for path in sorted(world.fs_root.rglob("*.pdf")):
                data = pdfs.ok("read_pdf_pages", {"file_path": _virtual(world, path), "max_chars": 200_000})
                document = pymupdf.open(path)
                assert data["page_count"] == document.page_count and len(data["pages"]) == document.page_count
                for page in data["pages"]:
                    assert page["text"].strip(), (path.name, page["page"], page["engine"])
                word = next(w for w in data["pages"][0]["text"].split() if len(w) > 4 and w.isalpha())
                found = pdfs.ok("search_pdf", {"file_path": _virtual(world, path), "query": word})
                assert found["total_matches"] >= 1 and found["results"][0]["page"] >= 1
                read += 1
    assert read >= 4
