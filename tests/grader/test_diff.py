"""Snapshot diffs by content hash, content extraction per format, typed app-data changes."""

from __future__ import annotations

import io
import tarfile

import pytest

from atoll.errors import AtollError
from grader import ExtractOptions, Snapshot, diff_snapshots, extract
from tests.grader import factories as f
from tests.grader.conftest import AFTER, BEFORE


def diff(tmp_path, before: dict, after: dict, *, zipped: bool = False):
    write = f.write_zip if zipped else f.write_snapshot
    suffix = ".zip" if zipped else ".tar.gz"
    return diff_snapshots(
        Snapshot(write(tmp_path / f"b{suffix}", before)), Snapshot(write(tmp_path / f"a{suffix}", after))
    )


# --- files -----------------------------------------------------------------------------------


def test_created_modified_deleted_by_content_hash(tmp_path):
    world = diff(
        tmp_path,
        {"filesystem/a.txt": "abc", "filesystem/b.txt": "b", "filesystem/same.txt": "s"},
        {"filesystem/a.txt": "abd", "filesystem/c.txt": "c", "filesystem/same.txt": "s"},
    )
    changes = {c.path: c for c in world.changes.files}
    assert set(changes) == {"filesystem/a.txt", "filesystem/b.txt", "filesystem/c.txt"}
    # a same-size edit is a modification (size alone would hide it)
    assert changes["filesystem/a.txt"].change == "modified"
    assert changes["filesystem/a.txt"].size_before == changes["filesystem/a.txt"].size_after == 3
    assert changes["filesystem/a.txt"].sha256_before != changes["filesystem/a.txt"].sha256_after
    assert changes["filesystem/b.txt"].change == "deleted" and changes["filesystem/c.txt"].change == "created"


def test_world_zip_with_and_without_top_level_roots(tmp_path):
    world = diff(
        tmp_path,
        {"filesystem/a.txt": "a", ".apps_data/x.json": "{}"},
        {"filesystem/a.txt": "A", ".apps_data/x.json": "{}"},
        zipped=True,
    )
    assert [c.path for c in world.changes.files] == ["filesystem/a.txt"]
    # Archipelago's zip of the filesystem alone has no roots: read as filesystem/
    bare = diff(tmp_path, {"Reports/a.txt": "1"}, {"Reports/a.txt": "2"}, zipped=True)
    assert [c.path for c in bare.changes.files] == ["filesystem/Reports/a.txt"]


def test_tar_and_zip_forms_mix(tmp_path):
    before = Snapshot(f.write_zip(tmp_path / "world.zip", {"filesystem/a.txt": "a"}))
    after = Snapshot(
        f.write_snapshot(tmp_path / "after.tar.gz", {"filesystem/a.txt": "a", "filesystem/b.txt": "b"})
    )
    assert [(c.path, c.change) for c in diff_snapshots(before, after).changes.files] == [
        ("filesystem/b.txt", "created")
    ]


def test_unsafe_and_non_regular_members_are_ignored(tmp_path):
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("filesystem/../../etc/passwd", "/abs/file", "filesystem/ok.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            archive.addfile(info, io.BytesIO(b"hi"))
        link = tarfile.TarInfo("filesystem/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    assert list(Snapshot(path).entries) == ["filesystem/ok.txt"]


def test_unreadable_snapshot_is_a_clear_error(tmp_path):
    (tmp_path / "junk.tar.gz").write_text("not an archive")
    with pytest.raises(AtollError, match="neither a tar.gz nor a zip") as error:
        Snapshot(tmp_path / "junk.tar.gz")
    assert error.value.code == "snapshot_unreadable"
    with pytest.raises(AtollError, match="no such file"):
        Snapshot(tmp_path / "missing.tar.gz")


def test_sub_items_name_the_sheet_slide_and_page_that_changed(tmp_path):
    before = {
        "filesystem/m.xlsx": f.xlsx({"A": [[1]], "B": [[2]]}),
        "filesystem/d.pptx": f.pptx([("One", ["x"], None), ("Two", ["y"], None)]),
        "filesystem/r.pdf": f.pdf(["first", "second", "third"]),
    }
    after = {
        "filesystem/m.xlsx": f.xlsx({"A": [[1]], "B": [[3]], "C": [[4]]}),
        "filesystem/d.pptx": f.pptx([("One", ["x"], None), ("Two", ["y changed"], None)]),
        "filesystem/r.pdf": f.pdf(["first", "SECOND", "third"]),
    }
    changes = {c.path: c.sub_items for c in diff(tmp_path, before, after).changes.files}
    assert changes["filesystem/m.xlsx"] == ["sheet 'B'", "sheet 'C' (added)"]
    assert changes["filesystem/d.pptx"] == ["slide 2"]
    assert changes["filesystem/r.pdf"] == ["page 2"]


def test_changed_cells_are_listed_with_old_and_new_values(tmp_path):
    world = diff(
        tmp_path,
        {"filesystem/m.xlsx": f.xlsx({"Model": [["Revenue", 100]]})},
        {"filesystem/m.xlsx": f.xlsx({"Model": [["Revenue", 120], ["Total", "=B1*2"]]})},
    )
    text = world.artifacts[0].text
    assert "B1: 100 -> 120" in text and "B2: (empty) -> 240 [=B1*2]" in text and "Final content:" in text


def test_formula_cells_that_kept_their_formula_are_counted_apart_from_real_edits(tmp_path):
    """The agent edits one input; its writer recomputes every formula's shown value. Only the
    input is a change; the formulas are counted, not listed, in the judge's account too."""
    from grader.diff import cell_changes
    from grader.extract import Part

    before = Part(
        "sheet 'S'",
        "",
        cells={"A1": "2", "B1": "[=A1*2]", "C1": "[=A1+1]"},
        formulas={"B1": "=A1*2", "C1": "=A1+1"},
    )
    after = Part(
        "sheet 'S'",
        "x",
        cells={"A1": "3", "B1": "6 [=A1*2]", "C1": "4 [=A1-1]"},
        formulas={"B1": "=A1*2", "C1": "=A1-1"},
    )
    assert cell_changes(before, after) == (["A1", "C1"], ["B1"])  # C1's formula was rewritten

    world = diff(
        tmp_path,
        {"filesystem/m.xlsx": f.xlsx({"S": [[2, "=A1*2"]]})},
        {"filesystem/m.xlsx": f.xlsx({"S": [[3, "=A1*2"]]})},
    )
    text = world.artifacts[0].text
    assert "1 cell(s) changed" in text and "A1: 2 -> 3" in text
    assert "1 formula cell(s) kept their formula" in text and "B1:" not in text.split("Final content:")[0]


def test_line_changes_pair_replaced_lines_and_name_added_and_removed_ones():
    from grader.diff import LineChange, line_changes

    before = "[body.p.0] Title\n[body.p.1] Old terms\n[body.p.2] Kept\n[body.p.3] Dropped"
    after = "[body.p.0] Title\n[body.p.1] New terms\n[body.p.2] Inserted\n[body.p.3] Kept"
    assert line_changes(before, after) == [
        LineChange("changed", "Old terms", "New terms"),
        LineChange("added", None, "Inserted"),
        LineChange("removed", "Dropped", None),
    ]


# --- extraction ------------------------------------------------------------------------------


def test_xlsx_per_sheet_values_and_formulas():
    data = f.xlsx({"Data": [["a", 2, 3], [None, "=B1+C1"]], "Empty": []})
    content = extract("m.xlsx", data, ExtractOptions(recalculate=False))
    assert [p.name for p in content.parts] == ["sheet 'Data'", "sheet 'Empty'"]
    assert "A1: a | B1: 2 | C1: 3" in content.parts[0].text
    assert "B2: [=B1+C1]" in content.parts[0].text  # no cached value written by openpyxl: formula shown
    assert content.parts[0].cells["C1"] == "3"
    # By default LibreOffice computes the formulas openpyxl left without a value.
    assert "B2: 5 [=B1+C1]" in extract("m.xlsx", data).parts[0].text


def test_xlsx_shows_cached_value_next_to_formula(tmp_path):
    from openpyxl import load_workbook

    data = f.xlsx({"S": [[2, "=A1*2"]]})
    # Simulate a workbook saved by a spreadsheet app: the formula cell carries a cached value.
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                assert b"<f>A1*2</f><v></v>" in body
                body = body.replace(b"<f>A1*2</f><v></v>", b"<f>A1*2</f><v>4</v>")
            target.writestr(item, body)
    assert load_workbook(io.BytesIO(out.getvalue()), data_only=True).active["B1"].value == 4
    assert "B1: 4 [=A1*2]" in extract("s.xlsx", out.getvalue()).text()


def test_docx_in_order_with_tables_and_comments():
    content = extract(
        "d.docx", f.docx(["Intro text", "Closing"], table=[["h1", "h2"], ["1", "2"]], comment="Fix")
    )
    body = content.parts[0].text
    # Blocks carry the identifiers the documents tools show (read_document_content).
    assert body.index("[body.p.0] (Heading 1) # Memo") < body.index("[body.p.1] Intro text")
    assert body.index("[body.p.1] Intro text") < body.index("[body.tbl.0]") < body.index("| h1 | h2 |")
    assert "comment by Reviewer on body.p.1 ('Intro text'): Fix" in content.text()


def test_docx_tracked_changes_are_marked():
    import docx as python_docx
    from docx.oxml import parse_xml

    document = python_docx.Document()
    paragraph = document.add_paragraph("Total is ")
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    paragraph._p.append(
        parse_xml(f'<w:del {w} w:id="1" w:author="a"><w:r><w:delText>100</w:delText></w:r></w:del>')
    )
    paragraph._p.append(parse_xml(f'<w:ins {w} w:id="2" w:author="a"><w:r><w:t>120</w:t></w:r></w:ins>'))
    buffer = io.BytesIO()
    document.save(buffer)
    assert "Total is {--100--}{++120++}" in extract("t.docx", buffer.getvalue()).text()


def test_pptx_per_slide_with_notes():
    content = extract("d.pptx", f.pptx([("Intro", ["a", "b"], "speaker note"), ("End", ["c"], None)]))
    assert [p.name for p in content.parts] == ["slide 1", "slide 2"]
    assert "# Intro" in content.parts[0].text and "Notes: speaker note" in content.parts[0].text
    assert content.parts[1].text.startswith("[slide_index 1, layout: Title and Content]")


def test_pdf_per_page():
    content = extract("r.pdf", f.pdf(["alpha", "beta"]))
    assert [(p.name, p.text) for p in content.parts] == [("page 1", "alpha"), ("page 2", "beta")]


def test_scanned_pdf_page_is_ocrd():
    import pymupdf

    text_pdf = pymupdf.open(stream=f.pdf(["INVOICE TOTAL 4521"]), filetype="pdf")
    pixmap = text_pdf[0].get_pixmap(dpi=150, clip=pymupdf.Rect(0, 0, 400, 120))
    scanned = pymupdf.open()
    page = scanned.new_page(width=400, height=120)
    page.insert_image(page.rect, pixmap=pixmap)
    content = extract("scan.pdf", scanned.tobytes())
    assert content.parts[0].text.startswith("[OCR]") and "4521" in content.parts[0].text


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("a.csv", b"x,y\n1,2\n", "x,y\n1,2"),
        ("a.md", b"# Title", "# Title"),
        ("a.json", b'{"k": 1}', '{"k": 1}'),
    ],
)
def test_text_files(name, data, expected):
    assert extract(name, data).text().strip() == expected


def test_corrupt_office_file_reports_an_error_instead_of_raising():
    content = extract("bad.xlsx", b"this is not a workbook")
    assert content.error and "could not extract" in content.text()


def test_binary_files_are_described_not_dumped():
    assert "binary file" in extract("photo.png", b"\x89PNG\x00\x00" * 10).text()


# --- app data --------------------------------------------------------------------------------


def test_typed_app_data_changes(tmp_path):
    world = diff(tmp_path, BEFORE, AFTER)
    [mail] = world.changes.mails_sent
    assert mail.from_ == "me@acme.com" and mail.to == ["boss@acme.com"] and mail.cc == ["cfo@acme.com"]
    assert mail.subject == "Q3 summary" and "margin 40%" in mail.body and mail.attachments == ["summary.pdf"]
    [event] = world.changes.events
    assert (
        event.change == "created"
        and event.summary == "Q3 review"
        and event.start.startswith("2025-03-04T15:00")
    )
    assert event.attendees == ["boss@acme.com", "cfo@acme.com"]
    [chat] = world.changes.chat
    assert (chat.change, chat.channel_id, chat.channel_name, chat.author) == (
        "replied",
        "Space AAA",
        "Finance",
        "me@acme.com",
    )


def test_event_updates_and_deletes_carry_changed_fields(tmp_path):
    event = {"uid": "e1", "summary": "Standup", "start": "20250303T100000Z", "end": "20250303T103000Z"}
    moved = {**event, "start": "20250303T110000Z", "location": "Room 2"}
    world = diff(
        tmp_path,
        {".apps_data/calendar/c.ics": f.ics([event, {**event, "uid": "gone"}])},
        {".apps_data/calendar/c.ics": f.ics([moved])},
    )
    changes = {e.uid: e for e in world.changes.events}
    assert changes["e1"].change == "updated"
    assert set(changes["e1"].changed_fields) == {"dtstart", "location"}
    assert changes["e1"].changed_fields["location"] == {"before": None, "after": "Room 2"}
    assert changes["gone"].change == "deleted"


def test_chat_posts_reactions_and_deletions(tmp_path):
    path = ".apps_data/chat/Google Chat/Groups/DM 8hB2/messages.json"
    root = f.chat_message("DM 8hB2", "t1", "t1", "hello")
    before = {
        path: f.chat_messages([root, f.chat_message("DM 8hB2", "t2", "t2", "to delete", author="me@a.com")])
    }
    after = {
        path: f.chat_messages(
            [
                {**root, "reactions": [{"emoji": {"unicode": "👍"}, "reactor_emails": ["me@a.com"]}]},
                f.chat_message("DM 8hB2", "t2", "t2", "", author="me@a.com", message_state="DELETED"),
                f.chat_message("DM 8hB2", "t3", "t3", "new topic", author="me@a.com"),
            ]
        )
    }
    changes = sorted((c.change, c.message_id) for c in diff(tmp_path, before, after).changes.chat)
    assert changes == [
        ("deleted", "DM 8hB2/t2/t2"),
        ("posted", "DM 8hB2/t3/t3"),
        ("reacted", "DM 8hB2/t1/t1"),
    ]


def test_mail_in_a_new_mbox_counts_as_sent_and_corrupt_calendar_is_reported(tmp_path):
    sent = f.mbox([{"from": "me@a.com", "to": "x@a.com", "subject": "s", "body": "b", "id": "<9@a>"}])
    world = diff(
        tmp_path,
        {".apps_data/calendar/c.ics": f.ics([])},
        {".apps_data/mail/Sent.mbox": sent, ".apps_data/calendar/c.ics": b"BEGIN:VCALENDAR\ngarbage"},
    )
    assert [m.message_id for m in world.changes.mails_sent] == ["<9@a>"]
    assert any("cannot parse calendar" in e for e in world.errors)


def test_workbook_extraction_agrees_with_openpyxl_including_shared_formulas_and_dates():
    import datetime
    import zipfile

    from openpyxl import load_workbook

    data = f.xlsx(
        {"S": [[1, "=A1*2", datetime.datetime(2024, 3, 1, 12)], [2, "=A2*2", True], [3, "=A3*2", "text"]]}
    )
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                body = body.replace(
                    b"<f>A1*2</f><v></v>", b'<f t="shared" ref="B1:B3" si="0">A1*2</f><v>2</v>'
                )
                body = body.replace(b"<f>A2*2</f><v></v>", b'<f t="shared" si="0"/><v>4</v>')
                body = body.replace(b"<f>A3*2</f><v></v>", b'<f t="shared" si="0"/><v>6</v>')
            target.writestr(item, body)
    content = extract("s.xlsx", out.getvalue(), ExtractOptions(recalculate=False))
    # Dates read as the spreadsheet tools show them (ISO text); shared formulas are expanded.
    assert "B3: 6 [=A3*2]" in content.text() and "C1: 2024-03-01T12:00:00" in content.text()
    values = load_workbook(io.BytesIO(out.getvalue()), data_only=True)["S"]
    cells = content.parts[0].cells
    assert cells["B2"] == f"{values['B2'].value} [=A2*2]" and cells["B3"] == "6 [=A3*2]"
    assert cells["C2"] == "TRUE" and cells["C3"] == "text"


def test_large_sheets_are_streamed_with_the_same_result(monkeypatch):
    from atoll.formats import xlsx

    data = f.xlsx({"Big": [[i, f"row {i}", f"=A{i + 1}*2"] for i in range(300)]})
    whole = extract("b.xlsx", data, ExtractOptions(recalculate=False)).text()
    monkeypatch.setattr(xlsx, "_WHOLE_SHEET_LIMIT", 100)  # every sheet is now "large": streamed
    assert extract("b.xlsx", data, ExtractOptions(recalculate=False)).text() == whole
    assert "C300: [=A300*2]" in whole and "B1: row 0" in whole


def test_files_over_the_size_cap_are_listed_not_read(tmp_path):
    before = Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", {}))
    after = Snapshot(
        f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/huge.csv": "x" * 5000, "filesystem/s.txt": "ok"})
    )
    world = diff_snapshots(before, after, ExtractOptions(max_file_bytes=1000))
    texts = {a.id: a.text for a in world.artifacts}
    assert (
        "not extracted: 5000 bytes exceeds" in texts["file:/huge.csv"]
        and "xxxx" not in texts["file:/huge.csv"]
    )
    assert texts["file:/s.txt"].endswith("ok")
    assert {c.path for c in world.changes.files} == {"filesystem/huge.csv", "filesystem/s.txt"}


def test_concurrent_recalculations_of_one_workbook_share_one_libreoffice_run():
    from concurrent.futures import ThreadPoolExecutor

    from atoll.formats.libreoffice import shared_engine, with_computed_values

    engine = shared_engine()  # the spreadsheet tools' engine: one warm soffice for both
    calls = engine.stats.calls
    data = f.xlsx({"S": [[7, "=A1*3", "concurrency"]]})
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: with_computed_values(data), range(3)))
    assert engine.stats.calls == calls + 1 and results[0] != data and len(set(results)) == 1
    assert "B1: 21 [=A1*3]" in extract("w.xlsx", data).text()
