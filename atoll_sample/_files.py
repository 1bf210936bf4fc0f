"""Deterministic file plumbing: fixed timestamps for OOXML packages, PDFs and zip archives.

Office libraries stamp the wall clock into their zip entries and core properties; the
sample benchmark must be byte-identical for a given seed, so every package is rewritten
here with one fixed timestamp.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

# The moment the sample worlds are "frozen" (used for every timestamp not part of the content).
FROZEN_AT = datetime(2024, 3, 1, 9, 0, 0)
_ZIP_TIME = (2024, 3, 1, 9, 0, 0)
_W3CDTF = "2024-03-01T09:00:00Z"

_CORE_DATE = re.compile(r"(<dcterms:(?:created|modified)[^>]*>)[^<]*(</dcterms:)")
_WORD_DATE = re.compile(r'w:date="[^"]*"')


def freeze_properties(properties: Any, *, author: str, title: str) -> None:
    """Set an OOXML file's core properties (python-docx and python-pptx share the shape) to the
    author and title given and the frozen date, so the same input writes the same bytes."""
    properties.author = author
    properties.last_modified_by = author
    properties.title = title
    properties.created = FROZEN_AT
    properties.modified = FROZEN_AT
    properties.revision = 1


def _fixed_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o40755 << 16) | 0x10 if name.endswith("/") else 0o644 << 16
    info.create_system = 3
    return info


def normalize_ooxml(path: Path, *, cached_values: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Rewrite an .xlsx/.docx/.pptx in place with fixed zip and core-property timestamps.

    ``cached_values`` maps a worksheet part (``xl/worksheets/sheet1.xml``) to ``{cell: value}``:
    those formula cells get a cached ``<v>`` value, as a Google Sheets export carries.
    """
    members: list[tuple[str, bytes]] = []
    with zipfile.ZipFile(path) as package:
        for info in package.infolist():
            data = package.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = _CORE_DATE.sub(rf"\g<1>{_W3CDTF}\g<2>", data.decode()).encode()
            elif info.filename.startswith("word/") and info.filename.endswith(".xml"):
                data = _WORD_DATE.sub(f'w:date="{_W3CDTF}"', data.decode()).encode()
            if cached_values and info.filename in cached_values:
                text = data.decode()
                for cell, value in cached_values[info.filename].items():
                    pattern = re.compile(rf'(<c r="{cell}"[^>]*>)(<f>.*?</f>)<v\s*/?>(?:</v>)?')
                    text, count = pattern.subn(rf"\g<1>\g<2><v>{value}</v>", text)
                    if count != 1:
                        raise ValueError(f"{path.name}: no formula cell {cell} to cache a value in")
                data = text.encode()
            members.append((info.filename, data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as package:
        for name, data in members:
            package.writestr(_fixed_info(name), data)
    path.write_bytes(buffer.getvalue())


def zip_tree(root: Path, archive: Path) -> None:
    """Zip every file and folder under ``root`` (sorted, fixed timestamps), names relative to it."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    entries = sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix())
    with zipfile.ZipFile(archive, "w") as bundle:
        for entry in entries:
            name = entry.relative_to(root).as_posix()
            if entry.is_dir():
                bundle.writestr(_fixed_info(name + "/"), b"")
            elif entry.is_file():
                bundle.writestr(_fixed_info(name), entry.read_bytes())
