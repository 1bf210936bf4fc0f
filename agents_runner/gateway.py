"""MCP client to the environment's gateway (Streamable HTTP, bearer token).

The agent reaches the world only through this client.  Tool errors reported by a server come
back as results (``is_error``) for the model to read; a gateway that cannot be reached raises
:class:`GatewayUnavailable`, which ends the run as an infrastructure error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import ssl
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import httpx2
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from atoll.errors import CodedError, ErrorCode
from atoll.tool_listing import DIGEST_HEADER, listing_digest
from atoll.tool_schemas import fit_description, portable_schema


class GatewayUnavailable(CodedError):
    """The MCP gateway could not be reached or broke the protocol."""

    code = ErrorCode.gateway_unavailable


@dataclass(frozen=True)
class ToolSpec:
    """A gateway tool as the model sees it."""

    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def summary(self) -> str:
        """The first line of the description (for listings)."""
        first = self.description.strip().splitlines()[0] if self.description.strip() else ""
        return first[:200]

    def as_openai_tool(self) -> dict[str, Any]:
        """The tool as litellm takes it, within every provider's rules (atoll.tool_schemas):
        the description fits 1024 characters, the parameters are made portable (our servers
        publish them so already; another MCP server's may not be), and a tool without arguments
        has none, since Gemini refuses an OBJECT without properties and OpenAI documents an
        omitted ``parameters`` as an empty parameter list. A new dict every call."""
        function: dict[str, Any] = {"name": self.name, "description": fit_description(self.description)}
        parameters = portable_schema(self.input_schema) if self.input_schema else {}
        if parameters.get("properties") or parameters.get("anyOf"):
            function["parameters"] = {**parameters, "type": "object"}
        return {"type": "function", "function": function}


@dataclass
class ImagePart:
    mime_type: str
    data_base64: str

    @property
    def size_bytes(self) -> int:
        return len(self.data_base64) * 3 // 4


@dataclass
class ToolOutcome:
    """What one tool call returned: flattened text, images, and whether it failed."""

    text: str
    is_error: bool = False
    images: list[ImagePart] = field(default_factory=list)
    timed_out: bool = False


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every session of this process: making one loads the CA
    bundle (milliseconds of CPU), and every trial opens a session."""
    return httpx2.create_ssl_context()


@dataclass
class _Announced:
    """The listing digest the gateway last named in a reply (atoll.tool_listing), if any."""

    digest: str | None = None


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    *,
    announced: _Announced | None = None,
    **_ignored: Any,
) -> httpx2.AsyncClient:
    """The MCP session's HTTP client, as the MCP SDK makes it (its timeouts; redirects not
    followed: ``follow_redirects`` the transport passes is ignored), with the shared TLS context.
    ``announced`` records the listing digest the gateway names in its replies."""
    hooks: dict[str, list[Any]] = {}
    if announced is not None:

        async def note_digest(response: httpx2.Response) -> None:
            value = response.headers.get(DIGEST_HEADER)
            if value is not None and len(value) == 64:
                announced.digest = value

        hooks["response"] = [note_digest]
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        auth=auth,
        verify=_tls_context(),
        event_hooks=hooks,
    )


#: tools/list results this process was served, by the digest it computed from each
#: (atoll.tool_listing), with the toolbelt made of it; the most recently used kept.
_LISTINGS: OrderedDict[str, tuple[Any, list[ToolSpec]]] = OrderedDict()
_MAX_LISTINGS = 16
_listings_lock = threading.Lock()


def _held_listing(digest: str | None) -> tuple[Any, list[ToolSpec]] | None:
    if digest is None:
        return None
    with _listings_lock:
        held = _LISTINGS.get(digest)
        if held is not None:
            _LISTINGS.move_to_end(digest)
        return held


def _hold_listing(digest: str, listing: Any, tools: list[ToolSpec]) -> None:
    with _listings_lock:
        _LISTINGS[digest] = (listing, tools)
        while len(_LISTINGS) > _MAX_LISTINGS:
            _LISTINGS.popitem(last=False)


#: Compiled output-schema validators of every session of this process, by canonical schema.
_VALIDATORS: dict[str, Any] = {}
_MAX_VALIDATORS = 4096


def _share_output_validators(session: Any) -> None:
    """Let ``session`` reuse the validators other sessions compiled for the same output schema.

    The SDK validates each tool result against the tool's output schema and compiles that
    schema (``check_schema``, about 60 times a validation) once per session; a trial opens a
    session of its own, so every trial paid it again for every tool it called (a tenth of the
    replay agent's CPU per trial). Keyed by the schema itself, a validator is the SDK's own,
    compiled by the session that first met that schema."""
    compile_here = session._output_schema_validator

    def validator(name: str, output_schema: dict[str, Any]) -> Any:
        key = json.dumps(output_schema, sort_keys=True, separators=(",", ":"))
        found = _VALIDATORS.get(key)
        if found is None:
            found = compile_here(name, output_schema)  # raises for an invalid schema, as before
            if len(_VALIDATORS) < _MAX_VALIDATORS:
                _VALIDATORS[key] = found
        return found

    session._output_schema_validator = validator


class Gateway:
    """An open MCP session to the gateway; use as ``async with Gateway(url, token) as gateway``."""

    def __init__(self, url: str, token: str | None = None, *, connect_timeout_s: float = 30.0) -> None:
        self.url = url
        self._announced = _Announced()
        transport = StreamableHttpTransport(
            url,
            auth=token or None,
            httpx_client_factory=functools.partial(_http_client, announced=self._announced),
        )
        self._client = Client(transport, timeout=None, init_timeout=connect_timeout_s)
        self._tools: list[ToolSpec] | None = None

    async def __aenter__(self) -> Gateway:
        try:
            await self._client.__aenter__()
        except Exception as exc:
            raise GatewayUnavailable(
                f"cannot connect to MCP gateway {self.url}: {_describe(exc, quote_reply=False)}"
            ) from exc
        _share_output_validators(self._client.session)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # closing a broken session must not hide the run's own outcome
        with contextlib.suppress(Exception):
            await self._client.__aexit__(*exc_info)

    async def list_tools(self) -> list[ToolSpec]:
        """All gateway tools (cached for the session).

        When the gateway names the digest of its listing (atoll.tool_listing) and a session of
        this process was already served a listing with that digest, that listing is taken
        instead of fetched: the SDK's session absorbs it as it absorbs a listing from its own
        response cache, so tool results are still checked against their output schemas."""
        if self._tools is None:
            digest = self._announced.digest
            held = _held_listing(digest)
            absorb = getattr(self._client.session, "_absorb_tool_listing", None)
            if held is not None and absorb is not None:
                listing, tools = held
                absorb(listing.model_copy(), complete=True)  # a copy: the SDK sets its ``tools``
                self._tools = tools
            else:
                try:
                    listing = await self._client.list_tools_mcp()
                    # a listing in pages (not ours): all of them, and nothing kept
                    listed = listing.tools if listing.next_cursor is None else await self._client.list_tools()
                except Exception as exc:
                    raise GatewayUnavailable(f"listing tools on {self.url} failed: {_describe(exc)}") from exc
                self._tools = [
                    ToolSpec(
                        name=tool.name,
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema or {}),
                    )
                    for tool in listed
                ]
                if digest is not None and listing.next_cursor is None and listing_digest(listing) == digest:
                    _hold_listing(digest, listing, self._tools)
        return list(self._tools)

    async def call(self, name: str, arguments: dict[str, Any], *, timeout_s: float) -> ToolOutcome:
        """Call a tool; a per-call timeout becomes an error result, not an exception.

        Raises :class:`GatewayUnavailable` when the gateway itself fails."""
        if self._tools is None and self._announced.digest is not None:
            # The SDK would fetch the listing itself to check this result against the tool's
            # output schema; a gateway that names its listing lets this session take it from
            # an earlier one (and a first session keeps it for the next).
            await self.list_tools()
        try:
            result = await self._client.call_tool(name, arguments, timeout=timeout_s, raise_on_error=False)
        except Exception as exc:
            if "timed out" in str(exc).lower():
                return ToolOutcome(
                    text=f"error: tool call timed out after {timeout_s:g} s", is_error=True, timed_out=True
                )
            raise GatewayUnavailable(f"tool call {name} failed at the gateway: {_describe(exc)}") from exc
        return _flatten(result)


def _flatten(result: Any) -> ToolOutcome:
    texts: list[str] = []
    images: list[ImagePart] = []
    for part in result.content or []:
        kind = getattr(part, "type", "")
        if kind == "text":
            texts.append(part.text)
        elif kind == "image":
            images.append(ImagePart(mime_type=part.mime_type, data_base64=part.data))
        elif kind == "resource":
            resource = part.resource
            text = getattr(resource, "text", None)
            texts.append(text if text is not None else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            texts.append(f"[resource {part.uri}]")
        elif kind == "audio":
            texts.append("[audio content omitted]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return ToolOutcome(text="\n".join(texts), is_error=bool(result.is_error), images=images)


def _describe(exc: BaseException, *, quote_reply: bool = True) -> str:
    """``Type: message`` of the innermost exception, in one line of at most 300 characters.

    ``quote_reply=False`` keeps the message only up to its first ``": "``: before the MCP
    handshake succeeds, whatever answered is not known to be a gateway, and the parse errors
    of its reply quote it (``input_value={…}``). The caller chooses the URL (the agents
    runner's ``gateway_url``), so quoting would hand it the body of any internal HTTP service
    the runner can reach."""
    # ExceptionGroups from anyio task groups hide the cause; show the innermost one.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().replace("\n", " ")
    if not quote_reply:
        text = text.split(": ", 1)[0]
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__
