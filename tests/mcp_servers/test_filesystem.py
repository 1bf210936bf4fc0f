"""Filesystem server: every tool, both modes, against a small handcrafted world."""

from __future__ import annotations

import io
import os

import pytest

from tests.mcp_servers.helpers import make_world, open_session, text_of

MODES = ["individual", "consolidated"]


@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path)
    world.file("Reports/q3.txt", "line1\nline2\nline3\n")
    world.file("Reports/Budget 2024.csv", "a,b\n1,2\n")
    world.file("Reports/archive/old.txt", "old")
    world.file("notes/é.txt", "héllo wörld " * 20)
    world.file("notes/latin1.txt", "caf\xe9 na\xefve".encode("cp1252"))
    world.file("notes/bom.txt", "\ufeffwith bom".encode("utf-8"))
    world.file("notes/wide.txt", "one\ntwo\nthree\n".encode("utf-16"))
    world.file("zeta.bin", b"\x00\x01\x02binary")
    world.file("Alpha.md", "# A")
    return world


@pytest.fixture(params=MODES)
def fs(request, world):
    with open_session("filesystem", world, mode=request.param) as session:
        yield session


def test_tool_surface(world):
    with open_session("filesystem", world) as session:
        assert session.tool_names() == [
            "get_directory_tree",
            "get_file_metadata",
            "list_files",
            "read_image_file",
            "read_text_file",
            "search_files",
        ]
    with open_session("filesystem", world, mode="consolidated") as session:
        assert session.tool_names() == ["filesystem", "filesystem_schema"]


def test_list_files_sorted_folders_first(fs):
    listing = fs.ok("list_files", {})
    assert [e["name"] for e in listing["entries"]] == ["notes", "Reports", "Alpha.md", "zeta.bin"]
    assert listing["entries"][2] == {**listing["entries"][2], "path": "/Alpha.md", "type": "file", "size": 3}
    assert listing["total"] == 4 and listing["has_more"] is False
    sub = fs.ok("list_files", {"path": "/Reports"})
    assert [e["path"] for e in sub["entries"]] == [
        "/Reports/archive",
        "/Reports/Budget 2024.csv",
        "/Reports/q3.txt",
    ]


def test_list_files_paginates(fs):
    first = fs.ok("list_files", {"path": "/", "limit": 3})
    assert len(first["entries"]) == 3 and first["has_more"] and first["next_offset"] == 3
    second = fs.ok("list_files", {"path": "/", "offset": first["next_offset"], "limit": 3})
    assert [e["name"] for e in second["entries"]] == ["zeta.bin"] and not second["has_more"]


def test_list_files_errors(fs, world, tmp_path):
    assert fs.error("list_files", {"path": "/nope"})["code"] == "not_found"
    assert fs.error("list_files", {"path": "/Alpha.md"})["code"] == "not_a_directory"
    assert fs.error("list_files", {"limit": 0})["code"] == "invalid_argument"
    # The folder is opened once, as a folder: each refusal names the argument and the path.
    os.mkfifo(world.fs_root / "pipe")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", world.fs_root / "out")
    os.symlink("Alpha.md", world.fs_root / "alpha_link")
    cases = {
        "/nope/deeper": ("not_found", "path: /nope/deeper does not exist"),
        "/Alpha.md/x": ("not_a_directory", "path: /Alpha.md/x is not a directory"),
        "/alpha_link": ("not_a_directory", "path: /alpha_link is not a directory"),
        "/pipe": ("not_a_directory", "path: /pipe is not a directory"),
        "/out": ("path_outside_root", "path: '/out' resolves outside the root (through a link)"),
    }
    for path, (code, message) in cases.items():
        error = fs.error("list_files", {"path": path})
        assert (error["code"], message in error["message"]) == (code, True), (path, error)


def test_read_text_file_whole_and_by_lines(fs):
    assert fs.ok("read_text_file", {"file_path": "/Reports/q3.txt"})["content"] == "line1\nline2\nline3\n"
    part = fs.ok("read_text_file", {"file_path": "Reports/q3.txt", "start_line": 2, "end_line": 3})
    assert part["content"] == "line2\nline3\n" and part["total_lines"] == 3 and not part["truncated"]
    assert (
        fs.error("read_text_file", {"file_path": "/Reports/q3.txt", "start_line": 9})["code"]
        == "invalid_argument"
    )


def test_read_text_file_caps_and_says_how_to_continue(fs):
    result = fs.call("read_text_file", {"file_path": "/notes/é.txt", "max_bytes": 20})
    data = result.structured_content
    assert (
        data["truncated"] and data["bytes_read"] <= 20 and data["next"]["byte_offset"] == data["bytes_read"]
    )
    assert "continue with read_text_file" in text_of(result)
    # Reassembling the pages gives the file back exactly, even across multi-byte characters.
    pieces, offset = [], 0
    while True:
        page = fs.ok("read_text_file", {"file_path": "/notes/é.txt", "byte_offset": offset, "max_bytes": 7})
        pieces.append(page["content"])
        if not page["truncated"]:
            break
        offset = page["next"]["byte_offset"]
    assert "".join(pieces) == "héllo wörld " * 20


def test_read_text_file_line_pages(fs):
    page = fs.ok("read_text_file", {"file_path": "/Reports/q3.txt", "start_line": 1, "max_bytes": 8})
    assert page["content"] == "line1\n" and page["next"] == {"start_line": 2}


def test_read_text_file_encodings(fs):
    assert fs.ok("read_text_file", {"file_path": "/notes/latin1.txt"})["content"] == "café naïve"
    assert (
        fs.ok("read_text_file", {"file_path": "/notes/latin1.txt", "encoding": "latin-1"})["content"]
        == "café naïve"
    )
    assert fs.ok("read_text_file", {"file_path": "/notes/bom.txt"})["content"] == "with bom"
    wide = fs.ok("read_text_file", {"file_path": "/notes/wide.txt"})
    assert wide["content"] == "one\ntwo\nthree\n" and wide["encoding"] == "utf-16"
    assert (
        fs.ok("read_text_file", {"file_path": "/notes/wide.txt", "start_line": 2, "end_line": 2})["content"]
        == "two\n"
    )
    assert (
        fs.error("read_text_file", {"file_path": "/notes/bom.txt", "encoding": "klingon"})["code"]
        == "invalid_argument"
    )


def test_read_text_file_refuses_binary_and_folders(fs):
    error = fs.error("read_text_file", {"file_path": "/zeta.bin"})
    assert error["code"] == "unsupported" and "binary" in error["message"]
    assert fs.error("read_text_file", {"file_path": "/Reports"})["code"] == "not_a_file"
    assert fs.error("read_text_file", {"file_path": "/"})["code"] in ("invalid_argument", "not_a_file")


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(out, format="PNG")
    return out.getvalue()


def test_read_image_file_returns_image_content(world, fs):
    world.file("img/chart.png", _png(40, 30))
    result = fs.call("read_image_file", {"file_path": "/img/chart.png"})
    assert not result.is_error
    image = [block for block in result.content if block.type == "image"][0]
    assert image.mime_type == "image/png"
    assert result.structured_content["width"] == 40 and result.structured_content["height"] == 30
    assert fs.error("read_image_file", {"file_path": "/Alpha.md"})["code"] == "unsupported"


def test_read_image_file_downscales_huge_images(world, fs):
    from PIL import Image

    noisy = Image.frombytes("RGB", (3000, 2000), os.urandom(3000 * 2000 * 3))
    out = io.BytesIO()
    noisy.save(out, format="PNG")
    world.file("img/big.png", out.getvalue())
    data = fs.ok("read_image_file", {"file_path": "/img/big.png"})
    assert data["downscaled"] and data["width"] == 3000


def test_search_files_glob_substring_and_limits(fs):
    assert [m["path"] for m in fs.ok("search_files", {"pattern": "*.txt"})["matches"]] == [
        "/notes/bom.txt",
        "/notes/latin1.txt",
        "/notes/wide.txt",
        "/notes/é.txt",
        "/Reports/archive/old.txt",
        "/Reports/q3.txt",
    ]
    assert [m["path"] for m in fs.ok("search_files", {"pattern": "BUDGET"})["matches"]] == [
        "/Reports/Budget 2024.csv"
    ]
    assert [
        m["path"]
        for m in fs.ok("search_files", {"pattern": "*.txt", "path": "/Reports", "recursive": False})[
            "matches"
        ]
    ] == ["/Reports/q3.txt"]
    assert [m["path"] for m in fs.ok("search_files", {"pattern": "Reports/*/*.txt"})["matches"]] == [
        "/Reports/archive/old.txt"
    ]
    limited = fs.ok("search_files", {"pattern": "*.txt", "max_results": 2})
    assert len(limited["matches"]) == 2 and limited["truncated"]
    assert fs.error("search_files", {"pattern": " "})["code"] == "invalid_argument"


def test_get_file_metadata(fs):
    meta = fs.ok("get_file_metadata", {"file_path": "/Reports/q3.txt"})
    assert meta["size"] == 18 and meta["type"] == "file" and meta["mime_type"] == "text/plain"
    assert meta["extension"] == ".txt" and meta["modified"].endswith("Z")
    folder = fs.ok("get_file_metadata", {"file_path": "/Reports"})
    assert folder["type"] == "directory" and folder["entries"] == 3
    assert fs.error("get_file_metadata", {"file_path": "/nope"})["code"] == "not_found"


def test_get_directory_tree(fs):
    tree = fs.call("get_directory_tree", {"path": "/Reports", "show_size": True})
    assert text_of(tree).splitlines() == [
        "/Reports",
        "├── archive/",
        "│   └── old.txt (3 B)",
        "├── Budget 2024.csv (8 B)",
        "└── q3.txt (18 B)",
    ]
    shallow = fs.ok("get_directory_tree", {"max_depth": 1, "include_files": False})
    assert [c["name"] for c in shallow["tree"]["children"]] == ["notes", "Reports"]
    assert all(c["children"] is None for c in shallow["tree"]["children"])
    assert fs.error("get_directory_tree", {"max_depth": 11})["code"] == "invalid_argument"


def test_get_directory_tree_stops_at_500_entries(world, fs):
    for index in range(600):
        world.file(f"many/f{index:03d}.txt", "")
    tree = fs.ok("get_directory_tree", {"path": "/many"})
    assert tree["entries"] == 500 and tree["truncated"]


def test_links_inside_are_followed_links_out_are_not(world, fs, tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("SECRET")
    os.symlink(tmp_path / "outside", world.fs_root / "out")
    os.symlink(world.fs_root / "Reports", world.fs_root / "reports_link")
    listing = {e["name"]: e for e in fs.ok("list_files", {})["entries"]}
    assert listing["out"]["type"] == "symlink" and "outside" in listing["out"]["note"]
    assert listing["reports_link"]["type"] == "directory"
    assert fs.ok("read_text_file", {"file_path": "/reports_link/q3.txt"})["content"].startswith("line1")
    assert fs.error("read_text_file", {"file_path": "/out/secret.txt"})["code"] == "path_outside_root"
    assert "SECRET" not in str(fs.ok("search_files", {"pattern": "*secret*"}))


def test_server_is_read_only(world):
    with open_session("filesystem", world) as session:
        assert all(tool.annotations.read_only_hint for tool in session.tools())
