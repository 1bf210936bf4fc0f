"""The shared foundation: one definition -> individual and consolidated tools, envelope,
errors, results, registry, path resolver, id validator, file cache, locks."""

from __future__ import annotations

import os
import pkgutil
import threading
import time
from typing import Annotated

import pytest
from fastmcp import FastMCP
from pydantic import BaseModel, Field

import mcp_servers
from atoll.errors import AtollError
from mcp_servers import create_server, get_definition, register_server, unregister_server
from mcp_servers._core import (
    FileCache,
    ImageBlock,
    PathResolver,
    Root,
    ServerContext,
    ServerDefinition,
    ServerOptions,
    ToolError,
    ToolOutput,
    file_lock,
    validate_id,
)
from tests.mcp_servers.helpers import McpSession, make_world, text_of
from tests.mcp_servers.traversal import TraversalCase, make_traversal_world, run_case


class NotesOptions(ServerOptions):
    knob: int | None = None


NOTES = ServerDefinition(
    "notes_test",
    consolidated_name="notes",
    description="A tiny notes server for tests.",
    options=NotesOptions,
)


class Note(BaseModel):
    path: str
    text: str

    def render_text(self) -> str:
        return f"{self.path}: {self.text}"


@NOTES.tool(action="read", read_only=True)
def read_note(ctx: ServerContext, file_path: str, upper: bool = False) -> Note:
    """Read a note.

    Args:
        file_path: virtual path of the note.
        upper: shout it.
    """
    path = ctx.files.at(file_path, argument="file_path")
    text = path.read_bytes().decode()
    return Note(path=path.virtual, text=text.upper() if upper else text)


@NOTES.tool(action="list", read_only=True)
def list_notes(
    ctx: ServerContext, limit: Annotated[int, Field(ge=1, le=100)] = 10, tags: list[str] | None = None
) -> list[str]:
    """List notes, sorted."""
    return sorted(p.name for p in ctx.fs_root.iterdir())[:limit]


@NOTES.tool(action="comment")
def comment_note(ctx: ServerContext, action: str, note: str = "") -> dict:
    """A tool with its own 'action' argument."""
    return {"comment_action": action, "note": note}


@NOTES.tool(action="crash")
def crash_note(ctx: ServerContext) -> dict:
    """Always a bug."""
    raise RuntimeError("kaboom")


@NOTES.tool(action="picture", read_only=True)
async def picture_note(ctx: ServerContext) -> ToolOutput:
    """An async tool returning an image."""
    return ToolOutput(
        data={"mime_type": "image/png"}, text="a picture", images=[ImageBlock(b"\x89PNG", "image/png")]
    )


@NOTES.tool(action="whoami", read_only=True)
def whoami(ctx: ServerContext) -> dict:
    """Who the user is."""
    return {"email": ctx.user_email, "name": ctx.user_name, "knob": ctx.option("knob", "default")}


@pytest.fixture(autouse=True)
def _registered():
    register_server(NOTES)
    yield
    unregister_server(NOTES.name)


@pytest.fixture
def world(tmp_path):
    world = make_world(tmp_path)
    world.file("a.txt", "alpha")
    world.file("b.txt", "beta")
    return world


def session(world, mode="individual", options=None) -> McpSession:
    return McpSession(
        create_server(
            "notes_test", fs_root=world.fs_root, apps_data_root=world.apps_root, mode=mode, options=options
        )
    )


# --- registry ------------------------------------------------------------------------


def test_the_server_table_and_the_server_packages_agree():
    """atoll.apps is the one table: each name is a package whose SERVER carries that name, and
    each server package is in the table (adding a server is its package plus one row)."""
    table = (*mcp_servers.SERVER_NAMES, *mcp_servers.OPTIONAL_SERVER_NAMES)
    assert len(set(table)) == len(table) and "mail" in mcp_servers.SERVER_NAMES
    packages = {
        module.name
        for module in pkgutil.iter_modules(mcp_servers.__path__)
        if not module.name.startswith("_")
    }
    assert packages == set(table)
    for name in table:
        assert get_definition(name).name == name


def test_unknown_server_and_mode_are_clear_errors(world):
    with pytest.raises(AtollError) as info:
        create_server("nosuch", fs_root=world.fs_root, apps_data_root=world.apps_root)
    assert info.value.code == "unknown_server" and "nosuch" in info.value.message
    with pytest.raises(AtollError) as info:
        create_server("notes_test", fs_root=world.fs_root, apps_data_root=world.apps_root, mode="both")
    assert info.value.code == "invalid_mode"


def test_importing_the_package_does_not_import_servers_or_fastmcp():
    import subprocess
    import sys

    code = "import sys, mcp_servers; print(sorted(m for m in sys.modules if m.startswith(('fastmcp', 'mcp_servers.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- individual mode -----------------------------------------------------------------


def test_individual_tools_are_named_and_described_from_the_functions(world):
    mcp = session(world)
    try:
        tools = {tool.name: tool for tool in mcp.tools()}
        assert set(tools) == {
            "read_note",
            "list_notes",
            "comment_note",
            "crash_note",
            "picture_note",
            "whoami",
        }
        read = tools["read_note"]
        assert read.description == "Read a note."
        assert read.input_schema["required"] == ["file_path"]
        assert read.input_schema["properties"]["file_path"]["description"] == "virtual path of the note."
        assert read.annotations.read_only_hint is True
        assert tools["list_notes"].input_schema["properties"]["limit"]["maximum"] == 100
    finally:
        mcp.close()


def test_result_has_structured_content_and_readable_text(world):
    mcp = session(world)
    try:
        result = mcp.call("read_note", {"file_path": "/a.txt"})
        assert not result.is_error
        assert result.structured_content == {"path": "/a.txt", "text": "alpha"}
        assert text_of(result) == "/a.txt: alpha"
        listed = mcp.call("list_notes", {"limit": 1})
        assert listed.structured_content == {"result": ["a.txt"]}
    finally:
        mcp.close()


@pytest.mark.parametrize("envelope", ["input", "request"])
def test_envelope_is_unwrapped(world, envelope):
    mcp = session(world)
    try:
        assert mcp.ok("read_note", {envelope: {"file_path": "b.txt", "upper": True}})["text"] == "BETA"
        # JSON text inside the envelope, too
        assert mcp.ok("read_note", {envelope: '{"file_path": "b.txt"}'})["text"] == "beta"
    finally:
        mcp.close()


def test_json_text_for_list_arguments_is_decoded(world):
    mcp = session(world)
    try:
        assert mcp.ok("list_notes", {"tags": '["x", "y"]'}) == {"result": ["a.txt", "b.txt"]}
    finally:
        mcp.close()


def test_bad_arguments_are_one_line_invalid_argument_errors(world):
    mcp = session(world)
    try:
        error = mcp.error("list_notes", {"limit": 1000})
        assert (
            error["code"] == "invalid_argument"
            and "limit" in error["message"]
            and "\n" not in error["message"]
        )
        error = mcp.error("read_note", {})
        assert error["code"] == "invalid_argument" and "file_path" in error["message"]
        error = mcp.error("read_note", {"file_path": "/a.txt", "colour": "red"})
        assert (
            error["code"] == "invalid_argument"
            and "'colour'" in error["message"]
            and "file_path" in error["message"]
        )
        result = mcp.call("read_note", {"file_path": "/missing.txt"})
        assert result.is_error and text_of(result).startswith("error [not_found]: ")
        assert result.structured_content["error"]["argument"] == "file_path"
    finally:
        mcp.close()


def test_unexpected_exception_is_an_internal_error_and_server_keeps_serving(world):
    mcp = session(world)
    try:
        error = mcp.error("crash_note")
        assert error["code"] == "internal" and "kaboom" in error["message"]
        assert mcp.ok("read_note", {"file_path": "/a.txt"})["text"] == "alpha"
    finally:
        mcp.close()


def test_async_tool_and_image_content(world):
    mcp = session(world)
    try:
        result = mcp.call("picture_note")
        assert [block.type for block in result.content] == ["text", "image"]
        assert result.content[1].mime_type == "image/png"
    finally:
        mcp.close()


def test_options_reach_the_tools(world):
    mcp = session(world, options={"user_email": "me@example.com", "user_name": "Me", "knob": "3"})
    try:
        assert mcp.ok("whoami") == {"email": "me@example.com", "name": "Me", "knob": 3}
    finally:
        mcp.close()


def test_an_option_the_server_does_not_declare_is_an_error_naming_it(world):
    with pytest.raises(AtollError) as info:
        session(world, options={"knbo": 3})
    assert info.value.code == "invalid_option"
    assert (
        "server notes_test: option knbo: unknown option" in info.value.message
        and "knob" in info.value.message
    )


# --- consolidated mode ---------------------------------------------------------------


def test_consolidated_mode_exposes_one_tool_plus_schema(world):
    mcp = session(world, mode="consolidated")
    try:
        assert mcp.tool_names() == ["notes", "notes_schema"]
        tool = {t.name: t for t in mcp.tools()}["notes"]
        props = tool.input_schema["properties"]
        assert props["action"]["enum"] == ["read", "list", "comment", "crash", "picture", "whoami", "help"]
        assert {"file_path", "upper", "limit", "tags", "comment_action", "note"} <= set(props)
        assert tool.input_schema["required"] == ["action"]
        assert "- read: Read a note." in tool.description
    finally:
        mcp.close()


def test_consolidated_calls_match_individual_calls(world):
    mcp = session(world, mode="consolidated")
    ind = session(world)
    try:
        args = {"file_path": "/a.txt", "upper": True}
        assert mcp.ok("notes", {"action": "read", **args}) == ind.ok("read_note", args)
        # other actions' arguments left empty by the agent are ignored
        assert (
            mcp.ok("notes", {"action": "read", "file_path": "/a.txt", "limit": None, "tags": []})["text"]
            == "alpha"
        )
        # the tool name works as an action too; the envelope wraps the action
        assert mcp.ok("notes", {"input": {"action": "read_note", "file_path": "/b.txt"}})["text"] == "beta"
        assert mcp.ok("notes", {"action": "comment", "comment_action": "add", "note": "hi"}) == {
            "comment_action": "add",
            "note": "hi",
        }
    finally:
        mcp.close()
        ind.close()


def test_consolidated_errors(world):
    mcp = session(world, mode="consolidated")
    try:
        assert mcp.error("notes", {})["code"] == "invalid_argument"
        error = mcp.error("notes", {"action": "fly"})
        assert error["code"] == "unknown_action" and "read" in error["message"]
        error = mcp.error("notes", {"action": "read", "file_path": "/a.txt", "limit": 5})
        assert error["code"] == "invalid_argument" and "'limit'" in error["message"]
        assert mcp.error("notes", {"action": "crash"})["code"] == "internal"
    finally:
        mcp.close()


def test_help_and_schema_are_derived_from_the_definitions(world):
    mcp = session(world, mode="consolidated")
    try:
        help_data = mcp.ok("notes", {"action": "help"})
        read = next(a for a in help_data["actions"] if a["action"] == "read")
        assert read == {
            "action": "read",
            "tool": "read_note",
            "summary": "Read a note.",
            "required": ["file_path"],
            "optional": ["upper"],
        }
        schema = mcp.ok("notes_schema", {"model": "read"})
        assert schema["tool"] == "read_note"
        assert schema["input_schema"]["required"] == ["file_path"]
        assert "comment_action" in mcp.ok("notes_schema", {"model": "comment"})["input_schema"]["properties"]
        assert [a["action"] for a in mcp.ok("notes_schema", {})["actions"]][:2] == ["read", "list"]
        assert mcp.error("notes_schema", {"model": "fly"})["code"] == "unknown_action"
    finally:
        mcp.close()


# --- path resolver and ids -----------------------------------------------------------


def test_resolver_maps_virtual_paths_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "Reports").mkdir(parents=True)
    (root / "Reports" / "q3.xlsx").write_text("x")
    files = PathResolver(root)
    for value in (
        "/Reports/q3.xlsx",
        "Reports/./q3.xlsx",
        "/Reports/../Reports/q3.xlsx",
        "/filesystem/Reports/q3.xlsx",
    ):
        path = files.at(value)
        assert path.parts == ("Reports", "q3.xlsx") and path.virtual == "/Reports/q3.xlsx"
        assert path.read_bytes() == b"x"
    assert files.at("/etc/passwd").virtual == "/etc/passwd"  # absolute = virtual
    assert files.at("/etc/passwd").kind() is None
    assert files.at("").is_root and files.at("/").virtual == "/"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("../x", "path_outside_root"),
        ("/a/../../x", "path_outside_root"),
        ("a\x00b", "invalid_argument"),
        ("x" * 5000, "invalid_argument"),
        ("/" + "n" * 256, "invalid_argument"),
        ("/out/secret.txt", "path_outside_root"),
        (42, "invalid_argument"),
    ],
)
def test_resolver_refuses_escapes_naming_the_argument(tmp_path, value, code):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "out")
    with pytest.raises(ToolError) as info:
        PathResolver(root).at(value, argument="file_path").read_bytes()
    assert info.value.code == code and info.value.argument == "file_path"
    assert info.value.message.startswith("file_path: ")


def test_resolver_checks_existence_and_kind(tmp_path):
    files = PathResolver(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ToolError, match="does not exist") as info:
        files.at("/nope", argument="p").require()
    assert info.value.code == "not_found"
    assert files.at("/nope", argument="p").require("file", must_exist=False).virtual == "/nope"
    assert pytest.raises(ToolError, files.at("/d", argument="p").require, "file").value.code == "not_a_file"
    assert pytest.raises(ToolError, files.at("/d", argument="p").read_bytes).value.code == "not_a_file"
    assert (
        pytest.raises(ToolError, files.at("/f", argument="p").require, "dir").value.code == "not_a_directory"
    )
    assert pytest.raises(ToolError, files.at("/f", argument="p").entries).value.code == "not_a_directory"
    assert (
        pytest.raises(ToolError, files.at, "/", argument="p", allow_root=False).value.code
        == "invalid_argument"
    )


@pytest.mark.parametrize("value", ["..", ".", "", "  ", "a/b", "a\\b", "x\x00", "tab\there", "z" * 300, None])
def test_validate_id_refuses_path_like_ids(value):
    with pytest.raises(ToolError) as info:
        validate_id(value, argument="channel_id")
    assert info.value.code == "invalid_argument" and info.value.argument == "channel_id"


def test_validate_id_accepts_google_chat_ids():
    assert validate_id("DM 8hB2jAAAAE", argument="channel_id") == "DM 8hB2jAAAAE"
    assert validate_id("Space AAAAl3kD9xY", argument="channel_id") == "Space AAAAl3kD9xY"


# --- cache, locks, atomic writes -----------------------------------------------------


def test_file_cache_reparses_only_when_the_file_changes(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("one")
    parses = []
    cache = FileCache(lambda p: parses.append(p) or p.read_text())
    assert cache.get(path) == "one" and cache.get(path) == "one"
    assert len(parses) == 1 and cache.hits == 1 and cache.misses == 1
    path.write_text("two!")  # external change (a populate): size and mtime differ
    assert cache.get(path) == "two!" and len(parses) == 2
    os.utime(path, ns=(1, 1))  # same size, new mtime
    assert cache.get(path) == "two!" and len(parses) == 3
    cache.put(path, "parsed by writer")  # our own write: no re-parse
    assert cache.get(path) == "parsed by writer" and len(parses) == 3
    path.unlink()
    with pytest.raises(FileNotFoundError):
        cache.get(path)


def test_file_lock_serialises_writers_and_invalidates(tmp_path):
    path = tmp_path / "counter.txt"
    path.write_text("0")
    cache = FileCache(lambda p: int(p.read_text()))

    def bump():
        for _ in range(20):
            with file_lock(path, caches=(cache,)):
                value = int(path.read_text())
                time.sleep(0.0005)
                Root(tmp_path).write_atomic(path.name, str(value + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get(path) == 80
    assert [p.name for p in tmp_path.iterdir()] == ["counter.txt"]  # no lock or temp files beside data


def test_file_lock_times_out_as_conflict(tmp_path):
    path = tmp_path / "x"
    path.write_text("")
    held = threading.Event()
    release = threading.Event()

    def holder():
        with file_lock(path):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(ToolError) as info, file_lock(path, timeout=0.2):
            pass
        assert info.value.code == "conflict"
    finally:
        release.set()
        thread.join()


# --- the traversal harness itself must be able to fail --------------------------------

LEAKY = ServerDefinition("leaky_test", consolidated_name="leaky")


@LEAKY.tool
def leaky_read(ctx: ServerContext, file_path: str) -> dict:
    """Reads without the resolver (the bug the harness must catch)."""
    return {"text": open(os.path.join(ctx.fs_root, file_path.lstrip("/"))).read()}  # noqa: SIM115


@LEAKY.tool
def safe_read(ctx: ServerContext, file_path: str) -> dict:
    """Reads through the resolver."""
    return {"text": ctx.files.at(file_path, argument="file_path").read_bytes().decode()}


def test_traversal_harness_catches_a_leaky_tool_and_passes_a_safe_one(tmp_path):
    tw = make_traversal_world(tmp_path)
    register_server(LEAKY)
    try:
        mcp = McpSession(
            create_server("leaky_test", fs_root=tw.world.fs_root, apps_data_root=tw.world.apps_root)
        )
        try:
            leaky = run_case(
                mcp,
                tw,
                TraversalCase("leaky_test", "leaky_read", ("file_path",)),
                tool_name="leaky_read",
                wrap=dict,
            )
            safe = run_case(
                mcp,
                tw,
                TraversalCase("leaky_test", "safe_read", ("file_path",)),
                tool_name="safe_read",
                wrap=dict,
            )
        finally:
            mcp.close()
    finally:
        unregister_server(LEAKY.name)
    assert any("secret revealed" in escape for escape in leaky)
    assert safe == []


def test_null_for_an_optional_argument_means_not_given(world):
    mcp = session(world)
    try:
        assert mcp.ok("list_notes", {"limit": None, "tags": None}) == {"result": ["a.txt", "b.txt"]}
        assert mcp.ok("read_note", {"file_path": "/a.txt", "upper": None})["text"] == "alpha"
        assert (
            mcp.error("read_note", {"file_path": None})["code"] == "invalid_argument"
        )  # required stays required
    finally:
        mcp.close()


class Row(BaseModel):
    name: str
    values: list[int] = []


class Node(BaseModel):
    label: str
    children: list[Node] = []


SHAPES = ServerDefinition("shapes_test", consolidated_name="shapes")


@SHAPES.tool
def add_rows(ctx: ServerContext, rows: list[Row], tree: Node | None = None) -> dict:
    """Nested models as arguments."""
    return {"total": sum(sum(r.values) for r in rows), "root": tree.label if tree else None}


def test_nested_model_arguments_are_inlined_and_validated(world):
    register_server(SHAPES)
    try:
        for mode in ("individual", "consolidated"):
            server = create_server(
                "shapes_test", fs_root=world.fs_root, apps_data_root=world.apps_root, mode=mode
            )
            mcp = McpSession(server, definition=SHAPES, mode=mode)
            try:
                schema = {t.name: t for t in mcp.tools()}[
                    "add_rows" if mode == "individual" else "shapes"
                ].input_schema
                assert schema["properties"]["rows"]["items"]["properties"]["values"]["items"] == {
                    "type": "integer"
                }
                args = {
                    "rows": [{"name": "a", "values": [1, 2]}, {"name": "b", "values": ["3"]}],
                    "tree": {"label": "r"},
                }
                assert mcp.ok("add_rows", args) == {"total": 6, "root": "r"}
                assert mcp.ok("add_rows", {"rows": '[{"name": "a", "values": [5]}]'})["total"] == 5
                error = mcp.error("add_rows", {"rows": [{"values": [1]}]})
                assert error["code"] == "invalid_argument" and "rows.0.name" in error["message"]
            finally:
                mcp.close()
    finally:
        unregister_server(SHAPES.name)


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
async def test_direct_tools_are_every_tool_and_answer_without_the_server(world, mode):
    """The in-process interface the environment's gateway uses instead of the server's call_tool."""
    server = create_server(
        "notes_test",
        fs_root=world.fs_root,
        apps_data_root=world.apps_root,
        mode=mode,
        options={"user_email": "me@example.com"},
    )
    direct = mcp_servers.direct_tools(server)
    assert set(direct) == {tool.name for tool in await server.list_tools()}
    name, arguments = ("whoami", {}) if mode == "individual" else ("notes", {"action": "whoami"})
    result = await direct[name].run(arguments)
    assert result.structured_content["email"] == "me@example.com" and not result.is_error
    assert mcp_servers.direct_tools(FastMCP("other")) == {}


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
async def test_tools_without_a_server_are_listed_as_the_server_lists_them(world, mode):
    """The environment's gateway takes every app server's tools without a FastMCP server
    (``create_tools``) and lists them itself: what its clients see must be what the server
    would list, through its middleware (which inlines a schema's $refs), in the same order."""
    names = [*mcp_servers.SERVER_NAMES, *mcp_servers.OPTIONAL_SERVER_NAMES, "notes_test"]
    for name in names:
        roots = {"fs_root": world.fs_root, "apps_data_root": world.apps_root, "mode": mode}
        built = mcp_servers.create_tools(name, **roots)
        served = await create_server(name, **roots).list_tools()
        assert built.name == name
        assert [tool.to_mcp_tool().model_dump() for tool in built.tools] == [
            tool.to_mcp_tool().model_dump() for tool in served
        ], name
    notes = mcp_servers.create_tools("notes_test", **roots, options={"user_email": "me@x.org"})
    name, arguments = ("whoami", {}) if mode == "individual" else ("notes", {"action": "whoami"})
    result = await next(tool for tool in notes.tools if tool.name == name).run(arguments)
    assert result.structured_content["email"] == "me@x.org" and not result.is_error


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
async def test_servers_for_two_worlds_share_validated_tools_but_each_calls_into_its_own(tmp_path, mode):
    """A world's servers are built anew for every trial: each tool's model is validated once
    per process and copied, and each copy calls into the world of the server it was built for."""
    worlds = []
    for name, text in (("first", "alpha"), ("second", "omega")):
        world = make_world(tmp_path / name)
        world.file("a.txt", text)
        worlds.append(world)
    servers = [
        create_server(
            "notes_test", fs_root=w.fs_root, apps_data_root=w.apps_root, mode=mode, options={"knob": n}
        )
        for n, w in enumerate(worlds)
    ]
    first, second = (mcp_servers.direct_tools(server) for server in servers)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] is not second[name]
        assert first[name].parameters is second[name].parameters  # validated once, shared
        assert first[name].model_dump() == second[name].model_dump()
    name, arguments = (
        ("read_note", {"file_path": "/a.txt"})
        if mode == "individual"
        else (
            "notes",
            {"action": "read", "file_path": "/a.txt"},
        )
    )
    texts = [(await tools[name].run(arguments)).structured_content["text"] for tools in (first, second)]
    assert texts == ["alpha", "omega"]
    listed = [[tool.name for tool in await server.list_tools()] for server in servers]
    assert listed[0] == listed[1]


async def test_a_definition_that_gains_a_tool_after_a_server_was_built_shows_it_in_the_next(world):
    """The tool models kept for the next server are reused only while what they were made from
    is unchanged: an action added later is in the consolidated tool of servers built after."""
    growing = ServerDefinition("growing_test", consolidated_name="growing", description="Grows.")

    @growing.tool(action="first", read_only=True)
    def first_tool(ctx: ServerContext) -> dict:
        """The first."""
        return {"n": 1}

    register_server(growing)
    try:
        before = create_server(
            "growing_test", fs_root=world.fs_root, apps_data_root=world.apps_root, mode="consolidated"
        )

        @growing.tool(action="second", read_only=True)
        def second_tool(ctx: ServerContext) -> dict:
            """The second."""
            return {"n": 2}

        after = create_server(
            "growing_test", fs_root=world.fs_root, apps_data_root=world.apps_root, mode="consolidated"
        )
        actions = [
            mcp_servers.direct_tools(server)["growing"].parameters["properties"]["action"]["enum"]
            for server in (before, after)
        ]
        assert actions == [["first", "help"], ["first", "second", "help"]]
        result = await mcp_servers.direct_tools(after)["growing"].run({"action": "second"})
        assert result.structured_content == {"n": 2}
    finally:
        unregister_server(growing.name)
