"""The check-then-open race: a folder of the world swapped with a link to the host.

A separate process (as a ``code_exec`` loop would) exchanges ``/a/b`` with a symlink to a
host folder, over and over, with ``renameat2(RENAME_EXCHANGE)``, while tools read,
create and atomically rewrite files through ``/a/b``. A tool that checks the real path
and then opens the string again loses this race now and then (reads return the host file;
new files and atomic-write temp files land on the host). Opening beneath the root's
descriptor never does: the assertion is 0 host bytes read and 0 entries created outside,
over a bounded number of calls.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from tests.mcp_servers.helpers import make_world, open_session

HOST_SECRET = "HOST-SECRET-9d41c7"
# Bounded in calls and in time (a loaded CI machine is slow; the old code lost the race
# within the first few hundred calls).
MAX_SECONDS = 20
WORLD_TEXT = "world copy\n"

# Runs in its own process so that it races the server for real (no shared GIL).
_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
"""


def _xlsx() -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.active["A1"] = "world"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


@pytest.fixture
def racing_world(tmp_path):
    world = make_world(tmp_path)
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(HOST_SECRET + "\n")
    (host / "book.xlsx").write_text(HOST_SECRET)
    world.file("/a/b/secret.txt", WORLD_TEXT)
    world.file("/a/b/book.xlsx", _xlsx())
    (world.fs_root / "swap").symlink_to(host)  # absolute: points at the host wherever it lands
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(world.fs_root / "a" / "b"), str(world.fs_root / "swap")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
    try:
        yield world, host
    finally:
        swapper.kill()
        swapper.wait()


def _host_entries(host) -> set[str]:
    return set(os.listdir(host)) - {"secret.txt", "book.xlsx"}


def test_reads_never_return_host_content_while_a_folder_is_swapped(racing_world):
    world, host = racing_world
    leaked = served = 0
    with open_session("filesystem", world) as fs, open_session("spreadsheets", world) as sheets:
        deadline = time.monotonic() + MAX_SECONDS
        for index in range(2000):
            if index % 10 == 9:
                result = sheets.call("read_tab", {"file_path": "/a/b/book.xlsx", "tab_index": 0})
            else:
                result = fs.call("read_text_file", {"file_path": "/a/b/secret.txt"})
            served += not result.is_error
            leaked += HOST_SECRET in repr(result.content) + repr(result.structured_content)
            if time.monotonic() > deadline:
                break
    assert leaked == 0
    assert served > 0  # the race was real: the folder was there part of the time


def test_creates_and_atomic_writes_never_land_outside_while_a_folder_is_swapped(racing_world):
    world, host = racing_world
    created = 0
    with (
        open_session("spreadsheets", world) as sheets,
        open_session("pdfs", world) as pdfs,
        open_session("documents", world) as documents,
    ):
        deadline = time.monotonic() + MAX_SECONDS
        for index in range(700):
            if time.monotonic() > deadline:
                break
            result = sheets.call("create_spreadsheet", {"directory": "/a/b", "file_name": f"new{index}.xlsx"})
            created += not result.is_error
            sheets.call(
                "edit_spreadsheet",
                {
                    "file_path": "/a/b/book.xlsx",
                    "operations": [{"type": "set_cell", "sheet": 0, "cell": "B1", "value": index}],
                },
            )
            result = pdfs.call(
                "create_pdf",
                {
                    "directory": "/a/b",
                    "file_name": f"doc{index}",
                    "content": [{"type": "paragraph", "text": "x"}],
                },
            )
            created += not result.is_error
            result = documents.call(
                "create_document",
                {
                    "directory": "/a/b",
                    "file_name": f"memo{index}.docx",
                    "content": [{"type": "paragraph", "text": "x"}],
                },
            )
            created += not result.is_error
    assert _host_entries(host) == set()
    assert (host / "book.xlsx").read_text() == HOST_SECRET
    assert created > 0
