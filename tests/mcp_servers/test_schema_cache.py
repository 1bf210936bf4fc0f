"""Our tools' schemas kept between processes (mcp_servers/_core/schema_cache.py): a start reads
what an earlier one computed, exactly as it would compute it, and never a stale or broken file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_servers._core import schema_cache
from mcp_servers._core.definition import ServerDefinition
from tests.fresh_interpreter import run_fresh

#: Builds every server in both modes and reports every tool's listed schemas, and the counts.
_PROBE = """
import json, tempfile
from pathlib import Path
from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES, create_server
from mcp_servers._core import schema_cache
from mcp_servers._core.build import direct_tools

root = Path(tempfile.mkdtemp())
listed = {}
for name in (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES):
    for mode in ("individual", "consolidated"):
        server = create_server(name, fs_root=root / "fs", apps_data_root=root / "apps", mode=mode)
        for tool in direct_tools(server).values():
            listed[f"{name}/{mode}/{tool.name}"] = [tool.parameters, tool.output_schema]
saved = schema_cache.save()
print(json.dumps({"listed": listed, "counts": schema_cache.counts, "saved": str(saved) if saved else None}))
"""


def _build(cache: str) -> dict:
    report, _ = run_fresh(_PROBE, env={"ATOLL_SCHEMA_CACHE": cache}, timeout=300)
    return report


def test_a_start_reads_the_schemas_an_earlier_one_computed_and_they_are_the_same(tmp_path: Path) -> None:
    computed = _build("off")
    first = _build(str(tmp_path))
    second = _build(str(tmp_path))
    assert computed["counts"]["read"] == 0 and computed["saved"] is None
    assert first["counts"]["read"] == 0 and first["counts"]["computed"] > 100
    assert first["saved"] is not None and Path(first["saved"]).parent == tmp_path
    assert second["counts"]["computed"] == 0  # nothing recomputed
    # A build reads only what tools/list serves: a tool's published schema is stored whole, so
    # the full input schema it was made from (for validating calls) is read on a first call.
    assert 100 < second["counts"]["read"] <= first["counts"]["computed"]
    assert second["saved"] is None  # nothing new to write
    assert second["listed"] == computed["listed"] == first["listed"]  # what clients see is unchanged


def test_the_key_changes_with_any_source_byte(tmp_path: Path) -> None:
    package = tmp_path / "mcp_servers"
    (package / "mail").mkdir(parents=True)
    (package / "mail" / "tools.py").write_text("def list_mails(limit: int = 20): ...\n")
    before = schema_cache.source_key([package])
    (package / "mail" / "tools.py").write_text("def list_mails(limit: int = 21): ...\n")
    assert schema_cache.source_key([package]) != before
    (package / "mail" / "tools.py").write_text("def list_mails(limit: int = 20): ...\n")
    assert schema_cache.source_key([package]) == before
    (package / "mail" / "new.py").write_text("")
    assert schema_cache.source_key([package]) != before  # a new module counts too


@pytest.fixture
def cache_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATOLL_SCHEMA_CACHE", str(tmp_path))
    schema_cache.reset()
    yield tmp_path
    schema_cache.reset()


def _tool_def():
    from mcp_servers import get_definition

    return next(tool for tool in get_definition("filesystem").tools if tool.name == "list_files")


def test_a_corrupt_file_is_computed_over_and_replaced(cache_in: Path) -> None:
    tool = _tool_def()
    expected = tool._input_schema()
    path = cache_in / f"{schema_cache.source_key()}.json"
    path.write_bytes(b'{"truncated": ')
    got = schema_cache.cached_schema(tool.function, tool.name, "input", tool._input_schema)
    assert got == expected and schema_cache.counts == {"read": 0, "computed": 1}
    assert schema_cache.save() == path
    stored = json.loads(path.read_bytes())
    assert list(stored.values()) == [expected]
    assert path.stat().st_mode & 0o044 == 0o044  # readable by an image's service user


def test_a_schema_read_is_a_fresh_object_each_time(cache_in: Path) -> None:
    tool = _tool_def()
    schema_cache.cached_schema(tool.function, tool.name, "input", tool._input_schema)
    schema_cache.save()
    schema_cache.reset()
    first = schema_cache.cached_schema(tool.function, tool.name, "input", tool._input_schema)
    first["properties"].clear()  # a caller changing its copy...
    second = schema_cache.cached_schema(tool.function, tool.name, "input", tool._input_schema)
    assert second == tool._input_schema()  # ...changes nothing for the next
    assert schema_cache.counts["read"] == 2


def test_an_unwritable_directory_only_means_computing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ATOLL_SCHEMA_CACHE", str(blocker / "cache"))  # a directory that cannot exist
    schema_cache.reset()
    try:
        tool = _tool_def()
        assert schema_cache.cached_schema(tool.function, tool.name, "input", tool._input_schema) == (
            tool._input_schema()
        )
        assert schema_cache.save() is None
    finally:
        schema_cache.reset()


def test_tools_outside_our_servers_are_always_computed(cache_in: Path) -> None:
    definition = ServerDefinition(name="plugin", consolidated_name="plugin")

    @definition.tool
    def echo(ctx, text: str) -> str:
        """Echo."""
        return text

    tool = definition.tools[0]
    assert tool.input_schema["properties"]["text"]["type"] == "string"
    assert schema_cache.counts == {"read": 0, "computed": 1}
    assert schema_cache.save() is None  # nothing of a test's (or a plug-in's) tool is written
