"""The MCP gateway: one set of tools, named ``{server}_{tool}``, drawn from many MCP servers.

A :class:`Gateway` is immutable once open: its servers are connected and its tool table is
fixed. :class:`GatewayManager` swaps gateways atomically (``POST /apps``): the new one is
opened and checked ready while the old one keeps serving; only then does the manager point
at it, let the old one's in-flight calls finish, and close it (ending its stdio children).

Each gateway lives inside its own task, which closes what the gateway opened (its clients) when
it retires.

Only fastmcp's public API is used (``tests/environment/test_fastmcp_public_api.py``): our app
servers' tools (``mcp_servers.create_tools``, with no FastMCP server built around them) are
listed as such a server lists them and called with ``Tool.run()``; every other server,
stdio, HTTP, SSE or an in-process one that is not ours, through a fastmcp ``Client``
(:class:`ClientTool`, ``Client.call_tool_mcp``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from fastmcp import FastMCP
from fastmcp.tools import Tool, ToolResult
from mcp.shared.exceptions import MCPError as McpError

from atoll import telemetry
from environment.config import AppsConfig, ServerConfig
from environment.gateway_errors import GatewayNotReady, ToolNameCollision, describe_error
from environment.metrics import EnvironmentMetrics

if TYPE_CHECKING:
    # FastMCP's client side (auth extensions, key-value stores: ~0.3 s of CPU) is imported only
    # when a config names a stdio or HTTP server (or an in-process server that is not ours).
    from fastmcp import Client

    from environment.coworkers import CoworkerEngine
    from mcp_servers._core.build import AppTools

logger = logging.getLogger("environment.gateway")

_CONNECTION_CLOSED = -32000  # JSON-RPC code the MCP client reports for a dead transport

#: Result ``_meta`` keys that describe the gateway's connection to a server, not the call: they
#: must not reach the gateway's own clients (the front server stamps its own serverInfo).
_CONNECTION_META_KEYS = frozenset(
    {
        mcp_types.PROTOCOL_VERSION_META_KEY,
        mcp_types.CLIENT_INFO_META_KEY,
        mcp_types.CLIENT_CAPABILITIES_META_KEY,
        mcp_types.SERVER_INFO_META_KEY,
    }
)

#: Builds our own server's tools for ``{"transport": "inprocess"}`` (``mcp_servers.create_tools``);
#: tests may swap it for one that builds a FastMCP server, which is then served through a client
#: (or called directly where ``mcp_servers.direct_tools`` knows its tools).
ServerFactory = Callable[..., "FastMCP | AppTools"]

#: How gateway tools are named: ``atoll`` always ``{server}_{tool}``; ``archipelago`` leaves the
#: tools of a one-server config unprefixed, as Archipelago (FastMCP's proxy) does.
ToolNames = Literal["atoll", "archipelago"]


def _default_server_factory(name: str, **kwargs: Any) -> AppTools:
    # Imported lazily: the app servers are only needed for in-process entries.
    from environment.preload import wait_for_preload
    from mcp_servers import create_tools

    # A background preload under way is importing these same modules: let it finish rather
    # than import them from a second thread at once (POST /apps' ready timeout still applies).
    wait_for_preload()
    return create_tools(name, **kwargs)


def _server_warmer(server: FastMCP) -> Callable[[], Any] | None:
    from mcp_servers import server_warmer

    return server_warmer(server)


def _warm_gateway(manager: GatewayManager, gateway: Gateway) -> None:
    started = time.perf_counter()
    for name, warm in gateway.warmers.items():
        if manager.current is not gateway:  # replaced meanwhile: its servers are retiring
            return
        try:
            warm()
        except Exception as exc:  # the first call will meet (and report) the same problem
            logger.info("building indexes failed", extra={"server": name, "error": describe_error(exc)})
    logger.info(
        "app-data indexes built",
        extra={
            "servers": list(gateway.warmers),
            "duration_ms": round((time.perf_counter() - started) * 1000),
        },
    )


class GatewayTool(Tool):
    """A server's tool exposed under its gateway name; counts itself in and out of its gateway."""

    _inner: Any = None
    _gateway: Any = None
    _server_name: str = ""
    _tool_name: str = ""
    _context_free: bool = False
    _writes: bool = True  # not read-only: the coworker engine looks at what it wrote
    #: what ``run`` needs, as plain references (a pydantic private attribute costs a
    #: ``__getattr__`` per read; this is one read per call instead of five)
    _hot: Any = None

    @classmethod
    def wrap(
        cls,
        gateway: Gateway,
        server_name: str,
        inner: Tool,
        direct: Tool | None = None,
        *,
        prefixed: bool = True,
    ) -> GatewayTool:
        """``inner`` describes the tool and is called, unless ``direct`` (the same tool, callable
        without its server's request machinery) is given. ``prefixed=False`` keeps the
        server's own tool name (Archipelago's naming for a single server).

        Built without validation (``model_construct``: a world's tools are wrapped anew for
        every trial): every field is the inner tool's, validated when it was made, and the
        name joins a server name that ``AppsConfig`` checked to the inner tool's."""
        tool = cls.model_construct(
            name=f"{server_name}_{inner.name}" if prefixed else inner.name,
            title=inner.title,
            description=inner.description,
            parameters=inner.parameters,
            output_schema=inner.output_schema,
            annotations=inner.annotations,
            tags=inner.tags,
            meta=inner.meta,
            icons=inner.icons,
        )
        called = direct or inner
        tool._inner, tool._gateway = called, gateway
        tool._server_name, tool._tool_name = server_name, inner.name
        tool._context_free = direct is not None
        tool._writes = not (inner.annotations is not None and inner.annotations.read_only_hint)
        # traced_tool is called.run itself unless traces are on (atoll.telemetry)
        run = telemetry.traced_tool(called.run, tool=tool.name, server=server_name)
        tool._hot = _HotPath(run, gateway, server_name, inner.name)
        return tool

    @property
    def context_free(self) -> bool:
        """True when calling it needs no MCP request context: it calls one of our app servers'
        tools directly (``mcp_servers.direct_tools``). The ``/mcp`` fast path serves only these."""
        return self._context_free

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        hot: _HotPath = self._hot
        gateway = hot.gateway
        gateway.in_flight += 1
        started = time.perf_counter()
        outcome = "exception"
        try:
            coworkers = gateway.coworkers
            if coworkers is not None and coworkers.has_due():
                await coworkers.deliver_due()  # a persona's reply due by now is there first
            result = await hot.run(arguments)
            outcome = "error" if result.is_error else "ok"
            if (
                coworkers is not None
                and self._writes
                and not result.is_error
                and coworkers.watches(hot.server_name)
            ):
                await coworkers.noticed(hot.server_name, result.structured_content)
            return result
        finally:
            gateway.in_flight -= 1
            if gateway.in_flight == 0:
                gateway.idle.set()
            if gateway.metrics is not None:
                hot.count(gateway.metrics, outcome, time.perf_counter() - started)


class _HotPath:
    """A gateway tool's call path: the inner tool's ``run``, its gateway, and its metric
    children (prometheus ``labels()`` looked up once per tool and outcome, not per call)."""

    __slots__ = ("run", "gateway", "server_name", "tool_name", "_calls", "_seconds")

    def __init__(
        self, run: Callable[..., Awaitable[ToolResult]], gateway: Gateway, server: str, tool: str
    ) -> None:
        self.run = run
        self.gateway = gateway
        self.server_name, self.tool_name = server, tool
        self._calls: dict[str, Any] = {}
        self._seconds: Any = None

    def count(self, metrics: EnvironmentMetrics, outcome: str, elapsed: float) -> None:
        calls = self._calls.get(outcome)
        if calls is None:
            calls = self._calls[outcome] = metrics.tool_calls.labels(
                self.server_name, self.tool_name, outcome
            )
        if self._seconds is None:
            self._seconds = metrics.tool_call_seconds.labels(self.server_name, self.tool_name)
        calls.inc()
        self._seconds.observe(elapsed)


class ClientTool(Tool):
    """A tool of a server the gateway reaches through an MCP client: a stdio child, an HTTP or
    SSE server, or an in-process server that is not one of ours (over fastmcp's in-memory
    transport, so its lifespan, middleware and request context are its own).

    ``run()`` sends ``tools/call`` with the client's public ``call_tool_mcp`` and hands back the
    server's result as it came (content, structured content, ``isError``, ``_meta``); a
    transport failure raises, as it did for fastmcp's proxy tools.
    """

    _client: Any = None
    _remote_name: str = ""
    #: the server declared a non-object output schema: results are wrapped under ``result``
    _wraps_result: bool = False

    @classmethod
    def listed(cls, client: Client, listed: mcp_types.Tool, described: Tool | None = None) -> ClientTool:
        """The gateway's view of ``listed`` (from ``tools/list``), called through ``client``.
        ``described`` is the same tool as an in-process server lists it: its description is
        kept as the server has it (a wire listing fills in defaults, such as a title)."""
        output_schema, wraps = _object_output_schema(listed.output_schema)
        if described is not None and not wraps:
            tool = cls(
                name=listed.name,
                title=described.title,
                description=described.description,
                parameters=described.parameters,
                output_schema=described.output_schema,
                annotations=described.annotations,
                tags=described.tags,
                meta=described.meta,
                icons=described.icons,
                execution=described.execution,
            )
        else:
            fastmcp_meta = (listed.meta or {}).get("fastmcp")
            tags = fastmcp_meta.get("tags", []) if isinstance(fastmcp_meta, dict) else []
            tool = cls(
                name=listed.name,
                title=listed.title,
                description=listed.description,
                parameters=listed.input_schema,
                output_schema=output_schema,
                annotations=listed.annotations,
                tags=set(tags),
                meta=listed.meta,
                icons=listed.icons,
                execution=listed.execution,
            )
        tool._client, tool._remote_name, tool._wraps_result = client, listed.name, wraps
        return tool

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        client: Client = self._client
        result = await client.call_tool_mcp(self._remote_name, arguments)
        return _client_result(result, wrap=self._wraps_result)


def _object_output_schema(schema: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """An output schema a ToolResult can satisfy, and whether results must be wrapped.

    MCP servers on protocols before 2026-07-28 (and FastMCP on every protocol) declare object
    schemas; a non-object one is presented wrapped under ``result``, as FastMCP presents its
    own tools that return a number or a list, so every client can validate what it gets."""
    if schema is None or schema.get("type", "object") == "object":
        return schema, False
    wrapped = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    return wrapped, True


def _client_result(result: mcp_types.CallToolResult, *, wrap: bool) -> ToolResult:
    """``result`` as the server sent it, less the ``_meta`` keys of the gateway's connection."""
    meta = {key: value for key, value in (result.meta or {}).items() if key not in _CONNECTION_META_KEYS}
    structured = result.structured_content
    if wrap and structured is not None:
        structured = {"result": structured}
        fastmcp_meta = meta.get("fastmcp")
        meta["fastmcp"] = {**(fastmcp_meta if isinstance(fastmcp_meta, dict) else {}), "wrap_result": True}
    elif structured is not None and not isinstance(structured, dict):
        # Only a tool without an output schema gets here: its value still reaches the client,
        # as text (MCP results carry object structured content).
        structured = None
    return ToolResult.from_mcp_result(
        result.model_copy(update={"meta": meta or None, "structured_content": structured})
    )


@dataclass(eq=False)
class Gateway:
    """An open set of servers and their tools. ``tools`` maps gateway name → tool."""

    config: AppsConfig
    metrics: EnvironmentMetrics | None = None
    tools: dict[str, GatewayTool] = field(default_factory=dict)
    in_flight: int = 0
    idle: anyio.Event = field(default_factory=anyio.Event)
    clients: dict[str, Client] = field(default_factory=dict)
    #: server name -> what builds that in-process server's indexes ahead of its first call
    warmers: dict[str, Callable[[], Any]] = field(default_factory=dict)
    world_replaced: bool = False
    #: the world's personas (environment/coworkers.py), told of the chat and mail servers' writes
    coworkers: CoworkerEngine | None = None
    _close_requested: anyio.Event = field(default_factory=anyio.Event)
    _closed: anyio.Event = field(default_factory=anyio.Event)

    async def lost_servers(self, timeout_s: float = 2.0) -> list[str]:
        """Names of stdio/HTTP servers that no longer answer (e.g. a crashed child)."""
        lost = []
        for name, client in self.clients.items():
            answered = False
            with anyio.move_on_after(timeout_s):
                try:
                    # tools/list, not ping: some servers answer ping with "method not found".
                    await client.list_tools()
                    answered = True
                except McpError as exc:
                    # An MCP-level error is still an answer, unless it says the connection is gone.
                    answered = exc.error.code != _CONNECTION_CLOSED
                except Exception:
                    answered = False
            if not answered:
                lost.append(name)
        return lost

    def tool_table(self) -> list[dict[str, Any]]:
        """The tools as ``GET /apps`` lists them, sorted by name."""
        return [
            {
                "name": name,
                "server": tool._server_name,
                "tool": tool._tool_name,
                "description": tool.description,
            }
            for name, tool in sorted(self.tools.items())
        ]

    async def retire(self, drain_timeout_s: float) -> None:
        """Let in-flight calls finish (up to ``drain_timeout_s``), then close every server."""
        if self.in_flight:
            self.idle = anyio.Event()
            with anyio.move_on_after(drain_timeout_s):
                while self.in_flight:
                    await self.idle.wait()
            if self.in_flight:
                logger.warning("closing gateway with calls in flight", extra={"in_flight": self.in_flight})
        self._close_requested.set()
        await self._closed.wait()


@dataclass
class _OpenedServer:
    name: str
    tools: list[Tool]
    #: tool name → the server's own tool object, for tools the gateway may call directly
    direct: dict[str, Tool] = field(default_factory=dict)
    warm: Callable[[], Any] | None = None


class GatewayManager:
    """Holds the live gateway and swaps it atomically. Use as an async context manager."""

    def __init__(
        self,
        *,
        fs_root: Path,
        apps_data_root: Path,
        ready_timeout_s: float = 30.0,
        drain_timeout_s: float = 10.0,
        metrics: EnvironmentMetrics | None = None,
        server_factory: ServerFactory | None = None,
        tool_names: ToolNames = "atoll",
        on_swap: Callable[[], Awaitable[Any]] | None = None,
        coworkers: CoworkerEngine | None = None,
    ) -> None:
        """``on_swap`` is awaited after each swap that changed the gateway (the app uses it to
        tell connected MCP sessions that the tool list changed)."""
        self.fs_root = fs_root
        self.tool_names = tool_names
        self.on_swap = on_swap
        self.coworkers = coworkers
        self.apps_data_root = apps_data_root
        self.ready_timeout_s = ready_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.metrics = metrics
        self.server_factory = server_factory or _default_server_factory
        self.current = self._empty_gateway()
        self._swap_lock = anyio.Lock()
        self._task_group: TaskGroup | None = None
        self._exit_stack: AsyncExitStack | None = None

    async def __aenter__(self) -> GatewayManager:
        self._exit_stack = AsyncExitStack()
        self._task_group = await self._exit_stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        async with self._swap_lock:
            old, self.current = self.current, self._empty_gateway()
            await old.retire(0)
        assert self._exit_stack is not None
        await self._exit_stack.__aexit__(*exc_info)

    def _empty_gateway(self) -> Gateway:
        # No servers and no task: retiring it has nothing to wait for.
        gateway = Gateway(AppsConfig(), self.metrics)
        gateway._closed.set()
        return gateway

    def world_replaced(self) -> None:
        """The world was replaced: the next ``apply`` rebuilds even an identical config, so no
        server state (caches, sessions) carries over from one world to the next."""
        self.current.world_replaced = True
        if self.coworkers is not None:
            self.coworkers.world_replaced()

    def warm(self) -> threading.Thread | None:
        """Build the live gateway's app-data indexes (mail, calendar, chat) in the background.

        Called after every swap and after every populate, so that an agent's first call finds
        them built. One daemon thread runs the servers' ``warm()`` one after the other, and
        stops early once another gateway has become live. A tool call that arrives while an
        index is being built waits for that build rather than starting a second (each file
        version is parsed once). Returns the thread (tests join it), or None when no server
        of the gateway has anything to build.
        """
        gateway = self.current
        if not gateway.warmers:
            return None
        thread = threading.Thread(
            target=_warm_gateway, args=(self, gateway), name="atoll-warm-indexes", daemon=True
        )
        thread.start()
        return thread

    async def apply(self, config: AppsConfig) -> bool:
        """Make ``config`` live. Returns False when it already was (a no-op).

        An identical config is rebuilt anyway when the world was replaced since, or when one of
        its servers no longer answers. Raises GatewayNotReady (naming every failing server) or
        ToolNameCollision; in both cases the previous gateway keeps serving, untouched.
        """
        async with self._swap_lock:
            if config == self.current.config and not self.current.world_replaced:
                lost = await self.current.lost_servers()
                if not lost:
                    return False
                # Same config, but a server died: rebuild rather than keep a broken gateway.
                logger.warning("rebuilding gateway: servers lost", extra={"servers": lost})
            if self._task_group is None:
                raise RuntimeError("GatewayManager used outside its 'async with' block")
            new = await self._task_group.start(self._run_gateway, config)
            old, self.current = self.current, new
            self.warm()
        if self.metrics is not None:
            self.metrics.gateway_servers.set(len(config.mcpServers))
            self.metrics.gateway_tools.set(len(new.tools))
        await old.retire(self.drain_timeout_s)
        if self.on_swap is not None:
            try:
                await self.on_swap()
            except Exception as exc:  # a client that cannot be told must not fail the swap
                logger.warning("tools/list_changed not delivered", extra={"error": describe_error(exc)})
        return True

    async def _run_gateway(self, config: AppsConfig, *, task_status: TaskStatus[Gateway]) -> None:
        gateway = Gateway(config, self.metrics)
        if self.coworkers is not None:
            self.coworkers.attach(config)
            gateway.coworkers = self.coworkers
        async with AsyncExitStack() as stack:
            opened = await self._open_servers(config, stack, gateway.clients)
            prefixed = not (self.tool_names == "archipelago" and len(opened) == 1)
            for server in opened:
                for tool in server.tools:
                    wrapped = GatewayTool.wrap(
                        gateway, server.name, tool, server.direct.get(tool.name), prefixed=prefixed
                    )
                    clash = gateway.tools.get(wrapped.name)
                    if clash is not None:
                        raise ToolNameCollision(
                            wrapped.name, (clash._server_name, clash._tool_name), (server.name, tool.name)
                        )
                    gateway.tools[wrapped.name] = wrapped
                if server.warm is not None:
                    gateway.warmers[server.name] = server.warm
            task_status.started(gateway)
            await gateway._close_requested.wait()
        gateway._closed.set()

    async def _open_servers(
        self, config: AppsConfig, stack: AsyncExitStack, clients: dict[str, Client]
    ) -> list[_OpenedServer]:
        """Start every server concurrently; raise GatewayNotReady naming all that failed."""
        failures: dict[str, str] = {}
        opened: dict[str, _OpenedServer] = {}
        inprocess: dict[str, FastMCP] = {}

        async def attempt(name: str, step: Awaitable[Any]) -> Any:
            try:
                return await asyncio.wait_for(step, self.ready_timeout_s)
            except TimeoutError:
                failures[name] = f"not ready within {self.ready_timeout_s:g} s"
            except Exception as exc:  # any failure of a server is reported, by name
                failures[name] = describe_error(exc)
            return None

        async def open_client(
            name: str,
            target: Any,
            listed: Sequence[Tool] = (),
            direct: dict[str, Tool] | None = None,
            warm: Callable[[], Any] | None = None,
        ) -> None:
            """Connect a client to ``target`` (a transport, or an in-process FastMCP server) and
            list its tools. An in-process server's tools are described as it lists them
            (``listed``); those in ``direct`` are called directly, the others through the client."""
            from fastmcp import Client

            client = Client(target, timeout=None)
            stack.push_async_callback(_close_quietly, name, client)
            clients[name] = client
            described = {tool.name: tool for tool in listed}

            async def connect_and_list() -> list[Tool]:
                await client.__aenter__()
                listed = await client.list_tools()
                return [ClientTool.listed(client, tool, described.get(tool.name)) for tool in listed]

            tools = await attempt(name, connect_and_list())
            if tools is not None:
                opened[name] = _OpenedServer(name, tools, direct or {}, warm)

        async def build_inprocess(name: str, server_config: ServerConfig) -> None:
            def build() -> FastMCP | AppTools:
                return self.server_factory(
                    cast(str, server_config.server),  # an in-process server names one (ServerConfig)
                    fs_root=self.fs_root,
                    apps_data_root=self.apps_data_root,
                    mode=server_config.mode,
                    options=dict(server_config.options),
                )

            server = await attempt(name, anyio.to_thread.run_sync(build))
            if isinstance(server, FastMCP):
                inprocess[name] = server
            elif server is not None:  # our own server's tools: listed and called as they are
                tools = list(server.tools)
                opened[name] = _OpenedServer(name, tools, {tool.name: tool for tool in tools}, server.warm)

        steps = []
        for name, server_config in config.mcpServers.items():
            if server_config.transport == "inprocess":
                steps.append(build_inprocess(name, server_config))
            else:
                steps.append(open_client(name, _client_transport(server_config)))
        await asyncio.gather(*steps)

        # A FastMCP server of our own (a test's factory may build one) is called directly too;
        # any other in-process server is served by itself, through a client.
        remaining = []
        for name, server in inprocess.items():
            try:
                listed = await asyncio.wait_for(server.list_tools(), self.ready_timeout_s)
            except Exception as exc:
                failures[name] = describe_error(exc)
                continue
            direct = _direct_tools(server)
            warm = _server_warmer(server)
            if direct and all(tool.name in direct for tool in listed):
                opened[name] = _OpenedServer(name, list(listed), direct, warm)
            else:
                remaining.append(open_client(name, server, listed, direct, warm))
        await asyncio.gather(*remaining)

        if failures:
            raise GatewayNotReady(failures)
        return [opened[name] for name in config.mcpServers]


def _direct_tools(server: FastMCP) -> dict[str, Tool]:
    """The tools of one of our app servers (``mcp_servers.direct_tools``): callable with their
    public ``run()``, without their server's request machinery. Empty for any other server."""
    from mcp_servers import direct_tools

    return direct_tools(server)


def _client_transport(server_config: ServerConfig) -> Any:
    from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport

    if server_config.transport == "stdio":
        assert server_config.command is not None
        return StdioTransport(
            command=server_config.command,
            args=list(server_config.args),
            env=server_config.env,
            cwd=server_config.cwd,
        )
    assert server_config.url is not None
    if server_config.transport == "sse":
        return SSETransport(server_config.url, headers=server_config.headers)
    return StreamableHttpTransport(server_config.url, headers=server_config.headers)


async def _close_quietly(name: str, client: Client) -> None:
    try:
        with anyio.CancelScope(shield=True):
            await client.close()
    except Exception as exc:  # closing a dead server must not hide the real outcome
        logger.debug("closing MCP server failed", extra={"server": name, "error": describe_error(exc)})
