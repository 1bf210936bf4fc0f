"""Rows for the traversal suite: every tool with a path-like argument, per server.

Add your server's tools here (see traversal.py for what the fields mean). ``base`` holds
valid values for the tool's other required arguments; ``setup`` seeds the world so those
values exist.
"""

from __future__ import annotations

from tests.mcp_servers.traversal import TraversalCase

FILESYSTEM_CASES = [
    TraversalCase("filesystem", "list_files", path_arguments=("path",)),
    TraversalCase("filesystem", "read_text_file", path_arguments=("file_path",)),
    TraversalCase("filesystem", "read_image_file", path_arguments=("file_path",)),
    TraversalCase("filesystem", "search_files", path_arguments=("path",), base={"pattern": "*"}),
    TraversalCase("filesystem", "search_files", path_arguments=("pattern",), base={"path": "/"}),
    TraversalCase("filesystem", "get_file_metadata", path_arguments=("file_path",)),
    TraversalCase("filesystem", "get_directory_tree", path_arguments=("path",), base={"max_depth": 10}),
]


def seed_documents(world) -> None:
    """A .docx with a heading, a paragraph and a picture, and a spare image, at the root."""
    import io

    import docx
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    image = world.file("/pic.png", buffer.getvalue())
    document = docx.Document()
    document.add_heading("Title", level=1)
    document.add_paragraph("Text")
    document.add_paragraph().add_run().add_picture(str(image))
    document.save(str(world.fs_root / "doc.docx"))


_DOC = {"file_path": "/doc.docx"}
DOCUMENTS_CASES = [
    TraversalCase(
        "documents",
        "create_document",
        path_arguments=("directory", "file_name"),
        base={"directory": "/", "file_name": "new.docx", "content": [{"type": "paragraph", "text": "x"}]},
        setup=seed_documents,
    ),
    TraversalCase("documents", "delete_document", path_arguments=("file_path",), setup=seed_documents),
    TraversalCase("documents", "get_document_overview", path_arguments=("file_path",), setup=seed_documents),
    TraversalCase("documents", "read_document_content", path_arguments=("file_path",), setup=seed_documents),
    TraversalCase(
        "documents",
        "read_image",
        path_arguments=("file_path",),
        base={"annotation": "image.0"},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "add_content_text",
        path_arguments=("file_path",),
        base={"identifier": "body.p.0", "text": "x"},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "insert_content",
        path_arguments=("file_path",),
        base={"identifier": "body", "content": [{"type": "paragraph", "text": "x"}]},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents", "add_table", path_arguments=("file_path",), base={"rows": [["a"]]}, setup=seed_documents
    ),
    TraversalCase(
        "documents",
        "edit_content_text",
        path_arguments=("file_path",),
        base={"identifier": "body.p.1", "new_text": "y"},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "delete_content_text",
        path_arguments=("file_path",),
        base={"identifier": "body.p.1"},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "add_image",
        path_arguments=("file_path",),
        base={"image_path": "/pic.png"},
        setup=seed_documents,
    ),
    TraversalCase("documents", "add_image", path_arguments=("image_path",), base=_DOC, setup=seed_documents),
    TraversalCase(
        "documents",
        "modify_image",
        path_arguments=("file_path",),
        base={"annotation": "image.0", "width": 1},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "modify_image",
        path_arguments=("image_path",),
        base={**_DOC, "annotation": "image.0"},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents",
        "apply_formatting",
        path_arguments=("file_path",),
        base={"identifier": "body.p.1", "bold": True},
        setup=seed_documents,
    ),
    TraversalCase(
        "documents", "page_margins", path_arguments=("file_path",), base={"top": 1}, setup=seed_documents
    ),
    TraversalCase(
        "documents",
        "page_orientation",
        path_arguments=("file_path",),
        base={"orientation": "landscape"},
        setup=seed_documents,
    ),
    # header_footer and comments take an ``action`` argument, renamed in consolidated mode:
    # the rows use their default action (read).
    TraversalCase("documents", "header_footer", path_arguments=("file_path",), setup=seed_documents),
    TraversalCase("documents", "comments", path_arguments=("file_path",), setup=seed_documents),
]


def seed_calendar(world) -> None:
    from tests.mcp_servers.test_calendar_tools import TEAM_ICS

    world.app_file("calendar/team.ics", TEAM_ICS.encode())


CALENDAR_OPTIONS = {"user_email": "me@example.com", "user_name": "Mia Example"}
CALENDAR_CASES = [
    TraversalCase(
        "calendar", tool, id_arguments=("event_id",), base=base, options=CALENDAR_OPTIONS, setup=seed_calendar
    )
    for tool, base in (("read_event", {}), ("update_event", {"summary": "x"}), ("delete_event", {}))
]


def seed_chat(world) -> None:
    from tests.mcp_servers.test_chat_tools import ME, chat_groups, write_chat

    write_chat(world.apps_root / "chat" / "Google Chat", chat_groups(), user=ME, user_id="111122223333")


CHAT_OPTIONS = {"user_email": "me@example.com", "user_name": "Mia Example"}
_CHAT_POST = "AAAAgen01/t000AAAAgen01/t000AAAAgen01"
CHAT_CASES = [
    TraversalCase("chat", tool, id_arguments=ids, base=base, options=CHAT_OPTIONS, setup=seed_chat)
    for tool, ids, base in (
        ("get_channel_history", ("channel_id",), {}),
        (
            "get_thread_replies",
            ("channel_id", "post_id"),
            {"channel_id": "Space AAAAgen01", "post_id": _CHAT_POST},
        ),
        ("post_message", ("channel_id",), {"message": "hi"}),
        (
            "reply_to_thread",
            ("channel_id", "post_id"),
            {"channel_id": "Space AAAAgen01", "post_id": _CHAT_POST, "message": "hi"},
        ),
        (
            "add_reaction",
            ("channel_id", "post_id"),
            {"channel_id": "Space AAAAgen01", "post_id": _CHAT_POST, "emoji_name": "tada"},
        ),
        ("delete_post", ("channel_id", "post_id"), {"channel_id": "Space AAAAgen01", "post_id": _CHAT_POST}),
        ("get_user_profile", ("user_id",), {}),
        ("search_messages", ("channel_id",), {"query": "budget"}),
    )
]


def seed_presentations(world) -> None:
    """A two-slide deck with a picture, a workbook for charts and a spare image, at the root."""
    import io

    import openpyxl
    from PIL import Image
    from pptx import Presentation
    from pptx.util import Inches

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(buffer, format="PNG")
    image = world.file("/pic.png", buffer.getvalue())
    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Title"
    first.placeholders[1].text = "Bullet"
    first.shapes.add_picture(str(image), Inches(1), Inches(1))
    deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "Second"
    deck.save(str(world.fs_root / "deck.pptx"))
    workbook = openpyxl.Workbook()
    workbook.active.title = "Data"
    for row in [["k", "v"], ["a", 1], ["b", 2]]:
        workbook.active.append(row)
    workbook.save(str(world.fs_root / "data.xlsx"))


_DECK = {"file_path": "/deck.pptx"}
_CHART = {"slide_index": 0, "sheet_name": "Data", "data_range": "A1:B3"}
PRESENTATIONS_CASES = [
    TraversalCase(
        "presentations",
        "create_deck",
        path_arguments=("directory", "file_name"),
        base={"directory": "/", "file_name": "new.pptx", "slides": [{"layout": "title", "title": "x"}]},
        setup=seed_presentations,
    ),
    TraversalCase("presentations", "delete_deck", path_arguments=("file_path",), setup=seed_presentations),
    TraversalCase(
        "presentations",
        "add_slide",
        path_arguments=("file_path",),
        base={"title": "x"},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "edit_slides",
        path_arguments=("file_path",),
        base={"operations": [{"type": "replace_text", "search": "Title", "replace": "T"}]},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "add_image",
        path_arguments=("file_path",),
        base={"slide_index": 0, "image_path": "/pic.png"},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "add_image",
        path_arguments=("image_path",),
        base={**_DECK, "slide_index": 0},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "modify_image",
        path_arguments=("file_path",),
        base={"annotation": "slide.0.image.0", "width": 1},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "modify_image",
        path_arguments=("image_path",),
        base={**_DECK, "annotation": "slide.0.image.0"},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "insert_chart",
        path_arguments=("presentation_path",),
        base={**_CHART, "spreadsheet_path": "/data.xlsx"},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "insert_chart",
        path_arguments=("spreadsheet_path",),
        base={**_CHART, "presentation_path": "/deck.pptx"},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "insert_table",
        path_arguments=("file_path",),
        base={"slide_index": 0, "rows": [["a"]]},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "add_shape",
        path_arguments=("file_path",),
        base={"slide_index": 0},
        setup=seed_presentations,
    ),
    TraversalCase("presentations", "read_slides", path_arguments=("file_path",), setup=seed_presentations),
    TraversalCase(
        "presentations", "read_completedeck", path_arguments=("file_path",), setup=seed_presentations
    ),
    TraversalCase(
        "presentations",
        "read_individualslide",
        path_arguments=("file_path",),
        base={"slide_index": 0},
        setup=seed_presentations,
    ),
    TraversalCase(
        "presentations",
        "read_image",
        path_arguments=("file_path",),
        base={"annotation": "slide.0.image.0"},
        setup=seed_presentations,
    ),
]


def seed_spreadsheets(world) -> None:
    """A workbook with a formula, a CSV file and an image, at the root."""
    import io

    import openpyxl
    from PIL import Image

    workbook = openpyxl.Workbook()
    workbook.active.title = "Data"
    for row in [["k", "v"], ["a", 1], ["b", "=B2*2"]]:
        workbook.active.append(row)
    workbook.save(str(world.fs_root / "book.xlsx"))
    world.file("/table.csv", "k,v\na,1\n")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "green").save(buffer, format="PNG")
    world.file("/pic.png", buffer.getvalue())


_BOOK = {"file_path": "/book.xlsx"}
SPREADSHEETS_CASES = [
    TraversalCase(
        "spreadsheets",
        "create_spreadsheet",
        path_arguments=("directory", "file_name"),
        base={"directory": "/", "file_name": "new.xlsx", "sheets": [{"name": "S", "rows": [[1, "=A1*2"]]}]},
        setup=seed_spreadsheets,
    ),
    *(
        TraversalCase("spreadsheets", tool, path_arguments=("file_path",), base=base, setup=seed_spreadsheets)
        for tool, base in (
            ("delete_spreadsheet", {}),
            ("read_tab", {"tab_index": 0}),
            ("read_csv", {}),
            ("list_tabs_in_spreadsheet", {}),
            ("add_tab", {"tab_name": "New"}),
            ("delete_tab", {"tab_index": 0}),
            (
                "edit_spreadsheet",
                {"operations": [{"type": "set_cell", "sheet": "Data", "cell": "C1", "value": 3}]},
            ),
            ("add_content_text", {"tab_index": 0, "cell": "C1", "value": "x"}),
            ("delete_content_cell", {"tab_index": 0, "cell": "A1"}),
            ("create_chart", {"sheet": "Data", "data_range": "A1:B3"}),
            ("filter_tab", {"tab_index": 0, "filters": [{"column": "k", "value": "a"}]}),
        )
    ),
]


def seed_pdfs(world) -> None:
    """A one-page PDF with text and an image, at the root."""
    import io

    import pymupdf
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "hello pdf")
    page.insert_image(pymupdf.Rect(72, 100, 120, 148), stream=buffer.getvalue())
    document.save(str(world.fs_root / "doc.pdf"))


PDFS_CASES = [
    TraversalCase(
        "pdfs",
        "create_pdf",
        path_arguments=("directory", "file_name"),
        base={"directory": "/", "file_name": "new.pdf", "content": [{"type": "paragraph", "text": "x"}]},
        setup=seed_pdfs,
    ),
    *(
        TraversalCase("pdfs", tool, path_arguments=("file_path",), base=base, setup=seed_pdfs)
        for tool, base in (
            ("read_pdf_pages", {}),
            ("read_image", {"annotation": "page1_image1"}),
            ("read_page_as_image", {"page_number": 1}),
            ("search_pdf", {"query": "hello"}),
        )
    ),
]


def _seed_mail(world) -> None:
    from tests.mcp_servers.mail_world import build_mail_world

    build_mail_world(world)


_MAIL = {"setup": _seed_mail, "options": {"user_email": "me@corp.com"}}
_MAIL_SEND = {"to_email": "bob@corp.com", "subject": "s", "body": "b"}
_MAIL_REPLY = {"original_mail_id": "q3@corp.com", "body": "b"}
MAIL_CASES = [
    TraversalCase("mail", "send_mail", path_list_arguments=("attachments",), base=_MAIL_SEND, **_MAIL),
    TraversalCase("mail", "reply_mail", path_list_arguments=("attachments",), base=_MAIL_REPLY, **_MAIL),
    TraversalCase("mail", "reply_all_mail", path_list_arguments=("attachments",), base=_MAIL_REPLY, **_MAIL),
    TraversalCase(
        "mail",
        "forward_mail",
        path_list_arguments=("attachments",),
        base={"original_mail_id": "q3@corp.com", "to_email": "x@corp.com"},
        **_MAIL,
    ),
    TraversalCase(
        "mail", "read_mail", path_arguments=("save_attachments_to",), base={"mail_id": "q3@corp.com"}, **_MAIL
    ),
]


TRAVERSAL_CASES: list[TraversalCase] = [
    *FILESYSTEM_CASES,
    *MAIL_CASES,
    *DOCUMENTS_CASES,
    *CALENDAR_CASES,
    *CHAT_CASES,
    *PRESENTATIONS_CASES,
    *SPREADSHEETS_CASES,
    *PDFS_CASES,
]
