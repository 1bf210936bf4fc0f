"""A tool that returns the result model it declares sends what returning the same fields as a
dict sent (#35): only the fields it was given, its values as JSON values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mcp_servers._core.outputs import ResultModel
from mcp_servers._core.results import to_structured, to_text


class Listing(ResultModel):
    path: str
    note: str | None = None
    when: str | None = None


def _sent(value: object) -> tuple[dict, str]:
    structured = to_structured(value, Listing)
    return structured, to_text(value, structured)


def test_a_model_sends_only_the_fields_it_was_given():
    assert _sent(Listing(path="/a")) == _sent({"path": "/a"})
    assert _sent(Listing(path="/a"))[0] == {"path": "/a"}  # no "note": null, no "when": null
    assert _sent(Listing(path="/a", note=None))[0] == {"path": "/a", "note": None}


def test_a_model_from_fields_sends_what_the_dict_sent():
    fields = {
        "path": "/a",
        "when": datetime(2025, 3, 4, 10, tzinfo=UTC),  # not a str: made ISO text first, as a dict's is
        "length": timedelta(hours=1),  # undeclared: kept, as its str
        "tags": ("x", "y"),
    }
    assert _sent(Listing.from_fields(fields)) == _sent(fields)
    assert _sent(fields)[0] == {
        "path": "/a",
        "when": "2025-03-04T10:00:00+00:00",
        "length": "1:00:00",
        "tags": ["x", "y"],
    }
