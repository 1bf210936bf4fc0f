"""The environment and the app servers use only fastmcp's (and the MCP SDK's) public API.

That is what lets pyproject.toml allow every fastmcp 4 release instead of one minor version:
a private module, name or attribute may change in any release. Checked statically over every
file of ``environment/`` and ``mcp_servers/``:

- no import of a module with an underscore part (``fastmcp._compat``) or of an underscore
  name, and none of fastmcp's proxy/mount internals (``ProxyTool``, ``FastMCPProvider``);
- no read of an underscore attribute (``x._run``, ``getattr(x, "_connection")``) that fastmcp
  or the SDK has and the reading file does not define itself;
- no class of ours overriding a private member of the fastmcp/SDK class it extends, except
  the lookup hooks fastmcp documents for ``Provider`` subclasses.

One documented exception is listed in ``KNOWN``: ``mcp_front.py`` reads the SDK's
``ServerSession._connection`` (docs/environment.md, "Why ServerSession._connection").

Then the gateway's behaviour that no static check sees: our app servers are called without
fastmcp's client side, an in-process server that is not ours is served through a client with
its own lifespan, which a swap ends, and a non-object output schema is presented wrapped.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import re
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path

import httpx
import mcp_types
import pytest
from fastmcp import Client, FastMCP
from fastmcp.server.providers import Provider

from environment import EnvironmentServer
from tests.fresh_interpreter import run_fresh

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("environment", "mcp_servers")
THIRD_PARTY = ("fastmcp", "mcp", "mcp_types")

#: fastmcp's proxy and mount machinery: public-looking names whose behaviour is internal.
INTERNAL_MODULES = ("fastmcp.server.providers.proxy", "fastmcp.server.providers.fastmcp_provider")
INTERNAL_NAMES = {"ProxyTool", "FastMCPProvider", "FastMCPProviderTool", "RawStructuredToolResult"}

#: The lookup hooks fastmcp's ``Provider`` documents for subclasses (see its module docstring).
PROVIDER_HOOKS = {
    "_list_tools",
    "_get_tool",
    "_list_resources",
    "_get_resource",
    "_list_resource_templates",
    "_get_resource_template",
    "_list_prompts",
    "_get_prompt",
}

#: (file, private name) -> why it is still read. Each entry is documented where it is used.
KNOWN = {
    ("environment/mcp_front.py", "_connection"): (
        "the SDK's per-client Connection behind tools/list_changed; docs/environment.md, "
        "'Why ServerSession._connection'; test_archipelago_clients.py fails if it moves"
    ),
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _third_party(module: str) -> bool:
    return module.split(".")[0] in THIRD_PARTY


@cache
def _third_party_private_names() -> frozenset[str]:
    """Every underscore name fastmcp and the SDK define or read (attributes, methods)."""
    pattern = re.compile(r"\.(_[A-Za-z]\w*)|def (_[A-Za-z]\w*)|^\s+(_[A-Za-z]\w*)\s*[:=]", re.M)
    names: set[str] = set()
    for package in THIRD_PARTY:
        for path in Path(importlib.import_module(package).__path__[0]).rglob("*.py"):
            for groups in pattern.findall(path.read_text(errors="replace")):
                names.update(name for name in groups if name and _is_private(name))
    return frozenset(names)


def _defined_names(tree: ast.AST) -> set[str]:
    """Names a file defines itself: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute):
                        names.add(part.attr)
                    elif isinstance(part, ast.Name):
                        names.add(part.id)
    return names


def _imported(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path, for everything a file imports from fastmcp or the SDK."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _third_party(node.module):
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _third_party(alias.name):
                    found[alias.asname or alias.name.split(".")[0]] = alias.name
    return found


def _import_problems(tree: ast.AST) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _third_party(node.module):
            modules, names = [node.module], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [a.name for a in node.names if _third_party(a.name)], []
        else:
            continue
        for module in modules:
            if any(_is_private(part) for part in module.split(".")) or module.startswith(INTERNAL_MODULES):
                problems.append(f"line {node.lineno}: imports the private module {module}")
        for name in names:
            if _is_private(name) or name in INTERNAL_NAMES:
                problems.append(f"line {node.lineno}: imports the private name {node.module}.{name}")
    return problems


def _attribute_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every ``x._name`` and ``getattr(x, "_name")`` in a file."""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            reads.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "setattr", "hasattr", "delattr"}
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            reads.append((node.lineno, node.args[1].value))
    return reads


def _resolve(dotted: str) -> object | None:
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _override_problems(tree: ast.AST, imported: dict[str, str]) -> list[str]:
    """Private members a class of ours redefines on the fastmcp/SDK class it extends."""
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for base in node.bases:
            dotted = imported.get(base.id) if isinstance(base, ast.Name) else None
            resolved = _resolve(dotted) if dotted else None
            if isinstance(resolved, type):
                bases.append(resolved)
        for member in node.body:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                name = member.name
            elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                name = member.target.id
            else:
                continue
            if not _is_private(name):
                continue
            for base in bases:
                if name in PROVIDER_HOOKS and issubclass(base, Provider) and not issubclass(base, FastMCP):
                    continue  # documented for Provider subclasses (FastMCP is one, but its lookup is its own)
                if hasattr(base, name) or name in getattr(base, "__private_attributes__", {}):
                    problems.append(f"line {member.lineno}: {node.name} overrides {base.__name__}.{name}")
    return problems


def _private_uses(tree: ast.AST, relative: str) -> list[str]:
    """Each private use in the file ``relative`` (parsed as ``tree``), one line each."""
    defined, theirs = _defined_names(tree), _third_party_private_names()
    problems = _import_problems(tree) + _override_problems(tree, _imported(tree))
    for line, name in _attribute_reads(tree):
        if name in theirs and name not in defined and (relative, name) not in KNOWN:
            problems.append(f"line {line}: reads the private attribute {name}")
    return [f"{relative} {problem}" for problem in problems]


def test_environment_and_app_servers_use_only_public_fastmcp_api() -> None:
    problems = []
    for part in SCANNED:
        for path in sorted((ROOT / part).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            problems += _private_uses(ast.parse(path.read_text(), relative), relative)
    assert problems == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from fastmcp.server.providers.proxy import ProxyTool", "private module"),
        ("from fastmcp.server.providers import FastMCPProvider", "private name"),
        ("import fastmcp._compat", "private module"),
        ("from fastmcp.tools.base import _convert_to_content", "private name"),
        ("async def call(tool):\n    return await tool._run({})", "private attribute _run"),
        (
            "def connection(session):\n    return getattr(session, '_connection', None)",
            "attribute _connection",
        ),
        ("from fastmcp import FastMCP\nclass S(FastMCP):\n    def _run_middleware(self): ...", "overrides"),
    ],
)
def test_the_check_catches_each_kind_of_private_use(source: str, expected: str) -> None:
    problems = _private_uses(ast.parse(source), "environment/probe.py")
    assert any(expected in problem for problem in problems), problems


def test_a_provider_hook_redefined_on_fastmcp_itself_is_caught() -> None:
    source = (
        "from fastmcp import FastMCP\n"
        "class Front(FastMCP):\n"
        "    async def _get_tool(self, name, version=None): return None\n"
    )
    assert _private_uses(ast.parse(source), "environment/probe.py") == [
        "environment/probe.py line 3: Front overrides FastMCP._get_tool"
    ]


def test_documented_provider_hooks_and_own_private_state_pass() -> None:
    source = (
        "from fastmcp.server.providers import Provider\n"
        "from fastmcp.tools import Tool\n"
        "class P(Provider):\n"
        "    async def _list_tools(self): return []\n"
        "    async def _get_tool(self, name, version=None): return None\n"
        "class T(Tool):\n"
        "    _inner: object = None\n"
        "    async def run(self, arguments): return await self._inner.run(arguments)\n"
    )
    assert _private_uses(ast.parse(source), "environment/probe.py") == []


_PROBE = """
import json, sys, tempfile
from pathlib import Path

import httpx

from environment import EnvironmentServer, EnvironmentSettings

root = Path(tempfile.mkdtemp())
(root / "fs").mkdir()
settings = EnvironmentSettings(fs_root=root / "fs", apps_data_root=root / "apps", preload_servers=False)
headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}
with EnvironmentServer(settings) as env, httpx.Client(base_url=env.url, timeout=120) as http:
    config = {"mcpServers": {"filesystem": {"server": "filesystem"}, "mail": {"server": "mail"}}}
    http.post("/apps", json=config).raise_for_status()
    opened = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}, headers=headers)
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
    answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=headers)
    print(json.dumps({
        "is_error": answer.json()["result"]["isError"],
        "client_modules": sorted(m for m in sys.modules if m.startswith("fastmcp.client")),
    }))
"""


def test_our_in_process_servers_are_served_without_fastmcps_client_side() -> None:
    report, _ = run_fresh(_PROBE, env={"ATOLL_LOG_LEVEL": "WARNING"})
    assert report == {"is_error": False, "client_modules": []}


def test_a_foreign_in_process_server_runs_its_lifespan_until_swapped_out(settings) -> None:
    """A FastMCP server that is not one of ours is served through an in-memory client: its
    lifespan starts with its gateway and ends when a swap retires that gateway."""
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(server: FastMCP):
        events.append("started")
        try:
            yield {"greeting": "hello"}
        finally:
            events.append("stopped")

    def factory(name: str, **_: object) -> FastMCP:
        if name != "foreign":
            return FastMCP(name)
        server = FastMCP(name, lifespan=lifespan)

        @server.tool
        def count() -> int:
            """How often the lifespan was entered."""
            return events.count("started")

        return server

    async def call(url: str) -> mcp_types.CallToolResult:
        async with Client(url) as mcp:
            return await mcp.call_tool_mcp("foreign_count", {})

    with (
        EnvironmentServer(settings, server_factory=factory) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        assert http.post("/apps", json={"mcpServers": {"foreign": {"server": "foreign"}}}).status_code == 200
        assert events == ["started"]
        result = asyncio.run(call(env.mcp_url))
        assert not result.is_error and result.structured_content == {"result": 1}
        assert http.post("/apps", json={"mcpServers": {"other": {"server": "other"}}}).status_code == 200
        assert events == ["started", "stopped"]


def test_a_non_object_output_schema_is_listed_and_answered_wrapped_under_result() -> None:
    """A 2026-07-28 server may declare an array schema and send the bare array: the gateway
    lists an object schema wrapping it and wraps each result to match, as FastMCP does for its
    own tools, so clients validating against the listed schema accept the result."""
    from environment.gateway import ClientTool, _client_result

    listed = mcp_types.Tool(
        name="words",
        input_schema={"type": "object"},
        output_schema={"type": "array", "items": {"type": "string"}},
    )
    tool = ClientTool.listed(None, listed)
    assert tool.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "string"}}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    sent = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text='["a"]')],
        structured_content=["a"],
        meta={mcp_types.SERVER_INFO_META_KEY: {"name": "backend", "version": "1"}, "trace": "t1"},
    )
    result = _client_result(sent, wrap=True)
    assert result.structured_content == {"result": ["a"]}
    assert result.meta == {
        "trace": "t1",
        "fastmcp": {"wrap_result": True},
    }  # the backend's serverInfo is dropped
    assert result.content[0].text == '["a"]'
