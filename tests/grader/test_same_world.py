"""The judge reads the world the agent read: for each format, what the grader extracts from a
file equals what the app servers' reading tools return for the same file.

Both sides go through ``atoll.formats``; these tests fail when one side grows its own reading
(a different date form, a sheet the tools do not list, a value the tools do not show).
"""

from __future__ import annotations

import datetime
import io
import zipfile

from openpyxl.utils import column_index_from_string, get_column_letter

from grader.extract import ExtractOptions, extract
from tests.grader import factories as f
from tests.mcp_servers.helpers import make_world, open_session


def _tool_cells(mcp, virtual: str) -> dict[str, dict[str, object]]:
    """{tab name: {A1: (shown value, formula)}} as the spreadsheet tools return them."""
    tabs = mcp.ok("list_tabs_in_spreadsheet", {"file_path": virtual})["tabs"]
    sheets: dict[str, dict[str, object]] = {}
    for tab in tabs:
        read = mcp.ok("read_tab", {"file_path": virtual, "tab_index": tab["index"], "include_formulas": True})
        cells: dict[str, object] = {}
        top = read["range"].split(":")[0]
        letters = top.rstrip("0123456789")
        first_row, first_col = int(top[len(letters) :]), column_index_from_string(letters)
        for r, row in enumerate(read["rows"]):
            for c, value in enumerate(row):
                ref = f"{get_column_letter(first_col + c)}{first_row + r}"
                formula = (read.get("formulas") or {}).get(ref)
                if value is not None or formula is not None:
                    cells[ref] = (value, formula)
        sheets[tab["name"]] = cells
    return sheets


def _as_judge_text(value: object, formula: str | None) -> str:
    text = "" if value is None else ("TRUE" if value is True else "FALSE" if value is False else str(value))
    if formula:
        return f"{text} [{formula}]" if text else f"[{formula}]"
    return text


def test_xlsx_judge_cells_equal_what_read_tab_returns(tmp_path):
    data = f.xlsx(
        {
            "Model": [
                ["Revenue", 100, 2.5, datetime.datetime(2024, 3, 1, 12), datetime.datetime(2024, 3, 2)],
                ["Costs", "=B1*0.6", True, None, "=C1*2"],
            ],
            "Empty": [],
        }
    )
    # Give one formula a cached value, as a spreadsheet app would; leave the other without.
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                body = body.replace(b"<f>B1*0.6</f><v></v>", b"<f>B1*0.6</f><v>60</v>")
            target.writestr(item, body)
    world = make_world(tmp_path)
    world.file("/Reports/model.xlsx", out.getvalue())

    judged = extract("Reports/model.xlsx", out.getvalue(), ExtractOptions(recalculate=True))
    with open_session("spreadsheets", world) as mcp:
        shown = _tool_cells(mcp, "/Reports/model.xlsx")

    assert [p.name for p in judged.parts] == [f"sheet '{name}'" for name in shown]
    for part, (name, cells) in zip(judged.parts, shown.items(), strict=True):
        assert part.cells == {ref: _as_judge_text(v, formula) for ref, (v, formula) in cells.items()}, name
    model = judged.parts[0].cells
    assert model["D1"] == "2024-03-01T12:00:00" and model["E1"] == "2024-03-02"
    assert model["B2"] == "60 [=B1*0.6]"  # the cached value, as stored
    assert model["E2"] == "5 [=C1*2]"  # computed by LibreOffice for both
    assert model["C2"] == "TRUE"  # the rest of the file is read as stored, not as LibreOffice rewrote it


def test_mail_the_judge_reads_equals_what_read_mail_returns(tmp_path):
    from grader.appdata import diff_mail

    world = make_world(tmp_path)
    inbox = f.mbox(
        [
            {
                "from": "Boss <boss@acme.com>",
                "to": "me@acme.com",
                "cc": "Finance <fin@acme.com>",
                "subject": "Need Q3",
                "body": "Please send the numbers.\nFrom now on weekly.",
                "id": "<1@acme>",
                "attachment": ("brief.pdf", b"%PDF-1.4 tiny"),
            }
        ]
    )
    world.app_file("mail/Inbox.mbox", inbox)
    html_only = (
        b"From x@acme.com Mon Mar  3 11:00:00 2025\n"
        b"From: x@acme.com\nTo: me@acme.com\nSubject: Html\nDate: Mon, 03 Mar 2025 11:00:00 +0000\n"
        b"Content-Type: text/html; charset=utf-8\n\n<p>Hello <b>there</b></p><p>Second</p>\n\n"
    )
    world.app_file("mail/Archive.mbox", html_only)

    judged, errors = diff_mail(
        {}, {".apps_data/mail/Inbox.mbox": inbox, ".apps_data/mail/Archive.mbox": html_only}
    )
    assert not errors
    with open_session("mail", world, options={"user_email": "me@acme.com"}) as mcp:
        for sent in judged:
            read = mcp.ok("read_mail", {"mail_id": sent.message_id})
            assert (sent.from_, sent.subject, sent.body) == (read["from"], read["subject"], read["body"])
            assert sent.to == [a.split("<")[-1].rstrip(">") for a in read["to"]]
            assert sent.cc == [a.split("<")[-1].rstrip(">") for a in read["cc"]]
            assert sent.attachments == [a["filename"] for a in read["attachments"]]
            assert sent.in_reply_to == read["in_reply_to"]
    by_subject = {m.subject: m for m in judged}
    assert by_subject["Html"].message_id.endswith("@atoll.invalid>")  # the id the tools list it by
    assert "Hello there" in by_subject["Html"].body and "<b>" not in by_subject["Html"].body
    assert by_subject["Need Q3"].attachments == ["brief.pdf"]


def _chat_files(world) -> dict[str, bytes]:
    return {
        ".apps_data/" + path.relative_to(world.apps_root).as_posix(): path.read_bytes()
        for path in sorted(world.apps_root.rglob("*.json"))
    }


def test_chat_changes_the_judge_reads_equal_what_the_chat_tools_return(tmp_path):
    from grader.appdata import diff_chat, group_names, is_chat_group_info, is_chat_messages
    from tests.mcp_servers.test_chat_tools import GENERAL, chat_world

    world = chat_world(tmp_path)
    before = _chat_files(world)
    with open_session("chat", world) as mcp:
        history = mcp.ok("get_channel_history", {"channel_id": GENERAL})["posts"]
        mcp.ok("post_message", {"channel_id": GENERAL, "message": "Numbers are in"})
        mcp.ok(
            "reply_to_thread", {"channel_id": GENERAL, "post_id": history[-1]["post_id"], "message": "On it"}
        )
        mcp.ok(
            "add_reaction", {"channel_id": GENERAL, "post_id": history[-1]["post_id"], "emoji_name": "tada"}
        )
        after = _chat_files(world)
        changes, errors = diff_chat(
            {p: d for p, d in before.items() if is_chat_messages(p)},
            {p: d for p, d in after.items() if is_chat_messages(p)},
            group_names({p: d for p, d in after.items() if is_chat_group_info(p)}),
        )
        assert not errors and sorted(c.change for c in changes) == ["posted", "reacted", "replied"]
        shown = {
            post["post_id"]: post for post in mcp.ok("get_channel_history", {"channel_id": GENERAL})["posts"]
        }
        for post in list(shown.values()):
            replies = mcp.ok("get_thread_replies", {"channel_id": GENERAL, "post_id": post["post_id"]})[
                "replies"
            ]
            shown.update({reply["post_id"]: reply for reply in replies})
    for change in changes:
        post = shown[change.message_id]  # the judge names a post by the id the tools show
        assert change.channel_id == post["channel_id"] == GENERAL
        assert change.text == post["text"]
        if change.change == "reacted":
            reaction = next(r for r in post["reactions"] if r["emoji"] == change.emoji)
            assert change.author in reaction["users"]
        else:
            assert change.author == post["author"]["email"]
            assert (change.change == "replied") == post["is_reply"]


def test_docx_body_the_judge_reads_is_what_read_document_content_shows(tmp_path):
    import docx as python_docx
    from docx.oxml import parse_xml

    document = python_docx.Document()
    document.add_heading("Memo", level=1)
    document.add_paragraph("")  # spacing: numbered by the tools, nothing for the judge to read
    paragraph = document.add_paragraph("Total is ")
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    paragraph._p.append(
        parse_xml(f'<w:del {w} w:id="1" w:author="a"><w:r><w:delText>100</w:delText></w:r></w:del>')
    )
    paragraph._p.append(parse_xml(f'<w:ins {w} w:id="2" w:author="a"><w:r><w:t>120</w:t></w:r></w:ins>'))
    document.add_paragraph("First point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([["Region", "Sales"], ["North", "10"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    document.add_paragraph("Closing")
    buffer = io.BytesIO()
    document.save(buffer)
    world = make_world(tmp_path)
    world.file("/Memo.docx", buffer.getvalue())

    judged = extract("Memo.docx", buffer.getvalue())
    with open_session("documents", world) as mcp:
        result = mcp.call("read_document_content", {"file_path": "/Memo.docx"})
        data = result.structured_content
    tool_lines = "\n".join(getattr(block, "text", "") for block in result.content).splitlines()
    body = judged.parts[0].text.splitlines()
    # Every line the judge reads is a line the agent was shown, in the same order...
    positions = [tool_lines.index(line) for line in body]
    assert positions == sorted(positions)
    # ...and the judge names the same blocks, by the same identifiers.
    shown_ids = [b["id"] for b in data["blocks"] if b["type"] == "table" or b["text"]]
    assert [line.split("]")[0][1:] for line in body if line.startswith("[")] == shown_ids
    assert "[body.p.2] Total is {--100--}{++120++}" in body and "[body.p.1]" not in judged.text()


def test_pdf_pages_the_judge_reads_equal_what_read_pdf_pages_returns(tmp_path):
    import pymupdf

    document = pymupdf.open(stream=f.pdf(["Revenue: 120", "Costs: 60"]), filetype="pdf")
    text_pdf = pymupdf.open(stream=f.pdf(["INVOICE TOTAL 4521"]), filetype="pdf")
    pixmap = text_pdf[0].get_pixmap(dpi=150, clip=pymupdf.Rect(0, 0, 400, 120))
    page = document.new_page(width=400, height=120)  # a scanned page: an image, no text layer
    page.insert_image(page.rect, pixmap=pixmap)
    data = document.tobytes()
    world = make_world(tmp_path)
    world.file("/r.pdf", data)

    judged = extract("r.pdf", data)
    with open_session("pdfs", world) as mcp:
        pages = mcp.ok("read_pdf_pages", {"file_path": "/r.pdf"})["pages"]
    assert [p.name for p in judged.parts] == [f"page {p['page']}" for p in pages]
    for part, page in zip(judged.parts, pages, strict=True):
        expected = page["text"].strip()
        assert part.text == (f"[OCR] {expected}" if page["engine"] == "ocr" else expected)
    assert judged.parts[0].text == "Revenue: 120"
    assert "4521" in judged.parts[2].text


def test_pptx_slides_the_judge_reads_are_what_read_completedeck_shows(tmp_path):
    data = f.pptx([("Intro", ["Revenue up", "Costs down"], "speaker note"), ("End", ["Questions"], None)])
    world = make_world(tmp_path)
    world.file("/d.pptx", data)

    judged = extract("d.pptx", data)
    with open_session("presentations", world) as mcp:
        result = mcp.call("read_completedeck", {"file_path": "/d.pptx"})
    shown = "\n".join(getattr(block, "text", "") for block in result.content).split("\n\n")[1:]
    assert len(judged.parts) == len(shown) == 2
    for number, (part, slide) in enumerate(zip(judged.parts, shown, strict=True)):
        heading, *lines = slide.splitlines()
        assert heading.startswith(f"## Slide {number} ")  # the tools' 0-based slide_index...
        assert part.name == f"slide {number + 1}"  # ...and the judge's part, counted as people do
        assert part.text.splitlines()[1:] == lines  # the same lines, shape by shape
    assert "- Costs down" in judged.parts[0].text and "Notes: speaker note" in judged.parts[0].text


def test_calendar_events_the_judge_reads_are_the_events_list_events_shows(tmp_path):
    from atoll.formats.ics import read_events
    from grader.appdata import diff_calendar

    good = f.ics(
        [
            {
                "uid": "standup",
                "summary": "Standup",
                "start": "20250303T100000Z",
                "end": "20250303T103000Z",
                "attendees": ["bo@acme.com", "ana@acme.com"],
            },
            {
                "uid": "review",
                "summary": "Q3 review",
                "start": "20250304T140000Z",
                "end": "20250304T150000Z",
                "location": "Room 2",
            },
        ]
    ).decode()
    # A zoned event with an organizer and a description, and an all-day one.
    more = (
        "BEGIN:VEVENT\r\nUID:paris\r\nSUMMARY:Paris sync\r\nDTSTAMP:20250101T000000Z\r\n"
        "DTSTART;TZID=Europe/Paris:20250305T090000\r\nDTEND;TZID=Europe/Paris:20250305T100000\r\n"
        "DESCRIPTION:Agenda: budget\r\nORGANIZER;CN=Ana:MAILTO:ana@acme.com\r\n"
        "ATTENDEE;CN=Bo;PARTSTAT=ACCEPTED:mailto:bo@acme.com\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:offsite\r\nSUMMARY:Offsite\r\nDTSTAMP:20250101T000000Z\r\n"
        "DTSTART;VALUE=DATE:20250310\r\nDTEND;VALUE=DATE:20250312\r\nEND:VEVENT\r\n"
    )
    # One broken event (a DTSTART that is no date): both sides skip it and keep the others.
    broken = "BEGIN:VEVENT\r\nUID:broken\r\nSUMMARY:Broken\r\nDTSTART:tomorrow-ish\r\nEND:VEVENT\r\n"
    data = good.replace("END:VCALENDAR", more + broken + "END:VCALENDAR").encode()
    world = make_world(tmp_path)
    world.app_file("calendar/me@acme.com.ics", data)

    changes, errors = diff_calendar({}, {".apps_data/calendar/me@acme.com.ics": data})
    with open_session("calendar", world) as mcp:
        listed = mcp.ok("list_events", {})
    shown = {event["id"]: event for event in listed["events"]}
    assert {change.uid for change in changes} == set(shown) == {"standup", "review", "paris", "offsite"}
    judged = {event.key: event.fields for event in read_events(data).events}

    def when(value: dict[str, str]) -> str:
        return value.get("dateTime") or value["date"]

    for change in changes:
        event, fields = shown[change.uid], judged[change.uid]
        assert change.summary == event["summary"] == fields["summary"]
        assert change.attendees == sorted(a["email"] for a in event.get("attendees") or [])
        assert change.start == fields["dtstart"] == when(event["start"]), change.uid
        assert change.end == fields["dtend"] == when(event["end"]), change.uid
        for field, key in (("location", "location"), ("description", "description")):
            assert fields.get(field) == event.get(key), (change.uid, field)
        assert fields.get("organizer") == (event.get("organizer") or {}).get("email"), change.uid
    assert judged["paris"]["dtstart"] == "2025-03-05T09:00:00+01:00"  # the zone, as the tools show it
    assert judged["offsite"]["dtstart"] == "2025-03-10" and judged["paris"]["organizer"] == "ana@acme.com"
    assert listed["problems"] and any("broken" in e or "line" in e for e in errors)
