"""POST /apps checks each in-process server's options against the options it declares."""

from __future__ import annotations

import pytest

from atoll.errors import AtollError
from mcp_servers import create_server


@pytest.mark.parametrize(
    ("server", "options", "named"),
    [
        ("mail", {"user_email": "me@corp.com", "sent_mbx": "out.mbox"}, "sent_mbx"),
        ("pdfs", {"max_ocr_pages": "many"}, "max_ocr_pages"),
        ("spreadsheets", {"recalc": "sometimes"}, "recalc"),
        ("filesystem", {"user_emial": "me@corp.com"}, "user_emial"),
    ],
)
def test_an_unknown_or_mistyped_option_is_a_422_naming_it_and_nothing_starts(client, server, options, named):
    reply = client.post("/apps", json={"mcpServers": {server: {"server": server, "options": options}}})
    assert reply.status_code == 422, reply.text
    assert f"server {server}: option {named}" in reply.text
    assert client.get("/apps").json()["servers"] == []


def test_create_server_validates_options_and_hands_the_tools_typed_values(tmp_path):
    from mcp_servers._core import ServerContext, validate_options
    from mcp_servers.pdfs.tools import PdfsOptions, PdfState

    with pytest.raises(AtollError) as info:
        create_server("pdfs", fs_root=tmp_path, apps_data_root=tmp_path, options={"ocr_timeout_s": -1})
    assert info.value.code == "invalid_option" and "option ocr_timeout_s" in info.value.message
    options = validate_options("pdfs", PdfsOptions, {"max_ocr_pages": "3"})
    assert PdfState.create(ServerContext.create(tmp_path, tmp_path, options)).max_ocr_pages == 3
    assert options == {"max_ocr_pages": 3}
