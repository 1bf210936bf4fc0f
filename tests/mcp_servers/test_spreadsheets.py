"""Spreadsheets server: every tool in both modes, recalculation, atomicity, edge cases.

One warm LibreOffice serves the whole test session (the engine is process-wide).
"""

from __future__ import annotations

import datetime
import os
import zipfile
from pathlib import Path

import pytest
from openpyxl import Workbook, load_workbook

from atoll.formats.libreoffice import shared_engine
from atoll.formats.xlsx_values import fill_cached_values
from tests.mcp_servers.helpers import make_world, text_of
from tests.mcp_servers.test_spreadsheets_support import mode_session

MODES = ["individual", "consolidated"]


@pytest.fixture(scope="session", autouse=True)
def warm_libreoffice():
    engine = shared_engine()
    engine.start()
    return engine


@pytest.fixture
def world(tmp_path):
    return make_world(tmp_path)


def _book(world, virtual: str, sheets: dict[str, list[list]]) -> Path:
    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        ws = workbook.create_sheet(name)
        for row in rows:
            ws.append(row)
    path = world.fs_root / virtual.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(path)
    return path


def _cached(path: Path, sheet: str, cell: str):
    return load_workbook(path, data_only=True)[sheet][cell].value


# -- create / read ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_create_spreadsheet_reads_back_computed_formulas(world, mode):
    with mode_session("spreadsheets", world, mode) as mcp:
        created = mcp.ok(
            "create_spreadsheet",
            {
                "directory": "/Outputs",
                "file_name": "x.xlsx",
                "sheets": [
                    {
                        "name": "Summary",
                        "headers": ["A", "B"],
                        "rows": [[1, "=A2*2"], [3, "=A3*2"], ["=SUM(A2:A3)", "=B2>1"]],
                    }
                ],
            },
        )
        assert created["file_path"] == "/Outputs/x.xlsx"
        assert created["recalculation"]["status"] == "computed"
        read = mcp.ok(
            "read_tab",
            {"file_path": "/Outputs/x.xlsx", "tab_index": 0, "cell_range": "A1:B4", "include_formulas": True},
        )
    assert read["rows"] == [["A", "B"], [1, 2], [3, 6], [4, True]]
    assert read["formulas"]["A4"] == "=SUM(A2:A3)"
    # The values are in the file itself, for every other reader (graders, pandas, Excel).
    path = world.fs_root / "Outputs/x.xlsx"
    assert _cached(path, "Summary", "B3") == 6
    assert load_workbook(path)["Summary"]["B3"].value == "=A3*2"


def test_create_spreadsheet_refuses_existing_file_and_bad_sheet_names(world):
    _book(world, "/a.xlsx", {"S": [[1]]})
    with mode_session("spreadsheets", world, "individual") as mcp:
        assert (
            mcp.error("create_spreadsheet", {"directory": "/", "file_name": "a.xlsx"})["code"]
            == "already_exists"
        )
        error = mcp.error(
            "create_spreadsheet", {"directory": "/", "file_name": "b.xlsx", "sheets": [{"name": "a/b"}]}
        )
        assert error["code"] == "invalid_argument" and "sheet name" in error["message"]
        assert not (world.fs_root / "b.xlsx").exists()
        made = mcp.ok("create_spreadsheet", {"directory": "/new/dir", "file_name": "plain"})
    assert made["file_path"] == "/new/dir/plain.xlsx" and made["sheets"] == ["Sheet1"]


@pytest.mark.parametrize("mode", MODES)
def test_read_tab_caps_rows_with_continuation_and_compact(world, mode):
    _book(world, "/big.xlsx", {"Data": [[f"r{r}", r, r * 2] for r in range(1, 2501)]})
    with mode_session("spreadsheets", world, mode) as mcp:
        first = mcp.ok("read_tab", {"file_path": "/big.xlsx", "tab_index": 0, "max_rows": 1000})
        assert len(first["rows"]) == 1000 and first["truncated"] is True
        assert "A1001:C2000" in first["continuation"]
        nxt = mcp.ok("read_tab", {"file_path": "/big.xlsx", "tab_index": 0, "cell_range": "A1001:C2000"})
        assert nxt["rows"][0] == ["r1001", 1001, 2002]
        compact = mcp.ok(
            "read_tab", {"file_path": "/big.xlsx", "tab_index": 0, "cell_range": "A1:E2", "compact": True}
        )
        assert compact["cells"] == {"A1": "r1", "B1": 1, "C1": 2, "A2": "r2", "B2": 2, "C2": 4}
        assert mcp.error("read_tab", {"file_path": "/big.xlsx", "tab_index": 3})["code"] == "not_found"
        assert (
            mcp.error("read_tab", {"file_path": "/big.xlsx", "cell_range": "A1:ZZZZ9"})["code"]
            == "invalid_argument"
        )


@pytest.mark.slow
def test_huge_sheet_reads_a_window_quickly(world):
    from openpyxl import Workbook as WriteBook

    workbook = WriteBook(write_only=True)
    ws = workbook.create_sheet("Huge")
    for r in range(40_000):
        ws.append([r, f"name {r}", r * 1.5, r % 7, "x"])
    workbook.save(world.fs_root / "huge.xlsx")
    with mode_session("spreadsheets", world, "individual") as mcp:
        tabs = mcp.ok("list_tabs_in_spreadsheet", {"file_path": "/huge.xlsx"})
        assert tabs["tabs"][0]["rows"] == 40_000
        window = mcp.ok("read_tab", {"file_path": "/huge.xlsx", "cell_range": "A39999:C40000"})
        assert window["rows"] == [[39998, "name 39998", 59997], [39999, "name 39999", 59998.5]]
        capped = mcp.ok("read_tab", {"file_path": "/huge.xlsx", "max_rows": 50, "max_cols": 2})
        assert len(capped["rows"]) == 50 and len(capped["rows"][0]) == 2 and capped["truncated"]


def test_dates_read_as_iso_dates(world):
    path = _book(world, "/d.xlsx", {"S": [["when", "at"]]})
    workbook = load_workbook(path)
    workbook["S"]["A2"] = datetime.date(2024, 1, 15)
    workbook["S"]["B2"] = datetime.datetime(2024, 1, 15, 10, 30)
    workbook["S"]["C2"] = 45306
    workbook["S"]["C2"].number_format = "yyyy-mm-dd"
    workbook["S"]["D2"] = "=A2+1"
    workbook["S"]["D2"].number_format = "yyyy-mm-dd"
    workbook.save(path)
    with mode_session("spreadsheets", world, "individual") as mcp:
        row = mcp.ok("read_tab", {"file_path": "/d.xlsx", "cell_range": "A2:D2"})["rows"][0]
    assert row == ["2024-01-15", "2024-01-15T10:30:00", "2024-01-15", "2024-01-16"]


def test_google_sheets_dummyfunction_reads_as_fallback(world):
    path = _book(world, "/g.xlsx", {"S": [["x", "y"]]})
    workbook = load_workbook(path)
    workbook["S"]["A2"] = '=IFERROR(__xludf.DUMMYFUNCTION("GOOGLEFINANCE(""GOOG"")"),142.5)'
    workbook["S"]["B2"] = '=IFERROR(__xludf.DUMMYFUNCTION("""COMPUTED_VALUE"""),"EMEA")'
    workbook["S"]["C2"] = "=A2*2"
    workbook.save(path)  # no cached values at all: fallbacks come from the formula text
    with mode_session("spreadsheets", world, "individual") as mcp:
        assert mcp.ok("read_tab", {"file_path": "/g.xlsx", "cell_range": "A2:C2"})["rows"] == [
            [142.5, "EMEA", 285]
        ]
        # After a write, LibreOffice computes the fallbacks too (and never stores #NAME?).
        mcp.ok("add_content_text", {"file_path": "/g.xlsx", "tab_index": 0, "cell": "D2", "value": "=C2+1"})
        assert mcp.ok("read_tab", {"file_path": "/g.xlsx", "cell_range": "A2:D2"})["rows"] == [
            [142.5, "EMEA", 285, 286]
        ]
    assert _cached(path, "S", "A2") == 142.5


def test_stale_cached_values_are_recomputed_on_write(world):
    path = _book(world, "/stale.xlsx", {"S": [[1, 2, "=A1+B1"]]})
    stale = fill_cached_values(path.read_bytes(), {"S": {(1, 3): ("n", 999.0)}})
    path.write_bytes(stale)
    assert _cached(path, "S", "C1") == 999
    with mode_session("spreadsheets", world, "individual") as mcp:
        mcp.ok(
            "add_content_text", {"file_path": "/stale.xlsx", "tab_index": 0, "cell": "D1", "value": "note"}
        )
        assert mcp.ok("read_tab", {"file_path": "/stale.xlsx", "cell_range": "C1"})["rows"] == [[3]]
    assert _cached(path, "S", "C1") == 3


def test_read_computes_missing_values_without_touching_the_file(world):
    path = _book(world, "/script.xlsx", {"S": [[2, 5, "=A1*B1", '=IF(C1>5,"big","small")', "=1/0"]]})
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    with mode_session("spreadsheets", world, "individual") as mcp:
        row = mcp.ok("read_tab", {"file_path": "/script.xlsx"})["rows"][0]
    assert row == [2, 5, 10, "big", "#DIV/0!"]
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


# -- edits ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_set_cell_recomputes_dependents_across_sheets(world, mode):
    path = _book(
        world, "/m.xlsx", {"Model": [[1], [2], [3], [4], ["=SUM(A1:A4)"]], "Report": [["=Model!A5*10"]]}
    )
    with mode_session("spreadsheets", world, mode) as mcp:
        result = mcp.ok(
            "edit_spreadsheet",
            {
                "file_path": "/m.xlsx",
                "operations": [
                    {"type": "set_cell", "sheet": "Model", "cell": "A1", "value": 100},
                    {"type": "append_rows", "sheet": "Model", "rows": [["total+1", "=A5+1"]]},
                ],
            },
        )
        assert result["recalculation"]["status"] == "computed"
        assert mcp.ok("read_tab", {"file_path": "/m.xlsx", "tab_index": 1})["rows"] == [[1090]]
        assert mcp.ok("read_tab", {"file_path": "/m.xlsx", "cell_range": "A6:B6"})["rows"] == [
            ["total+1", 110]
        ]
    assert _cached(path, "Report", "A1") == 1090


def test_formatting_only_edit_skips_libreoffice_and_keeps_values(world, warm_libreoffice):
    path = _book(world, "/f.xlsx", {"S": [[2, "=A1*3"]]})
    with mode_session("spreadsheets", world, "individual") as mcp:
        mcp.ok("add_content_text", {"file_path": "/f.xlsx", "tab_index": 0, "cell": "A1", "value": 4})
        calls = warm_libreoffice.stats.calls
        result = mcp.ok(
            "edit_spreadsheet",
            {
                "file_path": "/f.xlsx",
                "operations": [{"type": "set_column_width", "sheet": "S", "column": "B", "width": 20}],
            },
        )
        assert result["recalculation"]["status"] == "carried_over"
        assert warm_libreoffice.stats.calls == calls
    assert _cached(path, "S", "B1") == 12


@pytest.mark.parametrize("mode", MODES)
def test_edit_is_atomic(world, mode):
    path = _book(world, "/atomic.xlsx", {"S": [[1, "=A1*2"]]})
    before = path.read_bytes()
    with mode_session("spreadsheets", world, mode) as mcp:
        error = mcp.error(
            "edit_spreadsheet",
            {
                "file_path": "/atomic.xlsx",
                "operations": [
                    {"type": "set_cell", "sheet": "S", "cell": "A1", "value": 50},
                    {"type": "rename_sheet", "sheet": "S", "new_name": "Renamed"},
                    {"type": "merge_cells", "sheet": "Nope", "range": "A1:B1"},
                ],
            },
        )
        assert error["code"] == "not_found" and "operations[2] (merge_cells)" in error["message"]
        bad_shape = mcp.error(
            "edit_spreadsheet",
            {"file_path": "/atomic.xlsx", "operations": [{"type": "explode", "sheet": "S"}]},
        )
        assert bad_shape["code"] == "invalid_argument" and "set_cell" in bad_shape["message"]
    assert path.read_bytes() == before


def test_all_sixteen_operations(world):
    from PIL import Image

    path = _book(
        world,
        "/ops.xlsx",
        {
            "Data": [["Region", "Sales"], ["EMEA", 10], ["APAC", 20]],
            "Calc": [["=Data!B2+Data!B3", "='Data'!B2"]],
        },
    )
    Image.new("RGB", (40, 20), "red").save(world.fs_root / "logo.png")
    operations = [
        {"type": "set_cell", "sheet": "Data", "cell": "B4", "value": "=SUM(B2:B3)"},
        {"type": "append_rows", "sheet": "Data", "rows": [["LATAM", 5]]},
        {
            "type": "format_cells",
            "sheet": "Data",
            "range": "A1:B1",
            "bold": True,
            "fill_color": "#FFFF00",
            "border": "thin",
            "horizontal_alignment": "center",
        },
        {"type": "merge_cells", "sheet": "Data", "range": "D1:E1"},
        {"type": "merge_cells", "sheet": "Data", "range": "D3:E3"},
        {"type": "unmerge_cells", "sheet": "Data", "range": "D3:E3"},
        {"type": "set_column_width", "sheet": "Data", "column": "A", "width": 25},
        {"type": "set_row_height", "sheet": "Data", "row": 1, "height": 30},
        {"type": "freeze_panes", "sheet": "Data", "cell": "A2"},
        {"type": "add_named_range", "sheet": "Data", "name": "SalesRange", "range": "B2:B3"},
        {"type": "add_named_range", "sheet": "Data", "name": "Temp", "range": "A1"},
        {"type": "delete_named_range", "name": "Temp"},
        {
            "type": "add_data_validation",
            "sheet": "Data",
            "range": "A2:A20",
            "validation_type": "list",
            "values": ["EMEA", "APAC", "LATAM"],
        },
        {
            "type": "add_conditional_formatting",
            "sheet": "Data",
            "range": "B2:B20",
            "rule_type": "cell_is",
            "operator": "greaterThan",
            "values": [15],
            "fill_color": "FFC7CE",
        },
        {"type": "set_auto_filter", "sheet": "Data", "range": "A1:B5"},
        {"type": "set_number_format", "sheet": "Data", "range": "B2:B5", "format": "#,##0.00"},
        {"type": "add_image", "sheet": "Data", "image_path": "/logo.png", "cell": "G2"},
        {"type": "rename_sheet", "sheet": "Data", "new_name": "Sales Data"},
        {"type": "set_cell", "sheet": "Calc", "cell": "C1", "value": "=SUM(SalesRange)"},
    ]
    assert len({op["type"] for op in operations}) == 16
    with mode_session("spreadsheets", world, "individual") as mcp:
        result = mcp.ok("edit_spreadsheet", {"file_path": "/ops.xlsx", "operations": operations})
        assert len(result["applied"]) == len(operations)
        calc = mcp.ok("read_tab", {"file_path": "/ops.xlsx", "tab_index": 1, "include_formulas": True})
    assert calc["rows"] == [[30, 10, 30]]
    assert calc["formulas"]["A1"] == "='Sales Data'!B2+'Sales Data'!B3"
    workbook = load_workbook(path)
    ws = workbook["Sales Data"]
    assert (
        ws["A1"].font.b and ws["A1"].fill.fgColor.rgb == "FFFFFF00" and ws["A1"].border.left.style == "thin"
    )
    assert [str(r) for r in ws.merged_cells.ranges] == ["D1:E1"]
    assert ws.column_dimensions["A"].width == 25 and ws.row_dimensions[1].height == 30
    assert ws.freeze_panes == "A2"
    assert "SalesRange" in workbook.defined_names and "Temp" not in workbook.defined_names
    assert ws.data_validations.dataValidation[0].formula1 == '"EMEA,APAC,LATAM"'
    assert len(ws.conditional_formatting) == 1
    assert ws.auto_filter.ref == "A1:B5"
    assert ws["B2"].number_format == "#,##0.00"
    assert len(ws._images) == 1
    assert ws["A5"].value == "LATAM" and _cached(path, "Sales Data", "B4") == 30


def test_add_image_refuses_paths_outside_the_world(world, tmp_path):
    from PIL import Image

    _book(world, "/img.xlsx", {"S": [[1]]})
    Image.new("RGB", (4, 4)).save(tmp_path / "outside.png")
    os.symlink(tmp_path / "outside.png", world.fs_root / "link.png")
    with mode_session("spreadsheets", world, "individual") as mcp:
        for bad in ("../outside.png", str(tmp_path / "outside.png"), "/link.png"):
            error = mcp.error(
                "edit_spreadsheet",
                {
                    "file_path": "/img.xlsx",
                    "operations": [{"type": "add_image", "sheet": "S", "image_path": bad}],
                },
            )
            assert error["code"] in ("path_outside_root", "not_found"), error


@pytest.mark.parametrize("mode", MODES)
def test_tabs_cells_and_charts(world, mode):
    path = _book(world, "/t.xlsx", {"Sales": [["Month", "A", "B"], ["Jan", 1, 2], ["Feb", 3, 4]]})
    with mode_session("spreadsheets", world, mode) as mcp:
        added = mcp.ok(
            "add_tab",
            {
                "file_path": "/t.xlsx",
                "tab_name": "Notes",
                "sheet_data": {"headers": ["k"], "rows": [["=Sales!B3*2"]]},
            },
        )
        assert added["tab_index"] == 1
        assert mcp.error("add_tab", {"file_path": "/t.xlsx", "tab_name": "notes"})["code"] == "already_exists"
        assert mcp.ok("read_tab", {"file_path": "/t.xlsx", "tab_index": 1})["rows"] == [["k"], [6]]
        mcp.ok("add_content_text", {"file_path": "/t.xlsx", "tab_index": 0, "cell": "B3", "value": 10})
        assert mcp.ok("read_tab", {"file_path": "/t.xlsx", "tab_index": 1, "cell_range": "A2"})["rows"] == [
            [20]
        ]
        cleared = mcp.ok("delete_content_cell", {"file_path": "/t.xlsx", "tab_index": 0, "cell": "C2"})
        assert cleared["previous_value"] == 2
        chart = mcp.ok(
            "create_chart",
            {
                "file_path": "/t.xlsx",
                "sheet": "Sales",
                "data_range": "A1:C3",
                "chart_type": "line",
                "title": "Trend",
                "position": "E2",
            },
        )
        assert chart["series"] == 2 and chart["points"] == 2
        tabs = mcp.ok("list_tabs_in_spreadsheet", {"file_path": "/t.xlsx"})["tabs"]
        assert [t["name"] for t in tabs] == ["Sales", "Notes"]
        by_name = mcp.ok("read_tab", {"file_path": "/t.xlsx", "tab_index": "notes", "cell_range": "A2"})
        assert by_name["tab_index"] == 1 and by_name["rows"] == [[20]]
        assert mcp.ok("read_tab", {"file_path": "/t.xlsx", "tab_index": "1", "cell_range": "A2"})["rows"] == [
            [20]
        ]
        missing = mcp.error("read_tab", {"file_path": "/t.xlsx", "tab_index": "Costs"})
        assert missing["code"] == "not_found" and "0=Sales, 1=Notes" in missing["message"]
        assert mcp.error("read_tab", {"file_path": "/t.xlsx", "tab_index": -1})["code"] == "not_found"
        assert mcp.ok("delete_tab", {"file_path": "/t.xlsx", "tab_index": 1})["tabs"] == ["Sales"]
        assert mcp.error("delete_tab", {"file_path": "/t.xlsx", "tab_index": 0})["code"] == "invalid_argument"
    workbook = load_workbook(path)
    assert workbook.sheetnames == ["Sales"] and workbook["Sales"]["C2"].value is None
    assert len(workbook["Sales"]._charts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_filter_tab_never_modifies_the_file(world, mode):
    path = _book(
        world,
        "/f.xlsx",
        {"S": [["Region", "Sales"], ["EMEA", 10], ["APAC", 25], ["EMEA", 40], ["LATAM", None]]},
    )
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    with mode_session("spreadsheets", world, mode) as mcp:
        found = mcp.ok(
            "filter_tab",
            {
                "file_path": "/f.xlsx",
                "tab_index": 0,
                "filters": [
                    {"column": "Region", "operator": "equals", "value": "emea"},
                    {"column": "B", "operator": "greater_than", "value": 15},
                ],
            },
        )
        assert found["matched"] == 1 and found["rows"] == [
            {"row": 4, "values": {"Region": "EMEA", "Sales": 40}}
        ]
        either = mcp.ok(
            "filter_tab",
            {
                "file_path": "/f.xlsx",
                "filters": [
                    {"column": "Sales", "operator": "is_empty"},
                    {"column": 1, "operator": "starts_with", "value": "AP"},
                ],
                "match_all": False,
            },
        )
        assert [r["row"] for r in either["rows"]] == [3, 5]
        assert (
            mcp.error("filter_tab", {"file_path": "/f.xlsx", "filters": [{"column": "Nope", "value": 1}]})[
                "code"
            ]
            == "invalid_argument"
        )
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(os.listdir(world.fs_root)) == ["f.xlsx"]


@pytest.mark.parametrize("mode", MODES)
def test_read_csv(world, mode):
    world.file("data.csv", "\ufeffname;amount\nÅsa;12\nBob;7\nCid;3\n")
    world.file("latin.csv", "")
    (world.fs_root / "latin.csv").write_bytes("name\nJos\xe9\n".encode("latin-1"))
    with mode_session("spreadsheets", world, mode) as mcp:
        read = mcp.ok("read_csv", {"file_path": "/data.csv", "row_limit": 2})
        assert read["delimiter"] == ";" and read["headers"] == ["name", "amount"]
        assert read["rows"] == [["Åsa", "12"], ["Bob", "7"]] and read["total_rows"] == 3 and read["truncated"]
        error = mcp.error("read_csv", {"file_path": "/latin.csv"})
        assert error["code"] == "bad_data" and "latin-1" in error["message"]
        assert mcp.ok("read_csv", {"file_path": "/latin.csv", "encoding": "latin-1"})["rows"] == [["José"]]
        as_tab = mcp.ok("read_tab", {"file_path": "/data.csv", "cell_range": "A2:B3"})
        assert as_tab["rows"] == [["Åsa", "12"], ["Bob", "7"]]


@pytest.mark.parametrize("mode", MODES)
def test_corrupt_encrypted_and_wrong_files_fail_clearly(world, mode):
    world.file("corrupt.xlsx", b"PK\x03\x04 this is not really a zip")
    (world.fs_root / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504)
    with zipfile.ZipFile(world.fs_root / "parts.xlsx", "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    world.file("notes.txt", "hello")
    with mode_session("spreadsheets", world, mode) as mcp:
        corrupt = mcp.error("read_tab", {"file_path": "/corrupt.xlsx"})
        assert corrupt["code"] == "bad_data" and "/corrupt.xlsx" in corrupt["message"]
        assert str(world.fs_root) not in corrupt["message"]
        assert mcp.error("read_tab", {"file_path": "/parts.xlsx"})["code"] == "bad_data"
        locked = mcp.error(
            "edit_spreadsheet",
            {
                "file_path": "/locked.xlsx",
                "operations": [{"type": "set_cell", "sheet": 0, "cell": "A1", "value": 1}],
            },
        )
        assert locked["code"] == "unsupported" and "password-protected" in locked["message"]
        assert mcp.error("list_tabs_in_spreadsheet", {"file_path": "/notes.txt"})["code"] == "unsupported"
        assert mcp.error("read_tab", {"file_path": "/missing.xlsx"})["code"] == "not_found"
        # The server is still healthy.
        mcp.ok("create_spreadsheet", {"directory": "/", "file_name": "fine.xlsx"})


@pytest.mark.parametrize("mode", MODES)
def test_delete_spreadsheet(world, mode):
    _book(world, "/gone.xlsx", {"S": [[1]]})
    with mode_session("spreadsheets", world, mode) as mcp:
        assert mcp.ok("delete_spreadsheet", {"file_path": "/gone.xlsx"})["deleted"] is True
        assert mcp.error("delete_spreadsheet", {"file_path": "/gone.xlsx"})["code"] == "not_found"
    assert not (world.fs_root / "gone.xlsx").exists()


# -- recalculation failures ------------------------------------------------------------


def test_recalculation_failure_saves_the_edit_and_marks_values(world, tmp_path):
    hang = tmp_path / "soffice-hangs"
    hang.write_text("#!/bin/sh\nsleep 60\n")
    hang.chmod(0o755)
    _book(world, "/h.xlsx", {"S": [[1, "=A1*2"]]})
    options = {"soffice": str(hang), "recalc": "cold", "recalc_timeout_s": 1}
    with mode_session("spreadsheets", world, "individual", options=options) as mcp:
        result = mcp.ok(
            "add_content_text", {"file_path": "/h.xlsx", "tab_index": 0, "cell": "A1", "value": 5}
        )
        assert (
            result["recalculation"]["status"] == "failed"
            and "timed out after 1 s" in result["recalculation"]["reason"]
        )
        row = mcp.ok("read_tab", {"file_path": "/h.xlsx"})["rows"][0]
        assert row[0] == 5 and row[1].startswith("#NOT_COMPUTED: LibreOffice timed out")
        assert mcp.ok("list_tabs_in_spreadsheet", {"file_path": "/h.xlsx"})["tabs"][0]["name"] == "S"
    with mode_session(
        "spreadsheets", world, "individual", options={"soffice": "/nonexistent/soffice"}
    ) as mcp:
        row = mcp.ok("read_tab", {"file_path": "/h.xlsx"})["rows"][0]
        assert row[1] == "#NOT_COMPUTED: LibreOffice (/nonexistent/soffice) is not installed"
    with mode_session("spreadsheets", world, "individual") as mcp:  # the real engine fills the value in
        assert mcp.ok("read_tab", {"file_path": "/h.xlsx"})["rows"][0] == [5, 10]


def test_killed_libreoffice_is_restarted(world, warm_libreoffice):
    _book(world, "/k.xlsx", {"S": [[1, "=A1+1"]]})
    with mode_session("spreadsheets", world, "individual") as mcp:
        mcp.ok("add_content_text", {"file_path": "/k.xlsx", "tab_index": 0, "cell": "A1", "value": 2})
        starts = warm_libreoffice.stats.starts
        os.killpg(warm_libreoffice._office.pid, 9)
        warm_libreoffice._office.wait()
        result = mcp.ok(
            "add_content_text", {"file_path": "/k.xlsx", "tab_index": 0, "cell": "A1", "value": 41}
        )
        assert result["recalculation"]["status"] == "computed"
        assert warm_libreoffice.stats.starts == starts + 1
        assert mcp.ok("read_tab", {"file_path": "/k.xlsx"})["rows"] == [[41, 42]]


def test_scratch_files_stay_outside_the_world(world, warm_libreoffice):
    _book(world, "/s.xlsx", {"S": [[1, "=A1+1"]]})
    with mode_session("spreadsheets", world, "individual") as mcp:
        mcp.ok("add_content_text", {"file_path": "/s.xlsx", "tab_index": 0, "cell": "A1", "value": 3})
        text = text_of(mcp.call("read_tab", {"file_path": "/s.xlsx"}))
    assert "4" in text
    assert sorted(p.name for p in world.base.rglob("*")) == [".apps_data", "filesystem", "s.xlsx"]
    assert not str(warm_libreoffice.scratch).startswith(str(world.base))


def test_failed_edit_does_not_leak_into_the_next_one(world):
    path = _book(world, "/leak.xlsx", {"S": [[1, "=A1*2"]]})
    with mode_session("spreadsheets", world, "individual") as mcp:
        mcp.ok("add_content_text", {"file_path": "/leak.xlsx", "tab_index": 0, "cell": "C1", "value": "kept"})
        mcp.error(
            "edit_spreadsheet",
            {
                "file_path": "/leak.xlsx",
                "operations": [
                    {"type": "set_cell", "sheet": "S", "cell": "A1", "value": 50},
                    {"type": "unmerge_cells", "sheet": "S", "range": "A1:B1"},
                ],
            },
        )
        mcp.ok("add_content_text", {"file_path": "/leak.xlsx", "tab_index": 0, "cell": "D1", "value": "next"})
        assert mcp.ok("read_tab", {"file_path": "/leak.xlsx"})["rows"] == [[1, 2, "kept", "next"]]
        # A change made behind the server's back (another tool, a populate) is seen too.
        workbook = load_workbook(path)
        workbook["S"]["A1"] = 7
        workbook.save(path)
        mcp.ok("add_content_text", {"file_path": "/leak.xlsx", "tab_index": 0, "cell": "E1", "value": 1})
        assert mcp.ok("read_tab", {"file_path": "/leak.xlsx"})["rows"] == [[7, 14, "kept", "next", 1]]


def test_network_functions_are_never_computed(world, warm_libreoffice):
    path = _book(world, "/web.xlsx", {"S": [[1, '=WEBSERVICE("http://127.0.0.1:9/x")', "=A1+1"]]})
    calls = warm_libreoffice.stats.calls
    with mode_session("spreadsheets", world, "individual") as mcp:
        row = mcp.ok("read_tab", {"file_path": "/web.xlsx"})["rows"][0]
        assert (
            row[1]
            == row[2]
            == "#NOT_COMPUTED: a formula calls WEBSERVICE, which is not computed (no network access)"
        )
        result = mcp.ok(
            "add_content_text", {"file_path": "/web.xlsx", "tab_index": 0, "cell": "A1", "value": 2}
        )
        assert result["recalculation"]["status"] == "failed"
        mcp.ok("delete_content_cell", {"file_path": "/web.xlsx", "tab_index": 0, "cell": "B1"})
        assert mcp.ok("read_tab", {"file_path": "/web.xlsx"})["rows"][0] == [2, None, 3]
    assert warm_libreoffice.stats.calls == calls + 1
    assert load_workbook(path, data_only=True)["S"]["C1"].value == 3


def test_concurrent_writers_lose_nothing(world):
    from concurrent.futures import ThreadPoolExecutor

    from mcp_servers._core import ServerContext
    from mcp_servers.spreadsheets import tools
    from mcp_servers.spreadsheets.workbook import SheetsState

    path = _book(world, "/c.xlsx", {"S": [["=SUM(A2:A9)"]]})
    state = SheetsState.create(ServerContext.create(world.fs_root, world.apps_root))

    def write(row: int) -> str:
        return tools.add_content_text(state, "/c.xlsx", 0, f"A{row}", row).recalculation.status

    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(write, range(2, 10)))
    assert statuses == ["computed"] * 8
    values = load_workbook(path, data_only=True)["S"]
    assert [values[f"A{r}"].value for r in range(1, 10)] == [sum(range(2, 10)), *range(2, 10)]


@pytest.mark.slow
@pytest.mark.serial  # the replacement soffice must start and recalculate within 2 s
def test_hung_warm_libreoffice_times_out_and_is_replaced(world):
    import signal

    _book(world, "/hang.xlsx", {"S": [[1, "=A1*2"]]})
    options = {"recalc": "warm", "recalc_timeout_s": 2}
    engine = shared_engine(timeout_s=2, mode="warm")
    engine.start()
    with mode_session("spreadsheets", world, "individual", options=options) as mcp:
        os.killpg(engine._office.pid, signal.SIGSTOP)  # soffice stops answering
        began = engine.stats.timeouts
        result = mcp.ok(
            "add_content_text", {"file_path": "/hang.xlsx", "tab_index": 0, "cell": "A1", "value": 4}
        )
        assert result["recalculation"]["status"] == "failed"
        assert "timed out after 2 s" in result["recalculation"]["reason"]
        assert engine.stats.timeouts == began + 1 and engine._office is None  # killed
        again = mcp.ok(
            "add_content_text", {"file_path": "/hang.xlsx", "tab_index": 0, "cell": "A1", "value": 5}
        )
        assert again["recalculation"]["status"] == "computed"
        assert mcp.ok("read_tab", {"file_path": "/hang.xlsx"})["rows"] == [[5, 10]]
    engine.close()


def test_excel_shared_formulas_read_with_their_text(world):
    sheet = (
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
        '<row r="1"><c r="A1"><v>2</v></c><c r="B1"><f t="shared" ref="B1:B3" si="0">A1*10</f><v>20</v></c></row>'
        '<row r="2"><c r="A2"><v>3</v></c><c r="B2"><f t="shared" si="0"/><v>30</v></c></row>'
        '<row r="3"><c r="A3"><v>4</v></c><c r="B3"><f t="shared" si="0"/></c></row>'
        "</sheetData></worksheet>"
    )
    path = _book(world, "/excel.xlsx", {"S": [[0]]})
    with zipfile.ZipFile(path) as source:
        parts = {name: source.read(name) for name in source.namelist()}
    parts["xl/worksheets/sheet1.xml"] = sheet.encode()
    with zipfile.ZipFile(path, "w") as target:
        for name, data in parts.items():
            target.writestr(name, data)
    with mode_session("spreadsheets", world, "individual") as mcp:
        read = mcp.ok("read_tab", {"file_path": "/excel.xlsx", "include_formulas": True})
    # B3 had no cached value: it is computed (the formula was found through the shared master).
    assert read["rows"] == [[2, 20], [3, 30], [4, 40]]
    assert read["formulas"] == {"B1": "=A1*10", "B2": "=A2*10", "B3": "=A3*10"}


def test_chart_sheets_do_not_shift_tab_indexes(world):
    from openpyxl.chart import BarChart, Reference

    path = world.fs_root / "charts.xlsx"
    workbook = Workbook()
    data = workbook.active
    data.title = "Data"
    for row in [["k", "v"], ["a", 1], ["b", "=B2*5"]]:
        data.append(row)
    chartsheet = workbook.create_chartsheet("Chart", 0)  # a chart sheet before the data
    chart = BarChart()
    chart.add_data(Reference(data, min_col=2, min_row=1, max_row=3), titles_from_data=True)
    chartsheet.add_chart(chart)
    workbook.save(path)
    with mode_session("spreadsheets", world, "individual") as mcp:
        assert [
            t["name"] for t in mcp.ok("list_tabs_in_spreadsheet", {"file_path": "/charts.xlsx"})["tabs"]
        ] == ["Data"]
        assert mcp.ok("read_tab", {"file_path": "/charts.xlsx", "tab_index": 0})["rows"][2] == ["b", 5]
        mcp.ok("add_content_text", {"file_path": "/charts.xlsx", "tab_index": 0, "cell": "B2", "value": 3})
        assert mcp.ok("read_tab", {"file_path": "/charts.xlsx", "tab_index": 0})["rows"][2] == ["b", 15]
    assert load_workbook(path, data_only=True)["Data"]["B3"].value == 15


@pytest.mark.slow
def test_cold_recalculation_gives_the_same_values(world):
    with mode_session("spreadsheets", world, "individual", options={"recalc": "cold"}) as mcp:
        created = mcp.ok(
            "create_spreadsheet",
            {
                "directory": "/",
                "file_name": "cold.xlsx",
                "sheets": [
                    {"name": "In", "rows": [[2, 3]]},
                    {"name": "Out", "rows": [["=In!A1*In!B1", '=IF(A1>5,"big","small")', "=A1>5", "=1/0"]]},
                ],
            },
        )
        assert created["recalculation"]["status"] == "computed"
        assert mcp.ok("read_tab", {"file_path": "/cold.xlsx", "tab_index": "Out"})["rows"] == [
            [6, "big", True, "#DIV/0!"]
        ]


def test_prestart_starts_libreoffice_in_the_background(world):
    import time

    engine = shared_engine(timeout_s=29.0)  # a separate engine for this test
    assert engine._office is None
    with mode_session(
        "spreadsheets", world, "individual", options={"prestart": True, "recalc_timeout_s": 29.0}
    ):
        deadline = time.monotonic() + 30
        while (engine._office is None or engine._worker is None) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert engine.stats.starts == 1 and engine._office.poll() is None
    engine.close()


def test_the_written_out_column_and_range_helpers_give_what_openpyxl_gives():
    """cells.py spells out openpyxl's helpers so that building the server imports no openpyxl."""
    from openpyxl.utils import cell as reference

    from mcp_servers.spreadsheets import cells

    assert [cells.get_column_letter(n) for n in range(1, 18279)] == [
        reference.get_column_letter(n) for n in range(1, 18279)
    ]
    for name in ("A", "z", "Az", "XFD", "zzz", "AAAA", "", "A1", "É", "-"):
        try:
            expected = reference.column_index_from_string(name)
        except ValueError:
            with pytest.raises(ValueError):
                cells.column_index_from_string(name)
        else:
            assert cells.column_index_from_string(name) == expected
    for text in (
        "A1",
        "$B$3",
        "B3:D9",
        "$a$1:$c$2",
        "D9:B3",
        "XFD1048576",
        "A1:B2:C3",
        "A",
        "1:2",
        "A:B",
        "A1:",
        "",
    ):
        try:
            expected = reference.range_boundaries(text)
        except ValueError:
            with pytest.raises(ValueError):
                cells.range_boundaries(text)
        else:
            if None in expected:  # whole rows or columns: cells.py never passes these here
                with pytest.raises(ValueError):
                    cells.range_boundaries(text)
            else:
                assert cells.range_boundaries(text) == expected
    for title in ("Sheet1", "Q1 plan", "it's", "''"):
        assert cells.quote_sheetname(title) == reference.quote_sheetname(title)
    for bad in (0, 18279):
        with pytest.raises(ValueError):
            cells.get_column_letter(bad)
