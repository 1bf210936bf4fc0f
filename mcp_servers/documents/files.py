"""The documents server's state: path resolution, opening and atomic saving of .docx files."""

from __future__ import annotations

from typing import Any

from mcp_servers._office.files import OfficeFiles

DOCX_SUFFIXES = (".docx",)


class DocumentFiles(OfficeFiles):
    """Resolves agent paths under the filesystem root and opens/saves documents there."""

    kind = "docx"
    suffixes = DOCX_SUFFIXES

    @staticmethod
    def load(stream: Any) -> Any:
        import docx

        return docx.Document(stream)
