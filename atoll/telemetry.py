"""OpenTelemetry traces of trials, following the GenAI semantic conventions (docs/interop.md,
"OpenTelemetry"): one mechanism every service uses.

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (and
``OTEL_SDK_DISABLED`` is not ``true``), decided once when this module is imported. Off costs
nothing: the OpenTelemetry SDK and exporter are never imported, no span object is made, and every
helper returns at once (:func:`traced_tool` hands back the function it was given, so the gateway's
hot path is untouched). On, the first span installs the SDK's tracer provider with a batching
OTLP/HTTP exporter, configured by the standard ``OTEL_*`` variables (endpoint, headers, timeout,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_SCHEDULE_DELAY``, …); the MCP SDK
and fastmcp then emit their own MCP spans into the same traces.

One trace per trial: the trial span (:mod:`orchestrator.scheduler`) is the root; W3C
``traceparent`` goes on every HTTP call between the services (:func:`httpx_hooks` on the clients,
:func:`service_options` on the services) and in each MCP request's ``params._meta`` (the MCP SDK
injects it; fastmcp extracts it in the environment).

    with telemetry.span("trial", attributes={"atoll.trial.id": trial_id}) as current:
        ...
        telemetry.set_attributes(current, {"atoll.outcome": "pass"})

Spans: ``trial``; ``invoke_agent {agent}`` (:mod:`agents_runner.runner`); ``chat {model}`` for
every model call, the judge's included (:func:`chat_span`, from :func:`atoll.llm.complete`);
``execute_tool {tool}`` on the agent's side and, as its descendant, on the environment's gateway
(:func:`traced_tool`); the services' ``{METHOD} {route}`` server spans are FastAPI's own
(:func:`service_options`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from atoll.settings import environ as process_environ

logger = logging.getLogger("atoll.telemetry")


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default: the process environment) asks for traces: an OTLP
    endpoint is set and the SDK is not disabled."""
    environ = process_environ() if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(
        environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )


#: Decided once, at import: read as ``telemetry.ENABLED`` (never copied) by every hook.
ENABLED: bool = wanted()

_lock = threading.Lock()
_service_name = "atoll"
_tracer: Any = None
_provider: Any = None

#: litellm provider → the well-known ``gen_ai.provider.name`` value (others pass unchanged).
_PROVIDER_NAMES = {
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "moonshot": "moonshot_ai",
    "watsonx": "ibm.watsonx.ai",
    "xai": "x_ai",
}

#: Paths whose requests get no server span: probes, and /mcp (MCP carries its trace context in
#: each message's ``params._meta``, which fastmcp reads; see the MCP semantic conventions).
_UNTRACED_PATHS = ("/health", "/metrics", "/mcp")


def set_service_name(name: str) -> None:
    """The ``service.name`` of this process's traces unless ``OTEL_SERVICE_NAME`` (or
    ``OTEL_RESOURCE_ATTRIBUTES``) names one; effective only before the first span."""
    global _service_name
    _service_name = name


def _get_tracer() -> Any:
    """The process's tracer, installing the SDK on first use; None when it cannot be installed."""
    global _tracer, _provider, ENABLED
    if _tracer is not None or not ENABLED:
        return _tracer
    with _lock:
        if _tracer is not None:
            return _tracer
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            ENABLED = False
            logger.warning(
                "an OTLP endpoint is set but the OpenTelemetry SDK is not installed (%s): no traces; "
                "install atoll[otel]",
                exc,
            )
            return None
        from atoll import __version__

        resource = Resource.create({})
        if str(resource.attributes.get(SERVICE_NAME, "unknown_service")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: _service_name}))
        _provider = TracerProvider(resource=resource)  # flushes at interpreter exit
        _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(_provider)
        _tracer = trace.get_tracer("atoll", __version__)
    return _tracer


def shutdown() -> None:
    """Export what is buffered and stop (a service calls it as it stops: a signal may end the
    process before the interpreter's exit handlers run). No-op when off."""
    if _provider is not None:
        _provider.shutdown()


#: Longest text taken into a span name or attribute from what a model or a task file wrote
#: (tool names, call ids): an agent's output must not bloat every exported batch.
MAX_TEXT = 256
#: Most finish reasons recorded from one response.
_MAX_REASONS = 16


def bounded(text: str | None) -> str | None:
    """``text`` cut to :data:`MAX_TEXT` characters (None stays None)."""
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - 1] + "…"


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (attributes or {}).items() if value is not None}


@contextmanager
def span(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """A span current for the ``with`` block (None when off). ``kind``: internal, client or
    server. An exception leaving the block marks the span as an error with ``error.type`` its
    class name."""
    tracer = _get_tracer() if ENABLED else None
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(
        name, kind=getattr(SpanKind, kind.upper()), attributes=_clean(attributes)
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if current.is_recording() and "error.type" not in getattr(current, "attributes", {}):
                current.set_attribute("error.type", type(exc).__qualname__)
            raise


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` (None values skipped) on a span from :func:`span`; no-op for None."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def mark_error(current: Any, error_type: str, description: str | None = None) -> None:
    """Record that the operation failed without an exception (``error.type`` and ERROR status)."""
    if current is None:
        return
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, description))


# --- HTTP propagation --------------------------------------------------------------------------


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context (W3C ``traceparent``) to outgoing ``headers``; no-op when off."""
    if ENABLED and _get_tracer() is not None:
        from opentelemetry import propagate

        propagate.inject(headers)


async def _inject_request(request: Any) -> None:
    inject(request.headers)


def httpx_hooks() -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
    """``event_hooks`` for an ``httpx.AsyncClient`` that sends the trace context on every
    request; empty when off (the client then has no hook at all)."""
    return {"request": [_inject_request]} if ENABLED else {}


def _untraced(scope: MutableMapping[str, Any]) -> bool:
    return str(scope.get("path", "")).startswith(_UNTRACED_PATHS)


#: FastAPI's own server spans as the services want them: not for probes and /mcp, and without
#: its per-dependency spans, metrics and logs.
_FASTAPI_TELEMETRY: dict[str, Any] = {
    "exclude": _untraced,
    "operation_spans": False,
    "metrics": False,
    "logs": False,
}


def service_options(service: str) -> dict[str, Any]:
    """Start tracing a service: name this process's traces ``service``, install the SDK now (so
    that the first request is traced already), and return the ``FastAPI(...)`` keyword arguments
    for its app: FastAPI's native server spans ``{METHOD} {route}``, children of the caller's
    ``traceparent`` (FastAPI ≥ 0.165, which the ``otel`` extra requires). ``{}`` when off."""
    if not ENABLED:
        return {}
    set_service_name(service)
    return {"telemetry": _FASTAPI_TELEMETRY} if _get_tracer() is not None else {}


# --- GenAI spans -------------------------------------------------------------------------------


def provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a litellm provider (``gemini`` → ``gcp.gemini``)."""
    return _PROVIDER_NAMES.get(provider, provider)


def _server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return {"server.address": parts.hostname, "server.port": port}


def chat_span(
    *,
    model: str,
    provider: str,
    api_base: str | None,
    role: str,
    arguments: Mapping[str, Any] | None,
    stream: bool,
) -> Any:
    """The ``chat {model}`` client span of one model call (all its retries); ``model`` is
    litellm's string, ``provider`` its provider part, ``role`` whose call it is (agent, judge)."""
    requested = model[len(provider) + 1 :] if model.startswith(provider + "/") else model
    arguments = arguments or {}
    return span(
        f"chat {requested}",
        kind="client",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(provider),
            "gen_ai.request.model": requested,
            "gen_ai.request.temperature": arguments.get("temperature"),
            "gen_ai.request.top_p": arguments.get("top_p"),
            "gen_ai.request.max_tokens": arguments.get("max_tokens")
            or arguments.get("max_completion_tokens"),
            "gen_ai.request.seed": arguments.get("seed"),
            "gen_ai.request.stream": True if stream else None,
            "atoll.model": model,
            "atoll.role": role,
            **_server(api_base),
        },
    )


def record_completion(current: Any, completion: Any) -> None:
    """Response attributes of a ``chat`` span from an :class:`atoll.llm.Completion`."""
    if current is None:
        return
    response = completion.response
    reasons = [
        str(choice.finish_reason)
        for choice in getattr(response, "choices", None) or []
        if getattr(choice, "finish_reason", None)
    ]
    set_attributes(
        current,
        {
            "gen_ai.response.model": bounded(getattr(response, "model", None) or None),
            "gen_ai.response.id": bounded(getattr(response, "id", None) or None),
            "gen_ai.response.finish_reasons": [bounded(reason) for reason in reasons[:_MAX_REASONS]] or None,
            "gen_ai.usage.input_tokens": completion.prompt_tokens,
            "gen_ai.usage.output_tokens": completion.completion_tokens,
            "gen_ai.usage.reasoning.output_tokens": completion.reasoning_tokens or None,
            "gen_ai.usage.cache_read.input_tokens": completion.cached_tokens or None,
            "atoll.cost_usd": float(completion.cost_usd),
            "atoll.retries": completion.retries or None,
        },
    )


def agent_span(*, agent: str, model: str, trial_id: str | None, task_id: str | None) -> Any:
    """The ``invoke_agent {agent}`` internal span of one agent run."""
    provider = model.split("/", 1)[0] if "/" in model else model
    requested = model.split("/", 1)[1] if "/" in model else model
    return span(
        f"invoke_agent {agent}",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider_name(provider),
            "gen_ai.request.model": requested,
            "gen_ai.conversation.id": trial_id,
            "atoll.model": model,
            "atoll.trial.id": trial_id,
            "atoll.task.id": task_id,
        },
    )


def tool_span_fields(
    name: str, *, call_id: str | None = None, gateway_url: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The name and attributes of the agent's ``execute_tool`` span; the tool name and call id
    (written by the model, or a task's reference solution) are cut to :data:`MAX_TEXT`."""
    name = bounded(name) or ""
    return f"execute_tool {name}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": bounded(call_id),
        "mcp.method.name": "tools/call",
        "atoll.mcp.gateway": gateway_url,
        **_server(gateway_url),
    }


def tool_span(name: str, *, call_id: str | None = None, gateway_url: str | None = None) -> Any:
    """The agent's ``execute_tool {name}`` span of one MCP tool call through the gateway."""
    span_name, attributes = tool_span_fields(name, call_id=call_id, gateway_url=gateway_url)
    return span(span_name, attributes=attributes)


Run = TypeVar("Run", bound=Callable[..., Awaitable[Any]])


def traced_tool(run: Run, *, tool: str, server: str) -> Run:
    """``run`` (a tool's ``async run(arguments)``) wrapped in the gateway's ``execute_tool
    {tool}`` span naming its MCP ``server``; ``run`` itself when off."""
    if not ENABLED:
        return run
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "mcp.method.name": "tools/call",
        "atoll.mcp.server": server,
    }

    async def traced(arguments: dict[str, Any]) -> Any:
        with span(f"execute_tool {tool}", attributes=attributes) as current:
            result = await run(arguments)
            if getattr(result, "is_error", False):
                mark_error(current, "tool_error")
            return result

    return traced  # type: ignore[return-value]
