"""A colour name means the same colour in documents, presentations and spreadsheets."""

import pytest
from docx.shared import RGBColor as DocxColor

from mcp_servers._core import ToolError
from mcp_servers._office.colors import parse_color
from mcp_servers.presentations.shapes import parse_color as deck_color
from mcp_servers.spreadsheets.styling import color as cell_color

NAMES = ["orange", "lightgreen", "grey", "lightblue", "RED"]


@pytest.mark.parametrize("name", NAMES)
def test_every_office_server_reads_a_colour_name_alike(name):
    docx = str(parse_color(name, "font_color", DocxColor.from_string))
    pptx = str(deck_color(name, "fill_color"))
    xlsx = cell_color(name, argument="fill_color")
    assert docx == pptx and xlsx == "FF" + docx


def test_orange_is_office_standard_orange_everywhere():
    assert cell_color("orange") == "FFFFC000"
    assert str(deck_color("orange", "fill_color")) == "FFC000"


@pytest.mark.parametrize("value", ["purple-ish", "12345", "#GGGGGG"])
def test_an_unknown_colour_is_refused_naming_the_argument(value):
    for parse in (
        lambda: parse_color(value, "font_color", DocxColor.from_string),
        lambda: cell_color(value, argument="font_color"),
    ):
        with pytest.raises(ToolError, match="font_color"):
            parse()
