"""The presentations server's state: path resolution, opening and atomic saving of .pptx files."""

from __future__ import annotations

from typing import Any

from mcp_servers._office.files import OfficeFiles

PPTX_SUFFIXES = (".pptx",)
SHEET_SUFFIXES = (".xlsx", ".xlsm")


class DeckFiles(OfficeFiles):
    """Resolves agent paths under the filesystem root and opens/saves decks there."""

    kind = "pptx"
    suffixes = PPTX_SUFFIXES

    @staticmethod
    def load(stream: Any) -> Any:
        """The deck; InputTooLarge past ``max_slides`` (every tool may render all slides)."""
        from pptx import Presentation

        from atoll.formats import bounds

        deck = Presentation(stream)
        limit = bounds.LIMITS.max_slides
        if len(deck.slides) > limit:
            raise bounds.InputTooLarge(f"has {len(deck.slides)} slides (limit {limit})")
        return deck
