"""Start-up imports no document library: each server imports its own on its first call.

Importing the environment, building all nine app servers (POST /apps) and listing their
tools over MCP must not load PyMuPDF, python-pptx, icalendar, openpyxl (nor the numpy it
loads) or python-docx (most of a cold start's CPU used to be these imports); the first call
that reads a PDF does load PyMuPDF, the first that writes a workbook openpyxl, the first that
writes a document python-docx. Nor may it load the data plane's fsspec or the file locks'
filelock: they come with the first populate from a URL and the first write. A fresh
interpreter each time: this test process has imported them for other tests.
"""

from __future__ import annotations

from pathlib import Path

from tests.fresh_interpreter import run_fresh

ROOT = Path(__file__).resolve().parents[2]

LAZY_LIBRARIES = ("pymupdf", "fitz", "pptx", "icalendar", "dateutil.rrule", "openpyxl", "numpy", "docx")
DATA_PLANE_LIBRARIES = ("fsspec", "filelock")

_PROBE = """
import asyncio, json, sys, tempfile
from pathlib import Path

import httpx
from fastmcp import Client

from environment import EnvironmentServer, EnvironmentSettings
from mcp_servers import SERVER_NAMES

LAZY = %(lazy)r
DATA_PLANE = %(data_plane)r
root = Path(tempfile.mkdtemp())
(root / "fs").mkdir()
(root / "source" / "Reports").mkdir(parents=True)
(root / "source" / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M")
settings = EnvironmentSettings(fs_root=root / "fs", apps_data_root=root / "apps", preload_servers=%(preload)r)
report = {}
with EnvironmentServer(settings) as env:
    report["after_start"] = [m for m in LAZY if m in sys.modules]
    report["data_plane_after_start"] = [m for m in DATA_PLANE if m in sys.modules]
    if %(preload)r:
        import time
        while not httpx.get(env.url + "/health").json()["servers_preloaded"]:
            time.sleep(0.05)
    config = {"mcpServers": {name: {"transport": "inprocess", "server": name} for name in SERVER_NAMES}}
    reply = httpx.post(env.url + "/apps", json=config, timeout=300)
    reply.raise_for_status()

    async def talk():
        async with Client(env.mcp_url) as mcp:
            tools = await mcp.list_tools()
            report["tools"] = len(tools)
            report["after_list"] = [m for m in LAZY if m in sys.modules]
            report["data_plane_after_list"] = [m for m in DATA_PLANE if m in sys.modules]
            import pymupdf  # only to write the file; dropped from sys.modules again below

            document = pymupdf.open()
            document.new_page().insert_text((72, 72), "hello")
            document.save(root / "fs" / "a.pdf")
            for name in [m for m in sys.modules if m == "pymupdf" or m.startswith("pymupdf.")]:
                del sys.modules[name]
            result = await mcp.call_tool("pdfs_read_pdf_pages", {"file_path": "/a.pdf"})
            report["pdf_text"] = "hello" in str(result.content)
            report["after_pdf_call"] = "pymupdf" in sys.modules
            report["before_sheet_call"] = [m for m in ("openpyxl", "docx") if m in sys.modules]  # PyMuPDF loaded numpy
            created = await mcp.call_tool("spreadsheets_create_spreadsheet", {"directory": "/", "file_name": "a.xlsx"})
            report["sheet_created"] = (root / "fs" / "a.xlsx").is_file() and not created.is_error
            report["after_sheet_call"] = [m for m in ("openpyxl", "docx") if m in sys.modules]
            written = await mcp.call_tool(
                "documents_create_document",
                {"directory": "/", "file_name": "a.docx", "content": [{"type": "paragraph", "text": "hi"}]},
            )
            report["document_created"] = (root / "fs" / "a.docx").is_file() and not written.is_error
            report["after_document_call"] = "docx" in sys.modules

    asyncio.run(talk())
    report["filelock_after_writes"] = "filelock" in sys.modules
    populated = httpx.post(
        env.url + "/data/populate/s3",
        json={"sources": [{"url": str(root / "source"), "subsystem": "filesystem"}]},
        timeout=60,
    )
    report["populated"] = populated.status_code == 200 and (root / "fs" / "Reports" / "q3.txt").is_file()
    report["fsspec_after_populate"] = "fsspec" in sys.modules
print(json.dumps(report))
"""


def _probe(preload: bool) -> dict:
    return run_fresh(
        _PROBE % {"lazy": LAZY_LIBRARIES, "data_plane": DATA_PLANE_LIBRARIES, "preload": preload},
        env={"ATOLL_LOG_LEVEL": "WARNING"},
    )[0]


def test_building_and_listing_every_server_imports_no_document_library_nor_the_data_plane() -> None:
    report = _probe(preload=False)
    assert report["after_start"] == []
    assert report["tools"] > 50
    assert report["after_list"] == []
    # the first call that needs the library imports it, and works
    assert report["pdf_text"] is True
    assert report["after_pdf_call"] is True
    assert report["before_sheet_call"] == []
    assert report["sheet_created"] is True
    assert report["after_sheet_call"] == ["openpyxl"]
    assert report["document_created"] is True
    assert report["after_document_call"] is True
    # nor the data plane (one probe for both: each costs a fresh interpreter's start)
    assert report["data_plane_after_start"] == []
    assert report["data_plane_after_list"] == []
    # the spreadsheet and document writes above took a file lock; a URL populate needs fsspec
    assert report["filelock_after_writes"] is True
    assert report["populated"] is True
    assert report["fsspec_after_populate"] is True


def test_the_background_preload_imports_no_document_library_either() -> None:
    report = _probe(preload=True)
    assert report["after_list"] == []
    assert report["data_plane_after_list"] == []
