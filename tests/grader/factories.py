"""Small world and file factories for grader tests: real archives, real office files."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from atoll.benchmark import Criterion, Task
from atoll.trajectory import RunStatus, Trajectory


def write_snapshot(path: Path, members: dict[str, bytes | str]) -> Path:
    """A snapshot tar.gz with the given ``filesystem/…`` / ``.apps_data/…`` members, sorted."""
    with tarfile.open(path, "w:gz") as archive:
        for name in sorted(members):
            data = members[name]
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            archive.addfile(info, io.BytesIO(data))
    return path


def write_zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def xlsx(sheets: dict[str, list[list[Any]]]) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def docx(paragraphs: list[str], table: list[list[str]] | None = None, comment: str | None = None) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading("Memo", level=1)
    first = None
    for text in paragraphs:
        paragraph = document.add_paragraph(text)
        first = first or paragraph
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    if comment and first is not None:
        document.add_comment(first.runs, text=comment, author="Reviewer")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx(slides: list[tuple[str, list[str], str | None]]) -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for title, bullets, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0] if bullets else ""
        for bullet in bullets[1:]:
            body.add_paragraph().text = bullet
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def pdf(pages: list[str]) -> bytes:
    import pymupdf

    document = pymupdf.open()
    for text in pages:
        page = document.new_page()
        page.insert_text((72, 72), text, fontsize=12)
    data = document.tobytes()
    document.close()
    return data


def mbox(messages: list[dict[str, Any]]) -> bytes:
    """An mbox of simple messages: dicts with from, to, subject, body, id, optional cc, attachment."""
    out = io.BytesIO()
    for spec in messages:
        message = EmailMessage()
        message["From"] = spec["from"]
        message["To"] = spec["to"]
        if spec.get("cc"):
            message["Cc"] = spec["cc"]
        message["Subject"] = spec["subject"]
        message["Message-ID"] = spec["id"]
        message["Date"] = "Mon, 03 Mar 2025 10:00:00 +0000"
        message.set_content(spec["body"])
        if spec.get("attachment"):
            name, data = spec["attachment"]
            message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
        out.write(b"From sender@example.com Mon Mar  3 10:00:00 2025\n")
        out.write(message.as_bytes().replace(b"\nFrom ", b"\n>From "))
        out.write(b"\n\n")
    return out.getvalue()


def ics(events: list[dict[str, Any]]) -> bytes:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//atoll tests//EN"]
    for event in events:
        lines += [
            "BEGIN:VEVENT",
            f"UID:{event['uid']}",
            f"SUMMARY:{event['summary']}",
            f"DTSTART:{event['start']}",
            f"DTEND:{event['end']}",
            "DTSTAMP:20250101T000000Z",
        ]
        if event.get("location"):
            lines.append(f"LOCATION:{event['location']}")
        for attendee in event.get("attendees", []):
            lines.append(f"ATTENDEE:mailto:{attendee}")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return ("\r\n".join(lines) + "\r\n").encode()


def chat_messages(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps({"messages": messages}).encode()


def chat_message(
    group: str, topic: str, unique: str, text: str, author: str = "ana@example.com", **extra
) -> dict:
    return {
        "creator": {"name": author.split("@")[0], "email": author, "user_type": "Human"},
        "created_date": "Monday, January 8, 2024 at 10:15:32 AM UTC",
        "text": text,
        "topic_id": topic,
        "message_id": f"{group}/{topic}/{unique}",
        **extra,
    }


def task(rubric: list[dict[str, Any]], prompt: str = "Build the quarterly report.") -> Task:
    return Task(
        task_id="t1", world_id="w1", prompt=prompt, rubric=[Criterion.model_validate(c) for c in rubric]
    )


def trajectory(answer: str | None) -> Trajectory:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    return Trajectory(
        agent="test", model="m", status=RunStatus.completed, final_answer=answer, started_at=now, ended_at=now
    )
